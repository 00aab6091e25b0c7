/**
 * A gateway with WebDAV on a free port, the users the WebDAV tests log in as (made through the
 * core), and a raw HTTPS client for the WebDAV port that trusts the gateway's certificate.
 */
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import https from 'node:https';
import path from 'node:path';
import { ActionEntity, type ActionRow } from '../../../src/db/entities.ts';
import { operatorPrincipal } from '../../../src/core/index.ts';
import { startTestGateway, type TestGateway } from '../../helpers/gateway.ts';
import { DAV, elements, parseXml, textOf, type El } from '../../../protocols/webdav/xml.ts';
import { dbOf } from '../../helpers/internals.ts';

/** DavResponse is what the client read. */
export interface DavResponse {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
  body: Buffer;
}

/** DavRequest is a request's optional parts. */
export interface DavRequest {
  headers?: Record<string, string>;
  body?: string | Buffer;
  /** [user, password]; null sends no Authorization */
  auth?: [string, string] | null;
  localAddress?: string;
}

/** DavFixture is a started gateway with alice (full on her root home/alice) and a WebDAV client. */
export interface DavFixture {
  gw: TestGateway;
  port: number;
  url: string;
  certFile: string;
  dav(method: string, urlPath: string, opts?: DavRequest): Promise<DavResponse>;
  actions(): Promise<ActionRow[]>;
  stop(): Promise<void>;
}

/** ALICE are the credentials of the fixture's main user. */
export const ALICE: [string, string] = ['alice', 'alice-password-1'];

/** startDav starts the gateway with WebDAV (and plain FTP with `ftp`) and makes alice. */
export async function startDav(opts: { ftp?: boolean } = {}): Promise<DavFixture> {
  const gw = await startTestGateway({ ports: { webdav: 0, ...(opts.ftp ? { ftp: 0 } : {}) } });
  const op = operatorPrincipal();
  await gw.core.namespace.mkdir(op, 'home/alice');
  await gw.core.users.create(op, { username: 'alice', password: ALICE[1], user_root: 'home/alice/' });
  await gw.core.permissions.create(op, { username: 'alice', path: 'home/alice', permission: 'full' });
  const port = gw.ports.webdav!;
  const certFile = path.join(gw.config.data_dir, 'tls', 'cert.pem');
  const agent = new https.Agent({ ca: readFileSync(certFile), keepAlive: true });
  return {
    gw,
    port,
    url: `https://127.0.0.1:${port}`,
    certFile,
    dav: (method, urlPath, opts = {}) => request(agent, port, method, urlPath, opts),
    actions: () => dbOf(gw.core).read((em) => em.find(ActionEntity, { order: { id: 'ASC' } })),
    stop: async () => {
      agent.destroy();
      await gw.stop();
    },
  };
}

function request(
  agent: https.Agent,
  port: number,
  method: string,
  urlPath: string,
  opts: DavRequest,
): Promise<DavResponse> {
  const headers: Record<string, string> = { ...(opts.headers ?? {}) };
  const auth = opts.auth === undefined ? ALICE : opts.auth;
  if (auth) headers.Authorization = `Basic ${Buffer.from(`${auth[0]}:${auth[1]}`).toString('base64')}`;
  const payload = opts.body === undefined ? undefined : Buffer.from(opts.body);
  if (payload) headers['Content-Length'] = String(payload.length);
  return new Promise((resolve, reject) => {
    const req = https.request(
      {
        host: '127.0.0.1',
        port,
        method,
        path: urlPath,
        headers,
        agent: opts.localAddress ? undefined : agent,
        ...(opts.localAddress ? { ca: (agent.options as { ca: Buffer }).ca } : {}),
        servername: 'localhost',
        localAddress: opts.localAddress,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const body = Buffer.concat(chunks);
          resolve({ status: res.statusCode ?? 0, headers: res.headers, text: body.toString('utf8'), body });
        });
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}

/** run runs a client program and collects its output. */
export function run(
  command: string,
  args: string[],
  opts: { input?: string; env?: Record<string, string>; cwd?: string; timeoutMs?: number } = {},
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, {
      cwd: opts.cwd,
      env: { ...process.env, ...(opts.env ?? {}) },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    const timer = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs ?? 60_000);
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
    child.stdin.end(opts.input ?? '');
  });
}

/** rcloneFlags are the flags of an on-the-fly `:webdav:` remote logged in as alice, with `extra` after them. */
export async function rcloneFlags(f: DavFixture, extra: string[] = []): Promise<string[]> {
  const pass = (await run('rclone', ['obscure', ALICE[1]])).stdout.trim();
  return [
    '--webdav-url',
    `${f.url}/`,
    '--webdav-user',
    ALICE[0],
    '--webdav-pass',
    pass,
    '--ca-cert',
    f.certFile,
    '--config',
    '/dev/null',
    ...extra,
  ];
}

/** propfindBody asks for named DAV: properties. */
export function propfindBody(...names: string[]): string {
  return `<?xml version="1.0"?><D:propfind xmlns:D="DAV:"><D:prop>${names.map((n) => `<D:${n}/>`).join('')}</D:prop></D:propfind>`;
}

/** lockBody is a LOCK request body. */
export function lockBody(scope: 'exclusive' | 'shared' = 'exclusive', owner = 'tests'): string {
  return `<?xml version="1.0"?><D:lockinfo xmlns:D="DAV:"><D:lockscope><D:${scope}/></D:lockscope><D:locktype><D:write/></D:locktype><D:owner><D:href>${owner}</D:href></D:owner></D:lockinfo>`;
}

/** hrefs lists the hrefs of a multistatus. */
export function hrefs(xml: string): string[] {
  return [...xml.matchAll(/<D:href>([^<]*)<\/D:href>/g)].map((m) => m[1]!);
}

/** PropResult is one property of a multistatus response: its propstat's status and its element. */
export interface PropResult {
  status: number;
  el: El;
  text: string;
}

/**
 * multistatus parses a 207 body with the adapter's namespace-aware XML reader: href → property
 * in Clark notation (`{DAV:}getlastmodified`) → its status and content.
 */
export function multistatus(xml: string): Map<string, Map<string, PropResult>> {
  const root = parseXml(xml);
  if (root.ns !== DAV || root.name !== 'multistatus') throw new Error(`not a multistatus: ${xml}`);
  const out = new Map<string, Map<string, PropResult>>();
  const davChildren = (el: El, name: string) => elements(el).filter((c) => c.ns === DAV && c.name === name);
  for (const response of davChildren(root, 'response')) {
    const props = new Map<string, PropResult>();
    for (const ps of davChildren(response, 'propstat')) {
      const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(textOf(davChildren(ps, 'status')[0]!))?.[1]);
      for (const prop of davChildren(ps, 'prop'))
        for (const el of elements(prop)) props.set(`{${el.ns}}${el.name}`, { status, el, text: textOf(el) });
    }
    out.set(textOf(davChildren(response, 'href')[0]!), props);
  }
  return out;
}
