/**
 * Faults in each protocol's terms (issue 12, item 3), seen through real clients: a data dir on a
 * small tmpfs that is full (curl for WebDAV and the REST part upload, lftp for FTP, OpenSSH sftp
 * and a raw SFTP channel), with the local store and with S3 (the S3 server's directory on the same
 * tmpfs: the store refuses, and SFTP's local staging meets the full disk), and a database that stops answering (PostgreSQL behind a TCP proxy the
 * test cuts; on SQLite, the database file held locked by another connection). Each protocol must
 * answer with its own "insufficient storage" or "service unavailable", keep the old content, leave
 * nothing behind and log a line per failed transfer or a few per outage, not one per request.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync, statfsSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import tls from 'node:tls';
import path from 'node:path';
import { createRequire } from 'node:module';
import { expect } from 'chai';
import { operatorPrincipal, type Core } from '../../src/core/index.ts';
import { SPARES } from '../../src/core/files/spares.ts';
import { freshDatabase } from '../helpers/database.ts';
import { dbKind, startTestGateway, TEST_DATABASE_URL, type TestGateway } from '../helpers/gateway.ts';
import { captureLogs, type LogCapture } from '../helpers/logs.ts';
import { startS3, type S3TestServer } from '../helpers/s3.ts';
import { startTcpProxy, type TcpProxy } from '../helpers/tcp-proxy.ts';
import { curlFtp, lftp, PASSWORD, RawControl, readSiteFile, run, writeSiteFile } from './ftp/clients.ts';
import { unique } from './rest/client.ts';
import { rawSftp, sftpBatch, str, u32, u64, type RawSftp } from './sftp/clients.ts';

/** SqliteConnection is the little of better-sqlite3 (untyped here) the SQLite outage uses. */
interface SqliteConnection {
  exec(sql: string): void;
  close(): void;
}
const openSqlite = createRequire(import.meta.url)('better-sqlite3') as new (
  file: string,
  opts?: { timeout?: number },
) => SqliteConnection;

const API = '/api/rest/v1';
const FULL_MESSAGE = /storage is full/i;
const SSH_FXP = { INIT: 1, OPEN: 3, CLOSE: 4, WRITE: 6, MKDIR: 14, STATUS: 101, HANDLE: 102 };
const SSH_FX_FAILURE = 4;

/** makeUser creates a user with full rights on an existing user_root home/<name>. */
async function makeUser(core: Core): Promise<string> {
  const op = operatorPrincipal();
  const name = unique('fault');
  await core.namespace.mkdir(op, `home/${name}`);
  await core.users.create(op, {
    username: name,
    password: PASSWORD,
    user_root: `home/${name}/`,
    grant_permission: 'full',
  });
  return name;
}

/** curl runs curl against the gateway and returns the status, the headers and the body. */
async function curl(
  gw: TestGateway,
  port: number,
  method: string,
  urlPath: string,
  opts: { user?: string; headers?: string[]; file?: string } = {},
): Promise<{ status: number; headers: string; body: string }> {
  const cert = path.join(gw.config.data_dir, 'tls', 'cert.pem');
  const dir = mkdtempSync(path.join(os.tmpdir(), 'faults-curl-'));
  const headerFile = path.join(dir, 'headers');
  try {
    const args = ['-sS', '--max-time', '30', '--cacert', cert, '-X', method, '-D', headerFile];
    args.push('-w', '\n%{http_code}');
    if (opts.user) args.push('-u', `${opts.user}:${PASSWORD}`);
    for (const h of opts.headers ?? []) args.push('-H', h);
    if (opts.file) args.push('-T', opts.file);
    args.push(urlPath.startsWith('https:') ? urlPath : `https://localhost:${port}${urlPath}`);
    const r = await run('curl', args, 60_000);
    const nl = r.stdout.lastIndexOf('\n');
    const status = Number(r.stdout.slice(nl + 1));
    if (!status) throw new Error(`curl got no reply (the connection was reset?): ${r.stderr}`);
    let headers = '';
    try {
      headers = execFileSync('cat', [headerFile]).toString();
    } catch {
      // no headers written
    }
    return { status, headers, body: r.stdout.slice(0, nl) };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** sftpStatus reads an SFTP STATUS packet: [code, message], or [-1, …] for another packet. */
function sftpStatus(p: Buffer): [number, string] {
  if (p[0] !== SSH_FXP.STATUS) return [-1, `packet type ${p[0]}`];
  const len = p.readUInt32BE(9);
  return [p.readUInt32BE(5), p.subarray(13, 13 + len).toString()];
}

/** RawSession is a raw SFTP channel past INIT, asking one request at a time. */
class RawSession {
  private id = 10;
  private constructor(readonly raw: RawSftp) {}

  static async open(port: number, user: string): Promise<RawSession> {
    const raw = await rawSftp(port, user, PASSWORD);
    raw.send(SSH_FXP.INIT, u32(3));
    await raw.next();
    return new RawSession(raw);
  }

  async ask(type: number, body: Buffer): Promise<Buffer> {
    this.raw.send(type, Buffer.concat([u32(++this.id), body]));
    return this.raw.next(20_000);
  }

  close(): void {
    this.raw.close();
  }
}

/** filesUnder lists every file below `dir` (relative names), none when it does not exist. */
function filesUnder(dir: string): string[] {
  try {
    return readdirSync(dir, { recursive: true, withFileTypes: true })
      .filter((e) => e.isFile())
      .map((e) => path.relative(dir, path.join(e.parentPath, e.name)));
  } catch (err) {
    if ((err as { code?: string }).code === 'ENOENT') return [];
    throw err;
  }
}

/** isDatabaseFile tells SQLite's files in the data dir, which a failed upload may grow (its Action rows). */
function isDatabaseFile(file: string): boolean {
  return /\.(db|sqlite)(-wal|-shm|-journal)?$/.test(file);
}

/** linesOf counts the captured log lines whose message is `message`. */
function linesOf(logs: LogCapture, message: string): Record<string, unknown>[] {
  return logs.lines.filter((l) => l.message === message);
}

/** noBugLines asserts nothing was logged as a bug (an unexpected error, a stack). */
function expectNoBugLines(logs: LogCapture): void {
  const bugs = logs.lines.filter(
    (l) =>
      l.message === 'unexpected error' ||
      l.message === 'sftp request failed' ||
      /\n\s+at /.test(String(l.error ?? '')),
  );
  expect(bugs, JSON.stringify(bugs.slice(0, 3))).to.deep.equal([]);
}

/**
 * fullDiskSuite runs the full-disk faults over one blob store. Local: the data dir on the tmpfs.
 * S3: the data dir and the S3 server's directory both on it, so the store refuses for want of
 * space (s3rver's ENOSPC) and the gateway's local spool (SFTP's staging) meets the full disk too.
 */
function fullDiskSuite(store: 'local' | 's3'): void {
  describe(`faults in each protocol's terms: a full disk (tmpfs data dir${store === 's3' ? ' and S3 store' : ''}, ${dbKind}; needs root for mount)`, function () {
    this.timeout(300_000);
    let mountDir: string;
    let mounted = false;
    let gw: TestGateway;
    let user: string;
    let big: string;
    let s3: S3TestServer | undefined;
    const filler = () => path.join(mountDir, 'filler');

    before(async () => {
      mountDir = mkdtempSync(path.join(os.tmpdir(), 'svc-faults-tmpfs-'));
      try {
        execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=48m', 'tmpfs', mountDir], { stdio: 'pipe' });
        mounted = true;
      } catch (err) {
        throw new Error(
          `mount -t tmpfs is not permitted here (${String((err as { stderr?: Buffer }).stderr ?? err).trim()}): ` +
            'this test needs root, as CI runs it',
        );
      }
      let storage = {};
      if (store === 's3') {
        s3 = await startS3(mountDir);
        // The S3 store reads its credentials through the SDK's default chain (blobstores/index.ts).
        process.env.AWS_ACCESS_KEY_ID = s3.accessKeyId;
        process.env.AWS_SECRET_ACCESS_KEY = s3.secretAccessKey;
        process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED = 'true';
        storage = {
          kind: 's3',
          s3: { bucket: s3.bucket, endpoint: s3.endpoint, region: s3.region, force_path_style: true },
        };
      }
      gw = await startTestGateway({ data_dir: mountDir, storage, ports: { webdav: 0, ftp: 0, sftp: 0 } });
      user = await makeUser(gw.core);
      big = path.join(mkdtempSync(path.join(os.tmpdir(), 'faults-big-')), 'big.bin');
      writeFileSync(big, Buffer.alloc(4 * 1024 * 1024, 7));
    });
    after(async () => {
      await gw?.stop();
      await s3?.stop();
      if (mounted) execFileSync('umount', [mountDir]);
      rmSync(mountDir, { recursive: true, force: true });
      if (big) rmSync(path.dirname(big), { recursive: true, force: true });
    });

    /** fill leaves about `leave` bytes free on the tmpfs (the database still has room to work). */
    function fill(leave = 512 * 1024): void {
      rmSync(filler(), { force: true });
      const s = statfsSync(mountDir);
      const free = s.bavail * s.bsize;
      writeFileSync(filler(), Buffer.alloc(Math.max(0, free - leave)));
    }

    /** overwriteFails runs one protocol's failed overwrite of old.txt and checks what every protocol must. */
    async function overwriteFails(
      name: string,
      attempt: (file: string) => Promise<void>,
      opts: { uploadsKept?: number } = {},
    ): Promise<void> {
      const file = `${name}.txt`;
      const site = `home/${user}/${file}`;
      await writeSiteFile(gw.core, site, `old content of ${name}`);
      // Every file on the disk: the local store's blobs, staging, and the S3 server's objects and parts.
      const filesBefore = filesUnder(mountDir);
      const uploadsBefore = (await s3?.uploadsInProgress()) ?? 0;
      fill();
      const logs = captureLogs(gw.core);
      try {
        await attempt(file);
      } finally {
        logs.stop();
        rmSync(filler(), { force: true });
      }
      const now = await readSiteFile(gw.core, site);
      expect(now.length, 'size of the file after').to.equal(`old content of ${name}`.length);
      expect(now.toString()).to.equal(`old content of ${name}`);
      const uploadsKept = opts.uploadsKept ?? 0;
      // What an upload keeps for a retry (a REST upload whose end failed: its parts, and the object
      // s3rver half wrote under the upload's own blob id) is not left behind; the retried end below
      // completes it.
      const kept = (f: string) => uploadsKept > 0 && /\._S3rver_uploads\/|\/blobs\//.test(f);
      // The staging folder and blobs/spare each hold up to SPARES empty files made ahead for the
      // next SFTP uploads and the next small blobs (spares.ts), which are not leftovers.
      const madeAhead = (f: string) =>
        /^(staging|blobs\/spare)\//.test(f) &&
        statSync(path.join(mountDir, f), { throwIfNoEntry: false })?.size === 0;
      const added = filesUnder(mountDir).filter(
        (f) => !filesBefore.includes(f) && !isDatabaseFile(f) && !kept(f),
      );
      expect(
        added.filter((f) => !madeAhead(f)),
        'files left behind',
      ).to.deep.equal([]);
      for (const folder of ['staging/', 'blobs/spare/'])
        expect(
          added.filter((f) => madeAhead(f) && f.startsWith(folder)),
          `empty files made ahead in ${folder}`,
        ).to.have.length.of.at.most(SPARES);
      if (s3)
        expect((await s3.uploadsInProgress()) - uploadsBefore, 'multipart uploads left open').to.equal(
          uploadsKept,
        );
      expect(
        linesOf(logs, 'upload refused: the storage is full'),
        'log lines per failed transfer',
      ).to.have.length(1);
      expectNoBugLines(logs);
    }

    it('WebDAV PUT: 507 Insufficient Storage', async () => {
      await overwriteFails('dav', async (file) => {
        const r = await curl(gw, gw.ports.webdav!, 'PUT', `/${file}`, { user, file: big });
        expect(r.status, r.body).to.equal(507);
        expect(r.body).to.match(FULL_MESSAGE);
      });
    });

    // With S3 the parts go straight to S3 by presigned URLs, and the client gets S3's own answer;
    // the gateway's own answer comes at action=end, in the next test.
    if (store === 'local')
      it('REST part upload: 507 with type processing-failure/insufficient-storage', async () => {
        await overwriteFails('rest', async (file) => {
          const start = await gw.request('POST', `${API}/files/home/${user}/${file}`, {
            headers: { 'X-SvcAPI-Key': gw.siteKey },
            body: { action: 'put' },
          });
          expect(start.status, start.text).to.equal(200);
          const uri = (start.json as { upload_uri: string }).upload_uri.replace('127.0.0.1', 'localhost');
          const r = await curl(gw, gw.port, 'PUT', uri, { file: big });
          expect(r.status, r.body).to.equal(507);
          expect(JSON.parse(r.body)).to.include({
            type: 'processing-failure/insufficient-storage',
            'http-code': 507,
          });
        });
      });

    if (store === 's3')
      it('REST action=end on S3: 507 with type processing-failure/insufficient-storage when S3 cannot assemble the file', async () => {
        let ended: (() => Promise<{ status: number; text: string }>) | undefined;
        await overwriteFails(
          'rest-end',
          async (file) => {
            rmSync(filler(), { force: true });
            const url = `${API}/files/home/${user}/${file}`;
            const auth = { 'X-SvcAPI-Key': gw.siteKey };
            const start = await gw.request('POST', url, { headers: auth, body: { action: 'put' } });
            expect(start.status, start.text).to.equal(200);
            const { upload_uri: uri, ref } = start.json as { upload_uri: string; ref: string };
            // The part goes to S3 while there is room; S3 then has to write the whole object again.
            const part = await run('curl', ['-sS', '--fail', '-T', big, uri], 60_000);
            expect(part.code, part.stderr).to.equal(0);
            fill();
            const end = await gw.request('POST', url, { headers: auth, body: { action: 'end', ref } });
            expect(end.status, end.text).to.equal(507);
            expect(end.json).to.include({
              type: 'processing-failure/insufficient-storage',
              'http-code': 507,
            });
            ended = () => gw.request('POST', url, { headers: auth, body: { action: 'end', ref } });
          },
          { uploadsKept: 1 },
        );
        // With room again the same end completes the upload, and S3 keeps nothing open.
        const again = await ended!();
        expect(again.status, again.text).to.equal(200);
        expect(await s3!.uploadsInProgress()).to.equal(0);
        expect((await readSiteFile(gw.core, `home/${user}/rest-end.txt`)).length).to.equal(4 * 1024 * 1024);
      });

    // 552 rather than 452: lftp takes a 4xx reply to STOR for a transient error and tries again at
    // once, and its second STOR ("put rolled back to 0") closed the data connection after part of
    // the file, which FTP's stream mode must take for the whole file (measured with lftp 4.9).
    it('FTP STOR: 552, seen by lftp and curl', async () => {
      await overwriteFails('ftp', async (file) => {
        const r = await lftp(gw, 'plain', user, `put ${big} -o ${file}`);
        expect(r.code).to.not.equal(0);
        expect(r.stderr, r.stderr).to.match(/Access failed: 552 The storage is full/);
      });
      await overwriteFails('curl', async (file) => {
        const r = await curlFtp(gw, 'plain', user, file, ['-T', big]);
        // curl names the reply it knows: 552 is CURLE_REMOTE_DISK_FULL, "Exceeded storage allocation".
        expect(r.code).to.equal(70);
        expect(r.stderr, r.stderr).to.match(/Exceeded storage allocation/);
      });
    });

    it('SFTP put (OpenSSH sftp): fails, and the status message says the storage is full', async () => {
      await overwriteFails('sftp', async (file) => {
        const r = await sftpBatch(gw.ports.sftp!, user, { password: PASSWORD }, [`put ${big} ${file}`]);
        expect(r.code).to.not.equal(0);
        expect(r.stderr).to.match(/Failure|storage is full/i);
      });
    });

    it('SFTP WRITE (raw channel): FAILURE whose message says the storage is full', async () => {
      await overwriteFails('raw', async (file) => {
        const s = await RawSession.open(gw.ports.sftp!, user);
        try {
          const opened = await s.ask(
            SSH_FXP.OPEN,
            Buffer.concat([str(`/${file}`), u32(0x02 | 0x08 | 0x10), u32(0)]),
          );
          expect(opened[0]).to.equal(SSH_FXP.HANDLE);
          const handle = opened.subarray(9, 9 + opened.readUInt32BE(5));
          const chunk = Buffer.alloc(32 * 1024, 1);
          let failed: [number, string] | null = null;
          // 4 MiB in 32 KiB WRITEs until one is refused; a few more after it, as a pipelining
          // client sends, must be refused alike without more log lines.
          let after = 0;
          for (let offset = 0; offset < 4 * 1024 * 1024 && after < 3; offset += chunk.length) {
            const st = sftpStatus(
              await s.ask(SSH_FXP.WRITE, Buffer.concat([str(handle), u64(offset), str(chunk)])),
            );
            if (st[0] !== 0) failed ??= st;
            if (failed) after++;
          }
          expect(failed, 'a WRITE was refused').to.not.equal(null);
          expect(failed![0]).to.equal(SSH_FX_FAILURE);
          expect(failed![1]).to.match(FULL_MESSAGE);
          const closed = sftpStatus(await s.ask(SSH_FXP.CLOSE, str(handle)));
          expect(closed[0]).to.equal(SSH_FX_FAILURE);
          expect(closed[1]).to.match(FULL_MESSAGE);
        } finally {
          s.close();
        }
      });
    });

    it('with room again, the same upload succeeds on every protocol (no restart)', async () => {
      const r = await curl(gw, gw.ports.webdav!, 'PUT', '/dav.txt', { user, file: big });
      expect(r.status).to.be.oneOf([201, 204]);
      const f = await lftp(gw, 'plain', user, `put ${big} -o ftp.txt`, { password: PASSWORD });
      expect(f.code, f.stderr).to.equal(0);
      const s = await sftpBatch(gw.ports.sftp!, user, { password: PASSWORD }, [`put ${big} sftp.txt`]);
      expect(s.code, s.stderr).to.equal(0);
      for (const name of ['dav', 'ftp', 'sftp'])
        expect((await readSiteFile(gw.core, `home/${user}/${name}.txt`)).length).to.equal(4 * 1024 * 1024);
    });
  });
}

fullDiskSuite('local');
fullDiskSuite('s3');

/**
 * Outage is how the test takes the database away and gives it back: PostgreSQL behind a TCP proxy
 * that is cut; SQLite's file held by another connection's write transaction (the gateway's writes
 * wait out the busy timeout, then fail with SQLITE_BUSY; its reads still work, so only writes are
 * asserted on both databases).
 */
interface Outage {
  cut(): Promise<void>;
  restore(): Promise<void>;
  close(): Promise<void>;
}

describe(
  dbKind === 'postgres'
    ? "faults in each protocol's terms: the database unreachable (PostgreSQL behind a TCP proxy that is cut)"
    : "faults in each protocol's terms: the database unreachable (SQLite file locked by another writer; the PostgreSQL proxy cut runs with SVC_TEST_DATABASE_URL)",
  function () {
    this.timeout(180_000);
    let gw: TestGateway;
    let outage: Outage;
    let user: string;

    before(async () => {
      if (dbKind === 'postgres') {
        const db = await freshDatabase(TEST_DATABASE_URL, 'svc_faults');
        const direct = new URL(db.url);
        const proxy: TcpProxy = await startTcpProxy(direct.hostname, Number(direct.port || 5432));
        const proxied = new URL(db.url);
        proxied.host = `127.0.0.1:${proxy.port}`;
        gw = await startTestGateway({
          database: { url: proxied.toString() },
          ports: { webdav: 0, ftp: 0, sftp: 0 },
        });
        outage = {
          cut: () => proxy.cut(),
          restore: () => proxy.restore(),
          close: async () => {
            await proxy.close();
            await db.drop();
          },
        };
      } else {
        gw = await startTestGateway({
          ports: { webdav: 0, ftp: 0, sftp: 0 },
          database: { sqlite_busy_timeout_ms: 200 },
        });
        let locker: SqliteConnection | null = null;
        outage = {
          cut: async () => {
            locker = new openSqlite(path.join(gw.config.data_dir, 'gateway.sqlite'), { timeout: 5000 });
            locker.exec('BEGIN IMMEDIATE');
          },
          restore: async () => {
            locker?.exec('ROLLBACK');
            locker?.close();
            locker = null;
          },
          close: async () => undefined,
        };
      }
      user = await makeUser(gw.core);
    });
    after(async () => {
      await outage?.restore().catch(() => undefined);
      await gw?.stop();
      await outage?.close();
    });

    it('REST and WebDAV 503 with Retry-After, FTP 451, SFTP FAILURE; a few log lines; then recovery without restart', async () => {
      // Logged in before the outage: requests after a login, not the login gate, are under test.
      const ftp = await RawControl.connect(gw.ports.ftp!);
      expect(await ftp.login(user, PASSWORD)).to.match(/^230/);
      const sftp = await RawSession.open(gw.ports.sftp!, user);
      // A first WebDAV request records its `login` now, not during the outage.
      expect(
        (await curl(gw, gw.ports.webdav!, 'PROPFIND', '/', { user, headers: ['Depth: 0'] })).status,
      ).to.equal(207);
      const logs = captureLogs(gw.core);
      try {
        await outage.cut();
        for (let i = 0; i < 5; i++) {
          const rest = await curl(gw, gw.port, 'POST', `${API}/folders/home/${user}/rest-${i}`, {
            headers: [`X-SvcAPI-Key: ${gw.siteKey}`],
          });
          expect(rest.status, rest.body).to.equal(503);
          expect(rest.headers).to.match(/^retry-after: \d+/im);
          expect((JSON.parse(rest.body) as { type: string }).type).to.match(/^service-unavailable\//);

          const dav = await curl(gw, gw.ports.webdav!, 'MKCOL', `/dav-${i}`, { user });
          expect(dav.status, dav.body).to.equal(503);
          expect(dav.headers).to.match(/^retry-after: \d+/im);

          expect(await ftp.send(`MKD ftp-${i}`)).to.match(/^(451|421)/);
          if (ftp.closed) break;

          const st = sftpStatus(await sftp.ask(SSH_FXP.MKDIR, Buffer.concat([str(`/sftp-${i}`), u32(0)])));
          expect(st[0]).to.equal(SSH_FX_FAILURE);
          expect(st[1]).to.match(/database|try again/i);
        }
      } finally {
        logs.stop();
        await outage.restore();
      }
      expectNoBugLines(logs);
      // One cause (refused, reset, busy) every few seconds: a handful in all, not one per request.
      const causes = linesOf(logs, 'database unavailable');
      expect(causes.length, JSON.stringify(causes)).to.be.at.least(1).and.at.most(6);
      // 20 refused requests over four protocols: a few lines per cause and per front end, not 20.
      const gate = linesOf(logs, 'login gate unavailable: the database did not answer');
      expect(gate.length, JSON.stringify(gate)).to.be.at.most(4);
      const refused = logs.lines.filter(
        (l) => l.message === 'request failed' || l.message === 'sftp request refused',
      );
      expect(refused.length, 'per-request lines').to.be.at.most(4);
      expect(logs.lines.length, JSON.stringify(logs.lines)).to.be.at.most(12);

      // Back without a restart: the same FTP and SFTP sessions, and new requests.
      const deadline = Date.now() + 30_000;
      for (;;) {
        const rest = await curl(gw, gw.port, 'POST', `${API}/folders/home/${user}/after`, {
          headers: [`X-SvcAPI-Key: ${gw.siteKey}`],
        });
        if (rest.status === 200 || rest.status === 201) break;
        if (Date.now() > deadline) throw new Error(`REST still ${rest.status} 30 s after the restore`);
        await new Promise((r) => setTimeout(r, 250));
      }
      expect((await curl(gw, gw.ports.webdav!, 'MKCOL', '/dav-after', { user })).status).to.equal(201);
      expect(await ftp.send('MKD ftp-after')).to.match(/^257/);
      const st = sftpStatus(await sftp.ask(SSH_FXP.MKDIR, Buffer.concat([str('/sftp-after'), u32(0)])));
      expect(st[0]).to.equal(0);
      ftp.close();
      sftp.close();
    });
  },
);

describe(`a REST part upload the client cuts off (${dbKind})`, function () {
  this.timeout(60_000);
  let gw: TestGateway;

  before(async () => {
    gw = await startTestGateway();
  });
  after(async () => {
    await gw?.stop();
  });

  it('is a normal event: no "unexpected error", no stack, no 500; the upload cannot end without the part', async () => {
    await gw.core.namespace.mkdir(operatorPrincipal(), 'cut');
    const start = await gw.request('POST', `${API}/files/cut/part.bin`, {
      headers: { 'X-SvcAPI-Key': gw.siteKey },
      body: { action: 'put' },
    });
    expect(start.status, start.text).to.equal(200);
    const { upload_uri: uri, ref } = start.json as { upload_uri: string; ref: string };
    const logs = captureLogs(gw.core);
    try {
      // 4 MiB announced, 1 MiB sent, then the connection dropped, as a client killed mid-part.
      const socket = tls.connect({ host: '127.0.0.1', port: gw.port, rejectUnauthorized: false });
      await new Promise<void>((resolve, reject) => {
        socket.once('secureConnect', resolve);
        socket.once('error', reject);
      });
      socket.on('error', () => undefined);
      const target = new URL(uri);
      socket.write(
        `PUT ${target.pathname}${target.search} HTTP/1.1\r\nHost: 127.0.0.1\r\n` +
          `Content-Length: ${4 * 1024 * 1024}\r\n\r\n`,
      );
      await new Promise<void>((resolve) => socket.write(Buffer.alloc(1024 * 1024, 3), () => resolve()));
      socket.destroy();
      // The gateway sees the cut when the part is refused: wait for its one line.
      for (let i = 0; i < 100 && !linesOf(logs, 'request cut off by the client').length; i++)
        await new Promise((r) => setTimeout(r, 100));
    } finally {
      logs.stop();
    }
    expect(linesOf(logs, 'request cut off by the client')).to.have.length(1);
    expectNoBugLines(logs);
    expect(logs.lines.filter((l) => l.status === 500 || l['http-code'] === 500)).to.deep.equal([]);
    const end = await gw.request('POST', `${API}/files/cut/part.bin`, {
      headers: { 'X-SvcAPI-Key': gw.siteKey },
      body: { action: 'end', ref },
    });
    expect(end.status, end.text).to.equal(422);
    expect((end.json as { type: string }).type).to.equal('processing-failure/file-not-uploaded');
  });
});
