/**
 * Static checks of docker/: no Docker engine needed. Each assertion fails when the image or the
 * compose file drifts from the repository (settings, ports, entry point, copied folders) or from
 * the balanced shape test/protocols/cluster.test.ts runs (named instances with their own passive
 * ranges behind HAProxy). The compose file is read as Debian's docker-compose resolves it
 * (`docker-compose config`), and HAProxy's own checker reads docker/haproxy.cfg.
 */
import { expect } from 'chai';
import { spawnSync } from 'node:child_process';
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
  image?: string;
  networks?: Record<string, { ipv4_address?: string } | null> | string[];
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

/** SECRET_FOR_CHECKS is what SVC_SECRET is set to for `docker-compose config` (it is mandatory). */
const SECRET_FOR_CHECKS = 'checked-by-docker-test';

/** composeConfig runs Debian's docker-compose on the file with `env`: its exit code and output. */
function composeConfig(args: string[], env: Record<string, string | undefined>) {
  const r = spawnSync('docker-compose', ['-f', path.join(DOCKER_DIR, 'compose.yaml'), 'config', ...args], {
    env: { ...process.env, ...env },
    encoding: 'utf8',
  });
  if (r.error) throw new Error(`docker-compose (Debian package docker-compose): ${r.error.message}`);
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

const resolved = composeConfig([], { SVC_SECRET: SECRET_FOR_CHECKS, SVC_PUBLIC_HOST: undefined });
const compose = parseYaml(resolved.stdout) as { services?: Record<string, ComposeService> };
const services = compose.services ?? {};
/** GATEWAYS are the named gateway instances (gateway1, gateway2, …), in order. */
const GATEWAYS = Object.keys(services)
  .filter((name) => /^gateway\d+$/.test(name))
  .sort();
const gateway = services[GATEWAYS[0] ?? ''] ?? {};
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
    it('is valid to docker-compose (config -q), which refuses it without SVC_SECRET', () => {
      expect(resolved.code, resolved.stderr).to.equal(0);
      const quiet = composeConfig(['-q'], { SVC_SECRET: SECRET_FOR_CHECKS });
      expect(quiet.code, quiet.stderr).to.equal(0);
      const unset = composeConfig(['-q'], { SVC_SECRET: undefined });
      expect(unset.code).to.not.equal(0);
      expect(unset.stderr).to.contain('SVC_SECRET');
    });

    it('defines three named gateway instances, HAProxy and PostgreSQL', () => {
      expect(GATEWAYS).to.deep.equal(['gateway1', 'gateway2', 'gateway3']);
      expect(services).to.include.keys('haproxy', 'postgres');
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

    it('gives every instance the same settings but its own passive range, disjoint from the others', () => {
      const ranges = GATEWAYS.map((name) => {
        const { SVC_FTP_PASV_PORTS: range, ...rest } = environmentOf(services[name]!);
        expect(rest, `${name}'s other settings`).to.deep.equal(
          (({ SVC_FTP_PASV_PORTS: _, ...shared }) => shared)(gatewayEnv),
        );
        const [first, last] = (range ?? '').split('-').map(Number) as [number, number];
        expect(first, `${name} SVC_FTP_PASV_PORTS`).to.be.a('number').and.at.most(last);
        return { name, first, last };
      });
      for (const a of ranges)
        for (const b of ranges)
          if (a !== b) expect(a.last < b.first || b.last < a.first, `${a.name} and ${b.name}`).to.equal(true);
    });

    it('sets what a balanced shape needs: public URL and S3 endpoint, passive address, shared secret', () => {
      for (const name of ['SVC_PUBLIC_URL', 'SVC_S3_PUBLIC_ENDPOINT', 'SVC_FTP_PASV_ADDRESS'])
        expect(gatewayEnv[name], name).to.be.a('string').and.not.equal('');
      expect(new URL(gatewayEnv.SVC_S3_PUBLIC_ENDPOINT!).host).to.not.equal(
        new URL(gatewayEnv.SVC_S3_ENDPOINT!).host,
      );
      expect(gatewayEnv.SVC_SECRET).to.equal(SECRET_FOR_CHECKS);
    });

    it('shares the certificate and SSH host key as files mounted read-only in every instance', () => {
      for (const name of GATEWAYS) {
        const mounts = (services[name]!.volumes ?? []).map((v) => String(v).split(':'));
        for (const setting of ['SVC_TLS_CERT', 'SVC_TLS_KEY', 'SVC_SSH_HOST_KEY']) {
          const file = gatewayEnv[setting] ?? '';
          const mount = mounts.find(([, target]) => file.startsWith(`${target}/`));
          expect(mount, `${name}: ${setting} ${file} on a mount`).to.not.equal(undefined);
          expect(mount![2], `${name}: ${setting}'s mount`).to.equal('ro');
          expect(path.dirname(mount![0]!), 'a folder beside compose.yaml').to.equal(DOCKER_DIR);
        }
      }
    });

    it("trusts exactly HAProxy's fixed address, and HAProxy publishes every listener and passive range", () => {
      const haproxy = services.haproxy!;
      const networks = Object.values(haproxy.networks ?? {}) as ({ ipv4_address?: string } | null)[];
      const address = networks.find((n) => n?.ipv4_address)?.ipv4_address;
      expect(address, 'haproxy ipv4_address').to.be.a('string');
      expect(gatewayEnv.SVC_TRUSTED_PROXIES).to.equal(address);
      for (const name of GATEWAYS)
        expect(services[name]!.ports ?? [], `${name} publishes nothing`).to.be.empty;
      const listeners = Object.entries(defaultConfig.ports)
        .filter(([key]) => key !== 'ftp_pasv')
        .map(([key, value]) => String(gatewayEnv[PORT_ENV[key]!] ?? value));
      const ranges = GATEWAYS.map((name) => environmentOf(services[name]!).SVC_FTP_PASV_PORTS!);
      const published = containerPorts(haproxy);
      expect(published).to.include.members(listeners);
      // docker-compose config lists a published range port by port.
      const ports = new Set(
        published.flatMap((p) => {
          const [first, last = first] = p.split('-').map(Number) as [number, number?];
          return Array.from({ length: last! - first + 1 }, (_, k) => first + k);
        }),
      );
      for (const range of ranges) {
        const [first, last] = range.split('-').map(Number) as [number, number];
        for (let port = first; port <= last; port++)
          expect(ports.has(port), `port ${port} of ${range}`).to.equal(true);
      }
    });

    it('pins every image it does not build to a version', () => {
      for (const [name, service] of Object.entries(services)) {
        if (service.build) continue;
        const tag = /:([^/:]+)$/.exec(service.image ?? '')?.[1];
        expect(tag, `${name}: ${service.image}`).to.be.a('string').and.not.equal('latest');
      }
      expect(services.minio!.image).to.match(/^minio\/minio:RELEASE\./);
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

    it('builds and runs on one Node LTS line, newer than the Node 20 the code still supports', () => {
      const images = stages.map((stage) => stage[0]!.args.split(/\s+/)[0]!);
      const majors = images.map((image) => Number(/^node:(\d+)/.exec(image)?.[1]));
      expect(new Set(images).size, images.join(', ')).to.equal(1);
      // Even majors become LTS; the native modules are built for the stage they run in.
      expect(majors[0]! % 2).to.equal(0);
      expect(majors[0]).to.be.at.least(24);
    });

    it('runs as a non-root user', () => {
      const user = instructions('USER').at(-1)?.args;
      expect(user).to.be.a('string');
      expect(user).to.not.match(/^(root|0)(:|$)/);
    });
  });

  describe('haproxy.cfg', () => {
    const cfgFile = path.join(DOCKER_DIR, 'haproxy.cfg');
    /** sections maps `frontend x` / `backend x` to its lines, as HAProxy reads the file. */
    const sections = new Map<string, string[]>();
    let current: string[] = [];
    for (const raw of readFileSync(cfgFile, 'utf8').split('\n')) {
      const line = raw.replace(/#.*$/, '').trimEnd();
      if (!line.trim()) continue;
      if (!/^\s/.test(line)) sections.set(line.trim(), (current = []));
      else current.push(line.trim());
    }
    const servers = (backend: string) =>
      (sections.get(`backend ${backend}`) ?? [])
        .filter((l) => l.startsWith('server '))
        .map((l) => l.split(/\s+/));

    it('is valid to HAProxy (haproxy -c)', () => {
      const r = spawnSync('haproxy', ['-c', '-f', cfgFile], { encoding: 'utf8' });
      if (r.error) throw new Error(`haproxy (Debian package haproxy): ${r.error.message}`);
      expect(r.status, r.stderr).to.equal(0);
      expect(r.stdout + r.stderr).to.contain('Configuration file is valid');
    });

    it('is the file the haproxy service mounts', () => {
      const mounts = (services.haproxy!.volumes ?? []).map((v) => String(v).split(':')[0]);
      expect(mounts).to.include(cfgFile);
    });

    it("sends every listener to every instance's port in TCP mode with a PROXY v2 header", () => {
      expect(sections.get('defaults')).to.include('mode tcp');
      for (const [key, value] of Object.entries(defaultConfig.ports)) {
        if (key === 'ftp_pasv') continue;
        const port = String(gatewayEnv[PORT_ENV[key]!] ?? value);
        const frontend = [...sections.entries()].find(
          ([name, lines]) => name.startsWith('frontend ') && lines.includes(`bind :${port}`),
        );
        expect(frontend, `a frontend binding :${port} (${key})`).to.not.equal(undefined);
        const backend = frontend![1].find((l) => l.startsWith('default_backend '))!.split(' ')[1]!;
        const targets = servers(backend).map((words) => words[2]);
        expect(targets, `${backend} servers`).to.have.members(GATEWAYS.map((g) => `${g}:${port}`));
        for (const words of servers(backend)) expect(words, words.join(' ')).to.include('send-proxy-v2');
      }
    });

    it("forwards each instance's passive range to that instance alone, without a PROXY header", () => {
      for (const name of GATEWAYS) {
        const range = environmentOf(services[name]!).SVC_FTP_PASV_PORTS!;
        const frontend = [...sections.entries()].find(([, lines]) => lines.includes(`bind :${range}`));
        expect(frontend, `a frontend binding :${range} (${name})`).to.not.equal(undefined);
        const backend = frontend![1].find((l) => l.startsWith('default_backend '))!.split(' ')[1]!;
        const list = servers(backend);
        expect(list.map((words) => words[2])).to.deep.equal([name]);
        expect(list[0]!.join(' ')).to.not.contain('send-proxy');
      }
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
