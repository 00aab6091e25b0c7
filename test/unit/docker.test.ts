/**
 * Static checks of docker/: no Docker engine needed. Each assertion fails when the image or the
 * compose file drifts from the repository (settings, ports, entry point, copied folders).
 */
import { expect } from 'chai';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse as parseYaml } from 'yaml';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const DOCKER_DIR = path.join(ROOT, 'docker');

const read = (relative: string) => readFileSync(path.join(ROOT, relative), 'utf8');

/** Instruction is one Dockerfile instruction with its continuation lines joined. */
interface Instruction {
  keyword: string;
  args: string;
}

/** dockerfileStages splits a Dockerfile into stages (FROM … up to the next FROM) of instructions. */
function dockerfileStages(text: string): Instruction[][] {
  const stages: Instruction[][] = [];
  let pending = '';
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (pending === '' && (line === '' || line.startsWith('#'))) continue;
    if (line.startsWith('#')) continue; // a comment inside a continued instruction
    if (line.endsWith('\\')) {
      pending += line.slice(0, -1) + ' ';
      continue;
    }
    const full = (pending + line).trim();
    pending = '';
    const match = /^(\S+)\s+([\s\S]*)$/.exec(full);
    if (!match) continue;
    const instruction = { keyword: match[1]!.toUpperCase(), args: match[2]!.trim() };
    if (instruction.keyword === 'FROM') stages.push([]);
    stages.at(-1)?.push(instruction);
  }
  return stages;
}

type ComposeService = {
  build?: { context?: string; dockerfile?: string };
  environment?: Record<string, unknown> | string[];
  ports?: (string | number | { target: number | string; published?: number | string })[];
  volumes?: (string | { target: string })[];
  depends_on?: string[] | Record<string, { condition?: string }>;
  healthcheck?: { test?: string | string[] };
  command?: string | string[];
  entrypoint?: string | string[];
};

/** environmentOf returns a compose service's environment as a name → value map (map or list form). */
function environmentOf(service: ComposeService): Record<string, string> {
  const env = service.environment ?? {};
  if (Array.isArray(env)) {
    return Object.fromEntries(
      env.map((entry) => {
        const [name, ...value] = entry.split('=');
        return [name!, value.join('=')];
      }),
    );
  }
  return Object.fromEntries(Object.entries(env).map(([name, value]) => [name, String(value ?? '')]));
}

/** containerPorts returns the container side of each published port: "8443", "30000-30099". */
function containerPorts(service: ComposeService): string[] {
  return (service.ports ?? []).map((entry) => {
    if (typeof entry === 'object') return String(entry.target);
    // [ip:][host:]container[/protocol]; the container part is the last colon-separated field.
    return String(entry).split('/')[0]!.split(':').at(-1)!;
  });
}

/** dependsOn returns the services a compose service waits for, with their condition. */
function dependsOn(service: ComposeService): Record<string, string> {
  const deps = service.depends_on ?? {};
  if (Array.isArray(deps)) return Object.fromEntries(deps.map((name) => [name, 'service_started']));
  return Object.fromEntries(
    Object.entries(deps).map(([name, dep]) => [name, dep.condition ?? 'service_started']),
  );
}

const compose = parseYaml(readFileSync(path.join(DOCKER_DIR, 'compose.yaml'), 'utf8')) as {
  services?: Record<string, ComposeService>;
};
const services = compose.services ?? {};
const gateway = services.gateway ?? {};
const gatewayEnv = environmentOf(gateway);

const stages = dockerfileStages(readFileSync(path.join(DOCKER_DIR, 'Dockerfile'), 'utf8'));
const runtime = stages.at(-1) ?? [];
const instructions = (keyword: string) => runtime.filter((i) => i.keyword === keyword);

const defaultConfigText = read('config/default.yaml');
const defaultConfig = parseYaml(defaultConfigText) as { ports: Record<string, string | number> };
/** DOCUMENTED_ENV is every SVC_* name config/default.yaml documents. */
const DOCUMENTED_ENV = new Set(defaultConfigText.match(/\bSVC_[A-Z0-9_]+\b/g) ?? []);
/** PORT_ENV maps each ports.* key of config/default.yaml to its SVC_* variable (from its comment). */
const PORT_ENV: Record<string, string> = {
  https: 'SVC_HTTPS_PORT',
  webdav: 'SVC_WEBDAV_PORT',
  ftp: 'SVC_FTP_PORT',
  ftps: 'SVC_FTPS_PORT',
  sftp: 'SVC_SFTP_PORT',
  ftp_pasv: 'SVC_FTP_PASV_PORTS',
};

/** The standard AWS SDK variables DESIGN.md names for S3 credentials. */
const AWS_ENV = new Set(['AWS_ACCESS_KEY_ID', 'AWS_SECRET_ACCESS_KEY', 'AWS_SESSION_TOKEN', 'AWS_REGION']);

/** dockerfileEnv parses the runtime stage's ENV instructions (key=value form). */
function dockerfileEnv(): Record<string, string> {
  const env: Record<string, string> = {};
  for (const { args } of instructions('ENV')) {
    for (const match of args.matchAll(/([A-Za-z_][A-Za-z0-9_]*)=("[^"]*"|\S*)/g)) {
      env[match[1]!] = match[2]!.replace(/^"|"$/g, '');
    }
  }
  return env;
}

/** jsonForm parses an exec-form instruction (CMD ["node", …]); shell form is rejected. */
function jsonForm(args: string): string[] {
  expect(args.startsWith('['), `exec form expected, got: ${args}`).to.equal(true);
  return JSON.parse(args) as string[];
}

describe('docker/', () => {
  describe('compose.yaml', () => {
    it('defines the gateway and its PostgreSQL', () => {
      expect(services).to.include.keys('gateway', 'postgres');
    });

    it('builds the gateway from the repository root with docker/Dockerfile', () => {
      const context = path.resolve(DOCKER_DIR, gateway.build?.context ?? '.');
      expect(context).to.equal(ROOT);
      expect(existsSync(path.join(context, gateway.build?.dockerfile ?? 'Dockerfile'))).to.equal(true);
    });

    it('gives the gateway only SVC_* variables that config/default.yaml documents (and AWS credentials)', () => {
      const names = Object.keys(gatewayEnv);
      expect(names).to.not.be.empty;
      const unknown = names.filter((name) => !(DOCUMENTED_ENV.has(name) || AWS_ENV.has(name)));
      expect(unknown, 'not documented in config/default.yaml').to.deep.equal([]);
    });

    it('points SVC_DATABASE_URL at a PostgreSQL service the gateway waits for until healthy', () => {
      const url = new URL(gatewayEnv.SVC_DATABASE_URL ?? '');
      expect(url.protocol).to.match(/^postgres(ql)?:$/);
      const db = services[url.hostname];
      expect(db, `service ${url.hostname}`).to.not.equal(undefined);
      expect(db!.healthcheck?.test, `${url.hostname} healthcheck`).to.not.equal(undefined);
      expect(dependsOn(gateway)[url.hostname]).to.equal('service_healthy');
      const dbEnv = environmentOf(db!);
      expect(decodeURIComponent(url.username)).to.equal(dbEnv.POSTGRES_USER);
      expect(decodeURIComponent(url.password)).to.equal(dbEnv.POSTGRES_PASSWORD);
      expect(url.pathname.slice(1)).to.equal(dbEnv.POSTGRES_DB);
    });

    it('with SVC_STORAGE=s3, points at an S3 service whose bucket a one-shot service creates first', () => {
      expect(defaultConfigText).to.match(/SVC_STORAGE:.*`local`.*`s3`/);
      expect(['local', 's3']).to.include(gatewayEnv.SVC_STORAGE ?? 'local');
      if (gatewayEnv.SVC_STORAGE !== 's3') return;
      const endpoint = new URL(gatewayEnv.SVC_S3_ENDPOINT ?? '');
      expect(services, 'S3 endpoint host').to.have.property(endpoint.hostname);
      const bucket = gatewayEnv.SVC_S3_BUCKET ?? '';
      expect(bucket).to.not.equal('');
      const creators = Object.entries(services).filter(([, s]) =>
        JSON.stringify([s.entrypoint, s.command]).includes(`/${bucket}`),
      );
      expect(
        creators.map(([name]) => name),
        `a service creating bucket ${bucket}`,
      ).to.have.lengthOf(1);
      expect(dependsOn(gateway)[creators[0]![0]]).to.equal('service_completed_successfully');
      expect(gatewayEnv.AWS_ACCESS_KEY_ID).to.be.a('string').and.not.equal('');
      expect(gatewayEnv.AWS_SECRET_ACCESS_KEY).to.be.a('string').and.not.equal('');
    });

    it("publishes the gateway's listener ports (defaults unless its environment moves them)", () => {
      const expected = Object.entries(defaultConfig.ports).map(([key, value]) =>
        String(gatewayEnv[PORT_ENV[key] ?? ''] ?? value),
      );
      expect(containerPorts(gateway).sort()).to.deep.equal(expected.filter((p) => p !== 'off').sort());
    });

    it('health-checks /healthz on the HTTPS port', () => {
      const test = JSON.stringify(gateway.healthcheck?.test ?? '');
      const https = String(gatewayEnv.SVC_HTTPS_PORT ?? defaultConfig.ports.https);
      expect(test).to.include('/healthz');
      expect(test).to.match(new RegExp(`\\b${https}\\b`));
    });

    it('keeps the data dir on a volume', () => {
      const dataDir = gatewayEnv.SVC_DATA_DIR ?? dockerfileEnv().SVC_DATA_DIR;
      const targets = (gateway.volumes ?? []).map((v) =>
        typeof v === 'string' ? v.split(':')[1] : v.target,
      );
      expect(targets).to.include(dataDir);
    });
  });

  describe('Dockerfile', () => {
    it('starts the bin/ entry point that package.json declares, and it exists', () => {
      const cmd = jsonForm(instructions('CMD').at(-1)?.args ?? '');
      const script = cmd.find((arg) => arg.endsWith('.js'));
      expect(script, 'script in CMD').to.be.a('string');
      const pkg = JSON.parse(read('package.json')) as { bin: Record<string, string> };
      expect(Object.values(pkg.bin)).to.include(script);
      expect(existsSync(path.join(ROOT, script!)), `${script} exists`).to.equal(true);
      expect(cmd.at(-1)).to.equal('serve');
    });

    it('exposes exactly the default ports of config/default.yaml', () => {
      const exposed = instructions('EXPOSE').flatMap(({ args }) =>
        args.split(/\s+/).map((p) => p.split('/')[0]!),
      );
      const defaults = Object.values(defaultConfig.ports).map(String);
      expect(Object.keys(defaultConfig.ports).sort()).to.deep.equal(Object.keys(PORT_ENV).sort());
      expect(exposed.sort()).to.deep.equal(defaults.sort());
    });

    it('sets SVC_DATA_DIR to a declared VOLUME', () => {
      expect(DOCUMENTED_ENV.has('SVC_DATA_DIR')).to.equal(true);
      const dataDir = dockerfileEnv().SVC_DATA_DIR;
      expect(dataDir, 'ENV SVC_DATA_DIR').to.be.a('string');
      const volumes = instructions('VOLUME').flatMap(({ args }) =>
        args.startsWith('[') ? (JSON.parse(args) as string[]) : args.split(/\s+/),
      );
      expect(volumes).to.include(dataDir);
    });

    it('copies every source folder tsconfig.json includes (tests aside) and the files they need', () => {
      const copied = instructions('COPY')
        .filter(({ args }) => !args.startsWith('--from'))
        .flatMap(({ args }) => args.split(/\s+/).slice(0, -1));
      for (const source of copied) {
        expect(existsSync(path.join(ROOT, source)), `COPY source ${source}`).to.equal(true);
      }
      const tsconfig = JSON.parse(read('tsconfig.json')) as { include: string[] };
      const needed = [...tsconfig.include.filter((dir) => dir !== 'test'), 'config', 'package.json'];
      expect(copied).to.include.members(needed);
    });

    it('runs as a non-root user', () => {
      const user = instructions('USER').at(-1)?.args;
      expect(user).to.be.a('string');
      expect(user).to.not.match(/^(root|0)(:|$)/);
    });
  });

  describe('.dockerignore', () => {
    it('keeps host-built node_modules and local data out of the build context', () => {
      const ignored = read('.dockerignore')
        .split('\n')
        .map((line) => line.trim().replace(/^\/|\/$/g, ''));
      expect(ignored).to.include.members(['node_modules', 'data']);
    });
  });
});
