/**
 * Issue 19, "Every resource closed on every path": per protocol (REST, FTP, FTPS explicit and
 * implicit, SFTP, WebDAV) a batch of each kind of operation — login, list, upload, download,
 * rename, delete, failed login, aborted transfer, client vanishing mid-transfer — by real clients
 * (curl for FTP/FTPS, ssh2's SFTP client, HTTPS requests for REST and WebDAV); then, with every
 * client gone, the process's open descriptors and active resources must come back to what they
 * were before the batch, within a small constant. A leak names its protocol, its operation and the
 * kinds that stayed open. Not timed: the counts are polled until they settle or a bound passes.
 *
 * SVC_RESOURCE_OPERATIONS sets the batch size (the issue's figure is 200; the default keeps each
 * protocol well under a minute on two cores).
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import https from 'node:https';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import ssh2 from 'ssh2';
import type { SFTPWrapper } from 'ssh2';
import { operatorPrincipal } from '../../src/core/index.ts';
import { TEST_DATABASE_URL, dbKind, startTestGateway, type TestGateway } from '../helpers/gateway.ts';
import { describeGrowth, settled, snapshot, type SocketRoles } from '../helpers/resources.ts';
import { run, writeSiteFile } from './ftp/clients.ts';

/** OPERATIONS is how many operations of each kind every protocol runs. */
const OPERATIONS = Number(process.env.SVC_RESOURCE_OPERATIONS ?? 50);
/** CONCURRENCY is how many clients run at once (two cores: more only queues). */
const CONCURRENCY = 4;
/** SLACK is how many descriptors or resources of any kind may stay beyond the baseline. */
const SLACK = 4;
/** SETTLE_MS bounds the wait for the counts to come back once the clients are gone. */
const SETTLE_MS = 20_000;
const POOL_SIZE = 4;
/**
 * PASV is the passive range, below the system's ephemeral ports: sockets are told apart by their
 * local port, and a client socket of this process (a test client, a database connection) whose
 * ephemeral port fell inside the range was counted as the gateway's data connection (40100-40299
 * did: "the server kept its side open", once in a full PostgreSQL run).
 */
const PASV = { first: 22100, last: 22299 };
const [EPHEMERAL_FIRST, EPHEMERAL_LAST] = readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8')
  .trim()
  .split(/\s+/)
  .map(Number) as [number, number];
if (PASV.last >= EPHEMERAL_FIRST && PASV.first <= EPHEMERAL_LAST)
  throw new Error(
    `resources.test.ts: the passive range ${PASV.first}-${PASV.last} overlaps the ephemeral ports ` +
      `${EPHEMERAL_FIRST}-${EPHEMERAL_LAST} (net.ipv4.ip_local_port_range); choose another`,
  );

const USER = 'leaks';
const PASSWORD = 'leaks-password-1';
const ROOT = `home/${USER}`;
const SMALL = Buffer.alloc(16 * 1024, 'small file ');
/** BIG is large enough that a transfer is surely in flight when a client aborts or vanishes. */
const BIG = Buffer.alloc(8 * 1024 * 1024, 'big file ');

/** OPERATION_KINDS are the operations of the issue, in the order they run (upload → rename → delete). */
const OPERATION_KINDS = [
  'login',
  'list',
  'upload',
  'download',
  'rename',
  'delete',
  'failed login',
  'aborted transfer',
  'client vanishing mid-transfer',
] as const;
type OperationKind = (typeof OPERATION_KINDS)[number];

/** Driver runs operation number `i` of each kind against one protocol, in folder `dir` of the user's root. */
type Driver = Record<OperationKind, (i: number) => Promise<void>>;

/** pool runs `count` operations, `CONCURRENCY` at a time; the first failure fails the batch. */
async function pool(count: number, op: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < count) await op(next++);
  };
  await Promise.all(Array.from({ length: Math.min(CONCURRENCY, count) }, worker));
}

// ---------------------------------------------------------------------------------------------
// HTTPS (REST and WebDAV): one connection per request, so every client socket is gone after it.

interface HttpAnswer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
}

interface HttpCall {
  method: string;
  path: string;
  headers?: Record<string, string>;
  body?: Buffer | string;
  /**
   * cut: 'upload' sends half the body and then resets the connection; 'download' resets it on the
   * first chunk of the answer.
   */
  cut?: 'upload' | 'download';
}

function httpsCall(port: number, ca: Buffer, call: HttpCall): Promise<HttpAnswer> {
  const body = call.body === undefined ? undefined : Buffer.from(call.body);
  const headers = { ...(call.headers ?? {}) };
  if (body) headers['Content-Length'] = String(body.length);
  return new Promise((resolve, reject) => {
    const req = https.request(
      { host: '127.0.0.1', port, method: call.method, path: call.path, headers, ca, agent: false },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => {
          if (call.cut === 'download') {
            req.destroy();
            resolve({ status: res.statusCode ?? 0, headers: res.headers, body: c });
          }
          chunks.push(c);
        });
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }),
        );
        res.on('error', () => undefined);
      },
    );
    req.on('error', (err) =>
      call.cut ? resolve({ status: 0, headers: {}, body: Buffer.alloc(0) }) : reject(err),
    );
    if (call.cut === 'upload' && body) {
      req.write(body.subarray(0, body.length >> 1), () => {
        // The server has half the body; the client is gone without a word.
        setTimeout(() => {
          req.destroy();
          resolve({ status: 0, headers: {}, body: Buffer.alloc(0) });
        }, 20);
      });
    } else req.end(body);
  });
}

function expectStatus(r: HttpAnswer, expected: number[], what: string): void {
  expect(expected, `${what}: ${r.status} ${r.body.toString('utf8').slice(0, 300)}`).to.include(r.status);
}

const enc = (p: string) => p.split('/').map(encodeURIComponent).join('/');

function restDriver(gw: TestGateway, ca: Buffer, dir: string): Driver {
  const API = '/api/rest/v1';
  const key = { 'X-SvcAPI-Key': gw.siteKey };
  const call = (c: HttpCall) => httpsCall(gw.ports.https!, ca, c);
  const site = (name: string) => `${ROOT}/${dir}/${name}`;
  const api = (method: string, p: string, body?: unknown) =>
    call({
      method,
      path: `${API}${p}`,
      headers: { ...key, ...(body === undefined ? {} : { 'Content-Type': 'application/json' }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
  const json = (r: HttpAnswer) => JSON.parse(r.body.toString('utf8')) as Record<string, string>;
  const startUpload = async (name: string) => {
    const r = await api('POST', `/files/${enc(site(name))}`, { action: 'put' });
    expectStatus(r, [200], 'REST action=put');
    return json(r);
  };
  const downloadUri = async (name: string) => {
    const r = await api('GET', `/files/${enc(site(name))}`);
    expectStatus(r, [200], 'REST GET /files');
    return new URL(json(r).download_uri!).pathname;
  };
  return {
    login: async () => {
      const r = await call({
        method: 'POST',
        path: `${API}/sessions`,
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ username: USER, password: PASSWORD }),
      });
      expectStatus(r, [200], 'REST POST /sessions');
      const out = await call({
        method: 'DELETE',
        path: `${API}/sessions`,
        headers: { 'X-SvcAPI-Auth': json(r).id! },
      });
      expectStatus(out, [200], 'REST DELETE /sessions');
    },
    list: async () => expectStatus(await api('GET', `/folders/${enc(`${ROOT}/${dir}`)}`), [200], 'REST list'),
    upload: async (i) => {
      const upload = await startUpload(`up-${i}`);
      const put = await call({ method: 'PUT', path: new URL(upload.upload_uri!).pathname, body: SMALL });
      expectStatus(put, [200], 'REST PUT upload_uri');
      const end = await api('POST', `/files/${enc(site(`up-${i}`))}`, { action: 'end', ref: upload.ref });
      expectStatus(end, [200], 'REST action=end');
    },
    download: async () => {
      const r = await call({ method: 'GET', path: await downloadUri('small') });
      expectStatus(r, [200], 'REST download');
      expect(r.body.length).to.equal(SMALL.length);
    },
    rename: async (i) =>
      expectStatus(
        await api('POST', `/files/${enc(site(`up-${i}`))}`, { 'move-destination': site(`mv-${i}`) }),
        [200, 201],
        'REST move',
      ),
    delete: async (i) =>
      expectStatus(await api('DELETE', `/files/${enc(site(`mv-${i}`))}`), [200], 'REST delete'),
    'failed login': async () => {
      const r = await call({
        method: 'POST',
        path: `${API}/sessions`,
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ username: USER, password: 'wrong-password' }),
      });
      expectStatus(r, [401], 'REST failed login');
    },
    'aborted transfer': async (i) => {
      const upload = await startUpload(`aborted-${i}`);
      await call({ method: 'PUT', path: new URL(upload.upload_uri!).pathname, body: BIG, cut: 'upload' });
    },
    'client vanishing mid-transfer': async () => {
      await call({ method: 'GET', path: await downloadUri('big'), cut: 'download' });
    },
  };
}

function davDriver(gw: TestGateway, ca: Buffer, dir: string): Driver {
  const auth = (password: string) => ({
    Authorization: `Basic ${Buffer.from(`${USER}:${password}`).toString('base64')}`,
  });
  const call = (c: HttpCall, password = PASSWORD) =>
    httpsCall(gw.ports.webdav!, ca, { ...c, headers: { ...auth(password), ...(c.headers ?? {}) } });
  const url = (name: string) => `/${dir}/${name}`;
  return {
    login: async () =>
      expectStatus(
        await call({ method: 'PROPFIND', path: '/', headers: { Depth: '0' } }),
        [207],
        'WebDAV login',
      ),
    list: async () =>
      expectStatus(
        await call({ method: 'PROPFIND', path: `/${dir}/`, headers: { Depth: '1' } }),
        [207],
        'PROPFIND',
      ),
    upload: async (i) =>
      expectStatus(await call({ method: 'PUT', path: url(`up-${i}`), body: SMALL }), [201, 204], 'PUT'),
    download: async () => {
      const r = await call({ method: 'GET', path: url('small') });
      expectStatus(r, [200], 'GET');
      expect(r.body.length).to.equal(SMALL.length);
    },
    rename: async (i) =>
      expectStatus(
        await call({
          method: 'MOVE',
          path: url(`up-${i}`),
          headers: { Destination: `https://127.0.0.1:${gw.ports.webdav}${url(`mv-${i}`)}` },
        }),
        [201, 204],
        'MOVE',
      ),
    delete: async (i) =>
      expectStatus(await call({ method: 'DELETE', path: url(`mv-${i}`) }), [204], 'DELETE'),
    'failed login': async () =>
      expectStatus(
        await call({ method: 'PROPFIND', path: '/', headers: { Depth: '0' } }, 'wrong-password'),
        [401],
        'WebDAV failed login',
      ),
    'aborted transfer': async (i) => {
      await call({ method: 'PUT', path: url(`aborted-${i}`), body: BIG, cut: 'upload' });
    },
    'client vanishing mid-transfer': async () => {
      await call({ method: 'GET', path: url('big'), cut: 'download' });
    },
  };
}

// ---------------------------------------------------------------------------------------------
// FTP, FTPS explicit, FTPS implicit: curl, one process per operation (each its own session).

type FtpMode = 'plain' | 'explicit' | 'implicit';

function ftpDriver(gw: TestGateway, mode: FtpMode, dir: string, tmp: string): Driver {
  const base =
    mode === 'implicit'
      ? `ftps://127.0.0.1:${gw.ports.ftps}/${dir}/`
      : `ftp://127.0.0.1:${gw.ports.ftp}/${dir}/`;
  const tls = mode === 'plain' ? [] : ['--insecure', ...(mode === 'explicit' ? ['--ssl-reqd'] : [])];
  const curl = async (args: string[], what: string, password = PASSWORD, expectCode = 0) => {
    const r = await run(
      'curl',
      ['-sS', '--max-time', '30', '-u', `${USER}:${password}`, ...tls, ...args],
      35_000,
    );
    expect(r.code, `${mode} ${what}: curl exit ${r.code} ${r.stderr}`).to.equal(expectCode);
    return r;
  };
  const smallFile = path.join(tmp, 'small');
  const listings = ['LIST', 'MLSD', 'NLST'];
  return {
    login: async () => void (await curl(['-I', base], 'login')),
    list: async (i) => void (await curl(['-o', '/dev/null', '-X', listings[i % 3]!, base], 'list')),
    upload: async (i) => void (await curl(['-T', smallFile, `${base}up-${i}`], 'upload')),
    download: async () => {
      const r = await curl([`${base}small`], 'download');
      expect(r.stdout.length).to.equal(SMALL.length);
    },
    // curl sends -Q commands right after the login, before changing to the URL's folder.
    rename: async (i) =>
      void (await curl(['-I', '-Q', `RNFR /${dir}/up-${i}`, '-Q', `RNTO /${dir}/mv-${i}`, base], 'rename')),
    delete: async (i) => void (await curl(['-I', '-Q', `DELE /${dir}/mv-${i}`, base], 'delete')),
    // curl: 67, the login was refused
    'failed login': async () => void (await curl(['-I', base], 'failed login', 'wrong-password', 67)),
    // curl stops a RETR with a range after its bytes: it closes the data connection and sends ABOR.
    'aborted transfer': async () =>
      void (await curl(['-o', '/dev/null', '-r', '0-99', `${base}big`], 'ABOR')),
    'client vanishing mid-transfer': () =>
      vanish(['curl', '-sS', '-u', `${USER}:${PASSWORD}`, ...tls, `${base}big`]),
  };
}

/** vanish starts a client that writes the download to its stdout and kills it (SIGKILL) at the first bytes. */
function vanish(argv: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(argv[0]!, argv.slice(1), { stdio: ['ignore', 'pipe', 'ignore'] });
    const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
    let got = false;
    child.stdout.once('data', () => {
      got = true;
      child.kill('SIGKILL');
    });
    child.stdout.resume();
    child.on('error', reject);
    child.on('close', () => {
      clearTimeout(timer);
      if (got) resolve();
      else reject(new Error(`${argv.join(' ')} ended before any byte of the download arrived`));
    });
  });
}

// ---------------------------------------------------------------------------------------------
// SFTP: ssh2's client, one SSH connection per operation.

function sshConnect(port: number, password: string): Promise<ssh2.Client> {
  return new Promise((resolve, reject) => {
    const client = new ssh2.Client();
    client.once('ready', () => resolve(client));
    client.once('error', reject);
    client.connect({ host: '127.0.0.1', port, username: USER, password, readyTimeout: 20_000 });
  });
}

function sftpOf(client: ssh2.Client): Promise<SFTPWrapper> {
  return new Promise((resolve, reject) => client.sftp((err, sftp) => (err ? reject(err) : resolve(sftp))));
}

function sftpDriver(gw: TestGateway, dir: string): Driver {
  const port = gw.ports.sftp!;
  const session = async <T>(work: (sftp: SFTPWrapper, client: ssh2.Client) => Promise<T>): Promise<T> => {
    const client = await sshConnect(port, PASSWORD);
    const closed = new Promise<void>((resolve) => client.once('close', () => resolve()));
    try {
      return await work(await sftpOf(client), client);
    } finally {
      client.end();
      await closed;
    }
  };
  const p = (name: string) => `/${dir}/${name}`;
  const promised = (fn: (cb: (err: Error | null | undefined) => void) => void): Promise<void> =>
    new Promise((resolve, reject) => fn((err) => (err ? reject(err) : resolve())));
  /** readSome opens a file, reads one block and returns the handle, still open. */
  const readSome = (sftp: SFTPWrapper, name: string) =>
    new Promise<Buffer>((resolve, reject) =>
      sftp.open(p(name), 'r', (err, handle) => {
        if (err) return reject(err);
        sftp.read(handle, Buffer.alloc(32 * 1024), 0, 32 * 1024, 0, (e) => (e ? reject(e) : resolve(handle)));
      }),
    );
  return {
    login: () => session(async () => undefined),
    list: () =>
      session(
        (sftp) =>
          new Promise<void>((resolve, reject) =>
            sftp.readdir(p(''), (err) => (err ? reject(err) : resolve())),
          ),
      ),
    upload: (i) => session((sftp) => promised((cb) => sftp.writeFile(p(`up-${i}`), SMALL, cb))),
    download: () =>
      session(
        (sftp) =>
          new Promise<void>((resolve, reject) =>
            sftp.readFile(p('small'), (err, data) => {
              if (err) return reject(err);
              expect(data.length).to.equal(SMALL.length);
              resolve();
            }),
          ),
      ),
    rename: (i) => session((sftp) => promised((cb) => sftp.rename(p(`up-${i}`), p(`mv-${i}`), cb))),
    delete: (i) => session((sftp) => promised((cb) => sftp.unlink(p(`mv-${i}`), cb))),
    'failed login': async () => {
      const failed = await sshConnect(port, 'wrong-password').then(
        (c) => {
          c.end();
          return false;
        },
        () => true,
      );
      expect(failed, 'SFTP login with a wrong password').to.equal(true);
    },
    // An aborted upload: the client writes part of a file and closes the SFTP channel with the handle open.
    'aborted transfer': (i) =>
      session(
        (sftp) =>
          new Promise<void>((resolve, reject) =>
            sftp.open(p(`aborted-${i}`), 'w', (err, handle) => {
              if (err) return reject(err);
              sftp.write(handle, BIG, 0, 256 * 1024, 0, (e) => {
                if (e) return reject(e);
                sftp.end();
                resolve();
              });
            }),
          ),
      ),
    // The client's connection is cut while a download's handle is open and reading.
    'client vanishing mid-transfer': async () => {
      const client = await sshConnect(port, PASSWORD);
      const closed = new Promise<void>((resolve) => client.once('close', () => resolve()));
      client.on('error', () => undefined);
      await readSome(await sftpOf(client), 'big');
      client.destroy();
      await closed;
    },
  };
}

// ---------------------------------------------------------------------------------------------

describe(`Resources: every protocol closes what it opened (${dbKind})`, function () {
  this.timeout(10 * 60_000);
  let gw: TestGateway;
  let ca: Buffer;
  let tmp: string;
  let roles: SocketRoles;

  before(async () => {
    gw = await startTestGateway({
      ports: { webdav: 0, ftp: 0, ftps: 0, sftp: 0, ftp_pasv: `${PASV.first}-${PASV.last}` },
      database: { pool_size: POOL_SIZE },
      lockout: { max_failures: 1_000_000, ip_max_failures: 1_000_000 },
    });
    ca = readFileSync(path.join(gw.config.data_dir, 'tls', 'cert.pem'));
    tmp = mkdtempSync(path.join(os.tmpdir(), 'svc-resources-'));
    writeFileSync(path.join(tmp, 'small'), SMALL);
    const op = operatorPrincipal();
    await gw.core.namespace.mkdir(op, ROOT);
    await gw.core.users.create(op, { username: USER, password: PASSWORD, user_root: `${ROOT}/` });
    await gw.core.permissions.create(op, { username: USER, path: ROOT, permission: 'full' });
    const local = new Map<number, string>();
    for (const [name, port] of Object.entries(gw.ports))
      local.set(port, name === 'https' ? 'REST' : name === 'ftps' ? 'ftps control' : `${name}`);
    local.set(gw.ports.ftp!, 'ftp control');
    const dbPort = TEST_DATABASE_URL ? Number(new URL(TEST_DATABASE_URL).port || 5432) : 0;
    roles = {
      local,
      localRanges: [{ ...PASV, role: 'ftp data' }],
      remote: new Map(dbPort ? [[dbPort, 'database']] : []),
    };
  });
  after(async () => {
    await gw?.stop();
    if (tmp) rmSync(tmp, { recursive: true, force: true });
  });

  const protocols: { name: string; driver: (dir: string) => Driver }[] = [
    { name: 'REST', driver: (dir) => restDriver(gw, ca, dir) },
    { name: 'FTP', driver: (dir) => ftpDriver(gw, 'plain', dir, tmp) },
    { name: 'FTPS explicit', driver: (dir) => ftpDriver(gw, 'explicit', dir, tmp) },
    { name: 'FTPS implicit', driver: (dir) => ftpDriver(gw, 'implicit', dir, tmp) },
    { name: 'SFTP', driver: (dir) => sftpDriver(gw, dir) },
    { name: 'WebDAV', driver: (dir) => davDriver(gw, ca, dir) },
  ];

  for (const protocol of protocols) {
    describe(protocol.name, () => {
      const dir = protocol.name.toLowerCase().replace(/\s+/g, '-');
      let driver: Driver;
      before(async () => {
        await gw.core.namespace.mkdir(operatorPrincipal(), `${ROOT}/${dir}`);
        await writeSiteFile(gw.core, `${ROOT}/${dir}/small`, SMALL);
        await writeSiteFile(gw.core, `${ROOT}/${dir}/big`, BIG);
        driver = protocol.driver(dir);
        // One of each first, so what a protocol opens once for good (a TLS context, a pool
        // connection, a worker) is in the baseline and not counted as a leak.
        for (const kind of OPERATION_KINDS) await driver[kind](OPERATIONS);
      });

      for (const kind of OPERATION_KINDS) {
        it(`${OPERATIONS} × ${kind} leave no descriptor or resource open`, async () => {
          const base = snapshot(roles);
          await pool(OPERATIONS, (i) => driver[kind](i));
          const result = await settled(base, roles, {
            slack: SLACK,
            timeoutMs: SETTLE_MS,
            // PostgreSQL's pool may have grown up to its size during the batch.
            allowance: TEST_DATABASE_URL ? { 'socket database': POOL_SIZE, TCPSocketWrap: POOL_SIZE } : {},
          });
          expect(
            result.ok,
            `${protocol.name} ${kind}: ${OPERATIONS} operations, all clients gone, ${result.waitedMs} ms later: ${describeGrowth(result.growth)}`,
          ).to.equal(true);
        });
      }
    });
  }
});

// ---------------------------------------------------------------------------------------------
// Idle timeout with clients that go silent and never close their side (a dropped network looks the
// same): the server must still close its side, on a bound, though the client's socket stays.

/** silentClient opens a connection that never closes its side and reads only when asked. */
async function silentClient(
  port: number,
): Promise<{ socket: net.Socket; until: (re: RegExp) => Promise<string> }> {
  const socket = net.connect({ host: '127.0.0.1', port, allowHalfOpen: true });
  socket.on('error', () => undefined);
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', resolve);
    socket.once('error', reject);
  });
  let text = '';
  const waiters: (() => void)[] = [];
  socket.on('data', (d: Buffer) => {
    text += d.toString('latin1');
    for (const w of waiters.splice(0)) w();
  });
  const until = async (re: RegExp) => {
    const deadline = Date.now() + 10_000;
    for (;;) {
      const m = re.exec(text);
      if (m) return m[0];
      if (Date.now() > deadline) throw new Error(`no ${re} in ${JSON.stringify(text)}`);
      await new Promise<void>((resolve) => {
        waiters.push(resolve);
        setTimeout(resolve, 100);
      });
    }
  };
  return { socket, until };
}

describe(`Resources: the idle timeout closes the server's side of silent clients (${dbKind})`, function () {
  this.timeout(60_000);
  let gw: TestGateway;
  let roles: SocketRoles;
  const clients: net.Socket[] = [];

  before(async () => {
    gw = await startTestGateway({
      ports: { ftp: 0, sftp: 0, ftp_pasv: `${PASV.first}-${PASV.last}` },
      ftp: { idle_timeout_seconds: 1, data_timeout_seconds: 1 },
      sftp: { idle_timeout_seconds: 1 },
    });
    const op = operatorPrincipal();
    await gw.core.namespace.mkdir(op, ROOT);
    await gw.core.users.create(op, { username: USER, password: PASSWORD, user_root: `${ROOT}/` });
    await gw.core.permissions.create(op, { username: USER, path: ROOT, permission: 'full' });
    // Larger than what loopback's socket buffers hold, so a client that reads nothing stalls it.
    await writeSiteFile(gw.core, `${ROOT}/huge`, Buffer.alloc(48 * 1024 * 1024, 'huge file '));
    roles = {
      local: new Map([
        [gw.ports.ftp!, 'ftp control'],
        [gw.ports.sftp!, 'sftp'],
      ]),
      localRanges: [{ ...PASV, role: 'ftp data' }],
      remote: new Map(),
    };
  });
  afterEach(() => {
    for (const c of clients.splice(0)) c.destroy();
  });
  after(async () => gw?.stop());

  /** serverSockets counts the gateway's own sockets of one role (the listener's included). */
  const serverSockets = (role: string) => snapshot(roles).descriptorKinds[`socket ${role}`] ?? 0;

  async function expectServerSideClosed(what: string, base: Record<string, number>): Promise<void> {
    const deadline = Date.now() + 15_000;
    let now: Record<string, number> = {};
    for (;;) {
      now = Object.fromEntries(Object.keys(base).map((role) => [role, serverSockets(role)]));
      if (Object.keys(base).every((role) => now[role]! <= base[role]!)) break;
      if (Date.now() > deadline)
        expect.fail(
          `${what}: the server kept its side open, ${JSON.stringify(now)} vs ${JSON.stringify(base)} before`,
        );
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    for (const c of clients)
      expect(c.destroyed, `${what}: the client's socket is still its own`).to.equal(false);
  }

  it('FTP: a control connection silent after login', async () => {
    const base = { 'ftp control': serverSockets('ftp control') };
    const c = await silentClient(gw.ports.ftp!);
    clients.push(c.socket);
    await c.until(/^220 /m);
    c.socket.write(`USER ${USER}\r\nPASS ${PASSWORD}\r\n`);
    await c.until(/^230 /m);
    c.socket.pause();
    await expectServerSideClosed('FTP silent control connection', base);
  });

  it('FTP: a download whose client stops reading both connections', async () => {
    const base = { 'ftp control': serverSockets('ftp control'), 'ftp data': serverSockets('ftp data') };
    const c = await silentClient(gw.ports.ftp!);
    clients.push(c.socket);
    await c.until(/^220 /m);
    c.socket.write(`USER ${USER}\r\nPASS ${PASSWORD}\r\nEPSV\r\n`);
    const port = Number(/\(\|\|\|(\d+)\|\)/.exec(await c.until(/^229 .*$/m))![1]);
    const data = await silentClient(port);
    clients.push(data.socket);
    data.socket.pause();
    c.socket.write('RETR huge\r\n');
    await c.until(/^150 /m);
    c.socket.pause();
    await expectServerSideClosed('FTP stalled download', base);
  });

  it('SFTP: a connection that never sends a byte', async () => {
    const base = { sftp: serverSockets('sftp') };
    const c = await silentClient(gw.ports.sftp!);
    clients.push(c.socket);
    await c.until(/^SSH-2\.0-/m);
    c.socket.pause();
    await expectServerSideClosed('SFTP silent connection', base);
  });
});
