/**
 * The soak's clients: one interface, `FileClient`, over each protocol's real client library in
 * this process — node:https for REST (a user session, the multi-step upload, signed download URLs)
 * and WebDAV (Basic auth, one keep-alive connection), ssh2's Client for SFTP and the small FTP
 * client of ./ftp.ts for FTP, FTPS explicit and FTPS implicit. Paths are the ones the user sees:
 * the site path for REST, the path below `user_root` for the others.
 */
import { createHash, randomBytes } from 'node:crypto';
import https from 'node:https';
import { pipeline } from 'node:stream/promises';
import { Readable } from 'node:stream';
import ssh2 from 'ssh2';
import type { SFTPWrapper } from 'ssh2';
import { FtpClient, type FtpMode } from './ftp.ts';

/** PROTOCOLS are the soak's front ends; `ftpes` is FTP with explicit TLS, `ftps` implicit TLS. */
export const PROTOCOLS = ['rest', 'ftp', 'ftpes', 'ftps', 'sftp', 'dav'] as const;
/** Protocol is one of PROTOCOLS. */
export type Protocol = (typeof PROTOCOLS)[number];

/** Endpoint is where the gateway listens and how to reach it. */
export interface Endpoint {
  host: string;
  ports: Record<string, number>;
  /** the gateway's certificate (REST and WebDAV verify it; FTPS accepts any, like lftp -k) */
  ca: Buffer;
}

/** Body is a file's content, made on demand in chunks so that 64 MiB files cost no 64 MiB buffer. */
export interface Body {
  size: number;
  md5: string;
  chunks(): Iterable<Buffer>;
}

const POOL = randomBytes(4 * 1024 * 1024);
const CHUNK = 256 * 1024;

/** makeBody is `size` bytes: 16 random bytes, then the random pool from a random offset, wrapping. */
export function makeBody(size: number): Body {
  const salt = randomBytes(16);
  const offset = Math.floor(Math.random() * POOL.length);
  function* chunks(): Iterable<Buffer> {
    let left = size;
    const head = salt.subarray(0, Math.min(16, left));
    yield head;
    left -= head.length;
    let at = offset;
    while (left > 0) {
      const n = Math.min(CHUNK, left, POOL.length - at);
      yield POOL.subarray(at, at + n);
      left -= n;
      at = (at + n) % POOL.length;
    }
  }
  const md5 = createHash('md5');
  for (const c of chunks()) md5.update(c);
  return { size, md5: md5.digest('hex'), chunks };
}

/** FileClient is one logged-in client of one protocol. */
export interface FileClient {
  /** list returns the names of the files in `dir` */
  list(dir: string): Promise<string[]>;
  upload(file: string, body: Body): Promise<void>;
  download(file: string): Promise<{ size: number; md5: string }>;
  rename(from: string, to: string): Promise<void>;
  remove(file: string): Promise<void>;
  /** keepAlive sends what a client sends to keep an idle connection (NOOP, a listing of `dir`) */
  keepAlive(dir: string): Promise<void>;
  close(): Promise<void>;
  /** destroy drops the connection without a word (after an error) */
  destroy(): void;
}

// ---------------------------------------------------------------------------------------------
// HTTPS (REST and WebDAV)

/** HttpAnswer is a complete HTTPS answer; the body is hashed, and kept only when small. */
export interface HttpAnswer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
  size: number;
  md5: string;
}

/** HttpCall is one HTTPS request. */
export interface HttpCall {
  method: string;
  url: string;
  headers?: Record<string, string>;
  body?: Body | string;
  agent?: https.Agent | false;
}

const KEEP_TEXT = 1024 * 1024;

/** httpsCall sends one request to `endpoint` and reads the whole answer. */
export function httpsCall(ca: Buffer, call: HttpCall): Promise<HttpAnswer> {
  const headers = { ...(call.headers ?? {}) };
  const body = call.body;
  if (typeof body === 'string') headers['Content-Length'] = String(Buffer.byteLength(body));
  else if (body) headers['Content-Length'] = String(body.size);
  return new Promise((resolve, reject) => {
    const req = https.request(
      call.url,
      { method: call.method, headers, ca, agent: call.agent ?? false, timeout: 120_000 },
      (res) => {
        const md5 = createHash('md5');
        const kept: Buffer[] = [];
        let size = 0;
        res.on('data', (c: Buffer) => {
          md5.update(c);
          size += c.length;
          if (size <= KEEP_TEXT) kept.push(c);
        });
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            headers: res.headers,
            text: Buffer.concat(kept).toString('utf8'),
            size,
            md5: md5.digest('hex'),
          }),
        );
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new Error(`${call.method} ${call.url}: no answer in 120 s`)));
    req.on('error', reject);
    if (body === undefined || typeof body === 'string') req.end(body);
    else pipeline(Readable.from(body.chunks()), req).catch(reject);
  });
}

/** expectStatus throws unless the answer has one of `statuses`, naming the request. */
export function expectStatus(r: HttpAnswer, statuses: number[], what: string): HttpAnswer {
  if (!statuses.includes(r.status)) throw new Error(`${what}: ${r.status} ${r.text.slice(0, 300)}`);
  return r;
}

const API = '/api/rest/v1';
const enc = (p: string) => p.split('/').map(encodeURIComponent).join('/');
const json = (r: HttpAnswer) => JSON.parse(r.text) as Record<string, unknown>;

/** restClient logs in by POST /sessions and works with the session id, over one keep-alive connection. */
async function restClient(e: Endpoint, username: string, password: string): Promise<FileClient> {
  const agent = new https.Agent({ keepAlive: true, maxSockets: 1 });
  const base = `https://${e.host}:${e.ports.https}${API}`;
  const call = (c: HttpCall) => httpsCall(e.ca, { agent, ...c });
  const login = await call({
    method: 'POST',
    url: `${base}/sessions`,
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ username, password }),
  });
  expectStatus(login, [200], 'REST POST /sessions');
  const auth = { 'X-SvcAPI-Auth': String(json(login).id) };
  const api = (method: string, p: string, body?: unknown) =>
    call({
      method,
      url: `${base}${p}`,
      headers: { ...auth, ...(body === undefined ? {} : { 'Content-Type': 'application/json' }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
  return {
    list: async (dir) => {
      const r = expectStatus(await api('GET', `/folders/${enc(dir)}?per_page=1000`), [200], 'REST list');
      return (JSON.parse(r.text) as { path: string; type: string }[])
        .filter((f) => f.type === 'file')
        .map((f) => f.path.slice(f.path.lastIndexOf('/') + 1));
    },
    upload: async (file, body) => {
      const start = json(
        expectStatus(await api('POST', `/files/${enc(file)}`, { action: 'put' }), [200], 'REST action=put'),
      );
      expectStatus(
        await call({ method: 'PUT', url: String(start.upload_uri), body }),
        [200, 201, 204],
        'REST PUT upload_uri',
      );
      expectStatus(
        await api('POST', `/files/${enc(file)}`, { action: 'end', ref: start.ref }),
        [200],
        'REST action=end',
      );
    },
    download: async (file) => {
      const info = json(expectStatus(await api('GET', `/files/${enc(file)}`), [200], 'REST GET /files'));
      const r = expectStatus(
        await call({ method: 'GET', url: String(info.download_uri) }),
        [200],
        'REST download',
      );
      return { size: r.size, md5: r.md5 };
    },
    rename: async (from, to) =>
      void expectStatus(
        await api('POST', `/files/${enc(from)}`, { 'move-destination': to }),
        [200, 201, 204],
        'REST move',
      ),
    remove: async (file) =>
      void expectStatus(await api('DELETE', `/files/${enc(file)}`), [200, 204], 'REST delete'),
    keepAlive: async (dir) =>
      void expectStatus(await api('GET', `/folders/${enc(dir)}?per_page=1`), [200], 'REST'),
    close: async () => {
      try {
        expectStatus(await api('DELETE', '/sessions'), [200, 204], 'REST DELETE /sessions');
      } finally {
        agent.destroy();
      }
    },
    destroy: () => agent.destroy(),
  };
}

/** davClient sends Basic auth on one keep-alive connection; its login is a PROPFIND of `/`. */
async function davClient(e: Endpoint, username: string, password: string): Promise<FileClient> {
  const agent = new https.Agent({ keepAlive: true, maxSockets: 1 });
  const base = `https://${e.host}:${e.ports.webdav}`;
  const authorization = `Basic ${Buffer.from(`${username}:${password}`).toString('base64')}`;
  const call = (method: string, p: string, headers: Record<string, string> = {}, body?: Body) =>
    httpsCall(e.ca, {
      agent,
      method,
      url: `${base}${enc(p)}`,
      headers: { Authorization: authorization, ...headers },
      body,
    });
  expectStatus(await call('PROPFIND', '/', { Depth: '0' }), [207], 'WebDAV login');
  return {
    list: async (dir) => {
      const r = expectStatus(await call('PROPFIND', `${dir}/`, { Depth: '1' }), [207], 'PROPFIND');
      const names: string[] = [];
      for (const m of r.text.matchAll(/<(?:\w+:)?href>([^<]*)<\/(?:\w+:)?href>/g)) {
        const href = decodeURIComponent(m[1]!);
        if (!href.endsWith('/')) names.push(href.slice(href.lastIndexOf('/') + 1));
      }
      return names;
    },
    upload: async (file, body) => void expectStatus(await call('PUT', file, {}, body), [201, 204], 'PUT'),
    download: async (file) => {
      const r = expectStatus(await call('GET', file), [200], 'GET');
      return { size: r.size, md5: r.md5 };
    },
    rename: async (from, to) =>
      void expectStatus(
        await call('MOVE', from, { Destination: `${base}${enc(to)}`, Overwrite: 'F' }),
        [201, 204],
        'MOVE',
      ),
    remove: async (file) => void expectStatus(await call('DELETE', file), [204, 200], 'DELETE'),
    keepAlive: async () => void expectStatus(await call('PROPFIND', '/', { Depth: '0' }), [207], 'PROPFIND'),
    close: async () => agent.destroy(),
    destroy: () => agent.destroy(),
  };
}

// ---------------------------------------------------------------------------------------------
// SFTP (ssh2)

async function sftpClient(e: Endpoint, username: string, password: string): Promise<FileClient> {
  const client = new ssh2.Client();
  await new Promise<void>((resolve, reject) => {
    client.once('ready', resolve);
    client.once('error', reject);
    client.connect({ host: e.host, port: e.ports.sftp, username, password, readyTimeout: 60_000 });
  });
  client.on('error', () => undefined);
  const closed = new Promise<void>((resolve) => client.once('close', () => resolve()));
  let sftp: SFTPWrapper;
  try {
    sftp = await new Promise<SFTPWrapper>((resolve, reject) =>
      client.sftp((err, s) => (err ? reject(err) : resolve(s))),
    );
  } catch (err) {
    client.destroy();
    throw err;
  }
  const done = (resolve: () => void, reject: (e: Error) => void) => (err?: Error | null) =>
    err ? reject(err) : resolve();
  return {
    list: (dir) =>
      new Promise((resolve, reject) =>
        sftp.readdir(dir, (err, list) =>
          err ? reject(err) : resolve(list.filter((f) => f.longname.startsWith('-')).map((f) => f.filename)),
        ),
      ),
    upload: (file, body) => pipeline(Readable.from(body.chunks()), sftp.createWriteStream(file)),
    download: async (file) => {
      const md5 = createHash('md5');
      let size = 0;
      for await (const c of sftp.createReadStream(file)) {
        md5.update(c as Buffer);
        size += (c as Buffer).length;
      }
      return { size, md5: md5.digest('hex') };
    },
    rename: (from, to) => new Promise((resolve, reject) => sftp.rename(from, to, done(resolve, reject))),
    remove: (file) => new Promise((resolve, reject) => sftp.unlink(file, done(resolve, reject))),
    keepAlive: () =>
      new Promise((resolve, reject) => sftp.realpath('.', (err) => (err ? reject(err) : resolve()))),
    close: async () => {
      client.end();
      await closed;
    },
    destroy: () => client.destroy(),
  };
}

// ---------------------------------------------------------------------------------------------
// FTP, FTPS explicit, FTPS implicit

async function ftpClient(
  e: Endpoint,
  mode: FtpMode,
  username: string,
  password: string,
): Promise<FileClient> {
  const port = mode === 'implicit' ? e.ports.ftps! : e.ports.ftp!;
  const c = await FtpClient.connect(e.host, port, mode, username, password);
  return {
    list: (dir) => c.list(dir),
    upload: (file, body) => c.upload(file, body.chunks()),
    download: (file) => c.download(file),
    rename: (from, to) => c.rename(from, to),
    remove: (file) => c.remove(file),
    keepAlive: () => c.noop(),
    close: () => c.quit(),
    destroy: () => c.destroy(),
  };
}

/** connect logs `username` in over `protocol`. */
export function connect(
  e: Endpoint,
  protocol: Protocol,
  username: string,
  password: string,
): Promise<FileClient> {
  switch (protocol) {
    case 'rest':
      return restClient(e, username, password);
    case 'dav':
      return davClient(e, username, password);
    case 'sftp':
      return sftpClient(e, username, password);
    case 'ftp':
      return ftpClient(e, 'plain', username, password);
    case 'ftpes':
      return ftpClient(e, 'explicit', username, password);
    case 'ftps':
      return ftpClient(e, 'implicit', username, password);
  }
}
