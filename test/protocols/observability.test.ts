/**
 * Observability (issue 16, item 3) on the gateway as its own process, with real clients: /metrics
 * counters move by what curl, lftp and OpenSSH sftp really moved, and only loopback or the token
 * may read them; /readyz follows the database (PostgreSQL through a proxy the test cuts) and the
 * blob store, and turns 503 while draining; one access line per HTTP request, FTP command and
 * second of SFTP requests, a line per transfer, login, failed-login and lockout lines, and
 * `log_access: off` silencing the access lines only.
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { promisify } from 'node:util';
import path from 'node:path';
import { expect } from 'chai';
import { TEST_DATABASE_URL, dbKind } from '../helpers/gateway.ts';
import { freshDatabase, type FreshDatabase } from '../helpers/database.ts';
import { logSettled, serveProcess, stopProcess, type ServedProcess } from '../helpers/process.ts';
import { closedPort, startTcpProxy, type TcpProxy } from '../helpers/tcp-proxy.ts';
import { md5File, run, sftpBatch } from './sftp/clients.ts';

const ADMIN = 'opsadmin';
const PASSWORD = 'ops-password-1';
const TOKEN = 'scrape-token-0123456789';
const SIZE = 300_001;

/** Sample is one series of a scrape: its name, labels and value. */
interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** parseMetrics reads Prometheus text format (prom-client's: no timestamps, no escaped quotes in our labels). */
function parseMetrics(text: string): Sample[] {
  return text
    .split('\n')
    .filter((l) => l && !l.startsWith('#'))
    .map((l) => {
      const m = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$/.exec(l);
      if (!m) throw new Error(`not a sample line: ${l}`);
      const labels: Record<string, string> = {};
      for (const [, k, v] of (m[2] ?? '').matchAll(/(\w+)="([^"]*)"/g)) labels[k!] = v!;
      return { name: m[1]!, labels, value: Number(m[3]) };
    });
}

/** valueOf sums the series of `name` whose labels include `labels` (0 when none). */
function valueOf(samples: Sample[], name: string, labels: Record<string, string> = {}): number {
  return samples
    .filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))
    .reduce((sum, s) => sum + s.value, 0);
}

/** JsonLine is one parsed log line. */
type JsonLine = Record<string, unknown>;

/** until polls `cond` every 100 ms until it holds (or fails after 20 s). */
async function until(what: string, cond: () => boolean | Promise<boolean>): Promise<void> {
  const end = Date.now() + 20_000;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error(`timed out waiting: ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe(`observability: /metrics, /readyz, access and login lines (${dbKind})`, function () {
  this.timeout(240_000);
  let dir: string;
  let work: string;
  let env: Record<string, string>;
  let gw: ServedProcess;
  let db: FreshDatabase | null = null;
  let proxy: TcpProxy | null = null;

  /** curl runs curl against the gateway (its certificate is self-signed) and answers its output. */
  function curl(args: string[]) {
    return run(['curl', '-sS', '-k', '--max-time', '30', ...args]);
  }

  /** http answers the status and body of a GET on the HTTPS port, from `from` (a loopback address). */
  async function http(
    route: string,
    opts: { from?: string; headers?: string[] } = {},
  ): Promise<{ status: number; body: string }> {
    const r = await curl([
      '--interface',
      opts.from ?? '127.0.0.1',
      ...(opts.headers ?? []).flatMap((h) => ['-H', h]),
      '-w',
      '\n%{http_code}',
      `https://127.0.0.1:${gw.ports.https}${route}`,
    ]);
    const at = r.stdout.lastIndexOf('\n');
    return { status: Number(r.stdout.slice(at + 1)), body: r.stdout.slice(0, at) };
  }

  async function scrape(): Promise<Sample[]> {
    const r = await http('/metrics');
    expect(r.status, r.body).to.equal(200);
    return parseMetrics(r.body);
  }

  /** lines are the JSON log lines the gateway wrote since `from` (an index into its stderr). */
  function lines(from = 0): JsonLine[] {
    return gw.stderr.slice(from).flatMap((l) => {
      try {
        return [JSON.parse(l) as JsonLine];
      } catch {
        return [];
      }
    });
  }

  /** settledLines answers lines(from) once every line logged so far has reached stderr. */
  async function settledLines(from: number): Promise<JsonLine[]> {
    await logSettled(gw);
    return lines(from);
  }

  function lftp(script: string, password = PASSWORD) {
    const settings = [
      'set cmd:fail-exit yes',
      'set net:max-retries 1',
      'set net:timeout 10',
      'set ftp:passive-mode yes',
      'set ftp:ssl-allow no',
    ].join('; ');
    return run([
      'lftp',
      '-c',
      `${settings}; open -u '${ADMIN}','${password}' ftp://127.0.0.1:${gw.ports.ftp}; ${script}`,
    ]);
  }

  async function start(extra: Record<string, string> = {}): Promise<void> {
    gw = await serveProcess(dir, { ...env, ...extra });
  }

  before(async function () {
    dir = mkdtempSync(path.join(os.tmpdir(), 'svc-ops-'));
    work = mkdtempSync(path.join(os.tmpdir(), 'svc-ops-files-'));
    const first = 20_000 + Math.floor(Math.random() * 10_000);
    const config = path.join(dir, 'ops.yaml');
    writeFileSync(config, 'lockout:\n  max_failures: 3\n');
    env = {
      SVC_CONFIG: config,
      SVC_ADMIN_USERNAME: ADMIN,
      SVC_ADMIN_PASSWORD: PASSWORD,
      SVC_FTPS_PORT: 'off',
      SVC_FTP_PASV_PORTS: `${first}-${first + 9}`,
      SVC_METRICS_ALLOWED_IPS: '127.0.0.1',
      SVC_METRICS_TOKEN: TOKEN,
      // Nothing answers there: each upload's delivery waits in the queue (retried a minute later).
      SVC_WEBHOOKS: JSON.stringify([
        { url: `http://127.0.0.1:${await closedPort()}/hook`, actions: ['create'] },
      ]),
      SVC_WEBHOOK_BACKOFF_SECONDS: '60',
    };
    if (TEST_DATABASE_URL) {
      // The gateway reaches PostgreSQL through a proxy the readiness test cuts.
      db = await freshDatabase(TEST_DATABASE_URL);
      const url = new URL(db.url);
      proxy = await startTcpProxy(url.hostname, Number(url.port || 5432));
      url.hostname = '127.0.0.1';
      url.port = String(proxy.port);
      env.SVC_DATABASE_URL = url.toString();
    }
    await start();
  });

  after(async () => {
    if (gw) await stopProcess(gw);
    await proxy?.close();
    await db?.drop();
    rmSync(dir, { recursive: true, force: true });
    rmSync(work, { recursive: true, force: true });
  });

  it('serves /metrics to the allowed addresses and to the bearer token, and 403 to anyone else', async () => {
    const own = await http('/metrics');
    expect(own.status).to.equal(200);
    expect(own.body).to.match(/^nodejs_eventloop_lag_seconds /m);
    expect(own.body).to.match(/^process_cpu_user_seconds_total /m);
    expect(own.body).to.match(/^svc_db_pool_connections\{state="max"\} /m);
    expect(own.body).to.match(/^svc_webhook_queue_depth 0$/m);
    expect(own.body).to.match(/^svc_webhook_oldest_queued_seconds 0$/m);
    // 127.0.0.2 is another client address, not in SVC_METRICS_ALLOWED_IPS.
    const other = await http('/metrics', { from: '127.0.0.2' });
    expect(other.status).to.equal(403);
    expect(other.body).to.include('metrics.allowed_ips');
    expect(other.body).not.to.include('svc_');
    const wrong = await http('/metrics', { from: '127.0.0.2', headers: [`Authorization: Bearer ${TOKEN}x`] });
    expect(wrong.status).to.equal(403);
    const token = await http('/metrics', { from: '127.0.0.2', headers: [`Authorization: Bearer ${TOKEN}`] });
    expect(token.status).to.equal(200);
    expect(token.body).to.include('svc_connections_total');
  });

  it('counts the bytes, logins, transfers and errors of curl, lftp and sftp by what they moved', async () => {
    const file = path.join(work, 'up.bin');
    writeFileSync(file, randomBytes(SIZE));
    const before = await scrape();
    const from = gw.stderr.length;

    const put = await curl([
      '-u',
      `${ADMIN}:${PASSWORD}`,
      '-T',
      file,
      `https://127.0.0.1:${gw.ports.webdav}/m-dav.bin`,
    ]);
    expect(put.code, put.stderr).to.equal(0);
    const up = await lftp(`put ${file} -o m-ftp.bin`);
    expect(up.code, up.stderr).to.equal(0);
    const got = path.join(work, 'got.bin');
    const get = await sftpBatch(gw.ports.sftp!, ADMIN, { password: PASSWORD }, [`get m-ftp.bin ${got}`]);
    expect(get.code, get.stderr).to.equal(0);
    expect(md5File(got)).to.equal(md5File(file));
    const bad = await curl(['-u', `${ADMIN}:wrong-password`, `ftp://127.0.0.1:${gw.ports.ftp}/`]);
    expect(bad.code).to.not.equal(0);

    // The SFTP transfer is reported as its handle closes, which the client does not wait for.
    let after: Sample[] = [];
    await until('the sftp download counted', async () => {
      after = await scrape();
      return valueOf(after, 'svc_transfer_bytes_total', { interface: 'sftp', direction: 'out' }) > 0;
    });
    const delta = (name: string, labels: Record<string, string>) =>
      valueOf(after, name, labels) - valueOf(before, name, labels);

    expect(delta('svc_transfer_bytes_total', { interface: 'dav', direction: 'in' })).to.equal(SIZE);
    expect(delta('svc_transfer_bytes_total', { interface: 'ftp', direction: 'in' })).to.equal(SIZE);
    expect(delta('svc_transfer_bytes_total', { interface: 'sftp', direction: 'out' })).to.equal(SIZE);
    for (const [iface, direction] of [
      ['dav', 'in'],
      ['ftp', 'in'],
      ['sftp', 'out'],
    ] as const)
      expect(
        delta('svc_transfer_duration_seconds_count', { interface: iface, direction, result: 'ok' }),
        `${iface} ${direction}`,
      ).to.equal(1);
    expect(delta('svc_logins_total', { interface: 'dav', result: 'success' })).to.equal(1);
    expect(delta('svc_logins_total', { interface: 'ftp', result: 'success' })).to.equal(1);
    expect(delta('svc_logins_total', { interface: 'sftp', result: 'success' })).to.equal(1);
    expect(delta('svc_logins_total', { interface: 'ftp', result: 'password_mismatch' })).to.equal(1);
    expect(
      delta('svc_errors_total', { interface: 'ftp', type: 'not-authenticated/invalid-username-or-password' }),
    ).to.equal(1);
    expect(delta('svc_connections_total', { interface: 'ftp', result: 'accepted' })).to.equal(2);
    expect(delta('svc_connections_total', { interface: 'sftp', result: 'accepted' })).to.equal(1);
    expect(delta('svc_connections_total', { interface: 'dav', result: 'accepted' })).to.equal(1);
    expect(delta('svc_db_query_duration_seconds_count', { kind: 'work' })).to.be.greaterThan(0);

    // The same transfers, in the log: one access line per request, command and SFTP batch, with
    // the fields an operator correlates by, and one transfer line each.
    const logged = await settledLines(from);
    const access = logged.filter((l) => l.message === 'access');
    const davPut = access.find((l) => l.interface === 'dav' && l.method === 'PUT');
    expect(davPut, 'the WebDAV PUT').to.include({
      user: ADMIN,
      ip: '127.0.0.1',
      status: 201,
      bytes_in: SIZE,
    });
    expect(davPut!.request_id).to.be.a('string');
    expect(davPut!.duration_ms).to.be.a('number');
    const stor = access.find((l) => l.interface === 'ftp' && l.command === 'STOR');
    expect(stor, 'the FTP STOR').to.include({ user: ADMIN, ip: '127.0.0.1', status: 150, arg: 'm-ftp.bin' });
    expect(stor!.session).to.be.a('string');
    const pass = access.filter((l) => l.interface === 'ftp' && l.command === 'PASS');
    expect(pass.map((l) => l.status)).to.have.members([230, 530]);
    expect(
      pass.every((l) => !('arg' in l)),
      'no password in the log',
    ).to.equal(true);
    expect(JSON.stringify(logged)).not.to.include('wrong-password');
    expect(JSON.stringify(logged)).not.to.include(PASSWORD);
    const batch = access.find((l) => l.interface === 'sftp');
    expect(batch, 'an SFTP batch line').to.include({ user: ADMIN, ip: '127.0.0.1' });
    expect((batch!.requests as Record<string, number>).open).to.be.greaterThan(0);
    const transfers = logged.filter((l) => l.message === 'transfer');
    for (const [iface, direction, file] of [
      ['dav', 'in', '/m-dav.bin'],
      ['ftp', 'in', '/m-ftp.bin'],
      ['sftp', 'out', '/m-ftp.bin'],
    ])
      expect(
        transfers.find((t) => t.interface === iface && t.direction === direction),
        `${iface} transfer line`,
      ).to.include({ user: ADMIN, ip: '127.0.0.1', path: file, bytes: SIZE, status: 'ok' });
    expect(transfers.find((t) => t.interface === 'ftp')!.request_id).to.equal(stor!.request_id);
    expect(logged.filter((l) => l.message === 'login').map((l) => l.interface)).to.have.members([
      'dav',
      'ftp',
      'sftp',
    ]);
    expect(logged.find((l) => l.message === 'login failed')).to.include({
      interface: 'ftp',
      user: ADMIN,
      ip: '127.0.0.1',
      failure_type: 'password_mismatch',
    });
  });

  it('reports the webhook deliveries waiting and the age of the oldest', async () => {
    // The two uploads of the test before each queued a delivery nobody accepts.
    const samples = await scrape();
    expect(valueOf(samples, 'svc_webhook_queue_depth')).to.equal(2);
    expect(valueOf(samples, 'svc_webhook_oldest_queued_seconds')).to.be.greaterThan(0);
  });

  it('counts WebDAV downloads by their bytes: streamed (a whole file) and sent from one buffer (a small range)', async () => {
    const before = await scrape();
    const from = gw.stderr.length;
    const url = `https://127.0.0.1:${gw.ports.webdav}/m-dav.bin`;
    const whole = path.join(work, 'whole.bin');
    const part = path.join(work, 'part.bin');
    const auth = ['-u', `${ADMIN}:${PASSWORD}`];
    expect((await curl([...auth, '-o', whole, url])).code).to.equal(0);
    expect((await curl([...auth, '-r', '0-999', '-o', part, url])).code).to.equal(0);
    const sent = readFileSync(path.join(work, 'up.bin'));
    expect(md5File(whole)).to.equal(md5File(path.join(work, 'up.bin')));
    expect(readFileSync(part).equals(sent.subarray(0, 1000)), 'the range').to.equal(true);

    const after = await scrape();
    const delta = (name: string, labels: Record<string, string>) =>
      valueOf(after, name, labels) - valueOf(before, name, labels);
    expect(delta('svc_transfer_bytes_total', { interface: 'dav', direction: 'out' })).to.equal(SIZE + 1000);
    expect(
      delta('svc_transfer_duration_seconds_count', { interface: 'dav', direction: 'out', result: 'ok' }),
    ).to.equal(2);
    const transfers = (await settledLines(from)).filter(
      (l) => l.message === 'transfer' && l.interface === 'dav',
    );
    expect(transfers.map((t) => [t.direction, t.bytes, t.status])).to.have.deep.members([
      ['out', SIZE, 'ok'],
      ['out', 1000, 'ok'],
    ]);
  });

  it('counts small FTP and SFTP downloads (read whole by the store) by their bytes, whole and after an offset', async () => {
    // 5,000 bytes: under the 64 KiB the local store reads whole, so each download is sent from
    // one buffer, also the rest of the file after FTP's REST (curl -r 1000-) or an SFTP READ's offset.
    const small = randomBytes(5000);
    const local = path.join(work, 'small.bin');
    writeFileSync(local, small);
    const auth = `${ADMIN}:${PASSWORD}`;
    const ftpUrl = `ftp://127.0.0.1:${gw.ports.ftp}/small.bin`;
    expect((await curl(['-u', auth, '-T', local, ftpUrl])).code).to.equal(0);
    const before = await scrape();
    const from = gw.stderr.length;
    const whole = path.join(work, 'small-whole.bin');
    const rest = path.join(work, 'small-rest.bin');
    const viaSftp = path.join(work, 'small-sftp.bin');
    expect((await curl(['-u', auth, '-o', whole, ftpUrl])).code).to.equal(0);
    expect((await curl(['-u', auth, '-r', '1000-', '-o', rest, ftpUrl])).code).to.equal(0);
    const get = await sftpBatch(gw.ports.sftp!, ADMIN, { password: PASSWORD }, [`get small.bin ${viaSftp}`]);
    expect(get.code, get.stderr).to.equal(0);
    expect(readFileSync(whole).equals(small), 'the FTP download').to.equal(true);
    expect(readFileSync(rest).equals(small.subarray(1000)), 'the FTP download after REST 1000').to.equal(
      true,
    );
    expect(readFileSync(viaSftp).equals(small), 'the SFTP download').to.equal(true);

    // The SFTP transfer is reported as its handle closes, which the client does not wait for.
    let after: Sample[] = [];
    await until('the sftp download counted', async () => {
      after = await scrape();
      return (
        valueOf(after, 'svc_transfer_bytes_total', { interface: 'sftp', direction: 'out' }) >
        valueOf(before, 'svc_transfer_bytes_total', { interface: 'sftp', direction: 'out' })
      );
    });
    const delta = (name: string, labels: Record<string, string>) =>
      valueOf(after, name, labels) - valueOf(before, name, labels);
    expect(delta('svc_transfer_bytes_total', { interface: 'ftp', direction: 'out' })).to.equal(5000 + 4000);
    expect(delta('svc_transfer_bytes_total', { interface: 'sftp', direction: 'out' })).to.equal(5000);
    const transfers = (await settledLines(from)).filter(
      (l) => l.message === 'transfer' && l.direction === 'out',
    );
    expect(transfers.map((t) => [t.interface, t.path, t.bytes, t.status])).to.have.deep.members([
      ['ftp', '/small.bin', 5000, 'ok'],
      ['ftp', '/small.bin', 4000, 'ok'],
      ['sftp', '/small.bin', 5000, 'ok'],
    ]);
  });

  it('logs REST requests with their user and counts a REST download by its bytes', async () => {
    const before = await scrape();
    const from = gw.stderr.length;
    const api = `https://127.0.0.1:${gw.ports.https}/api/rest/v1`;
    const session = await curl([
      ...[
        '-H',
        'Content-Type: application/json',
        '-d',
        JSON.stringify({ username: ADMIN, password: PASSWORD }),
      ],
      `${api}/sessions`,
    ]);
    const sid = (JSON.parse(session.stdout) as { id: string }).id;
    const file = await curl([
      '-H',
      `X-SvcAPI-Auth: ${sid}`,
      '-H',
      'X-Request-Id: trace-42',
      `${api}/files/m-dav.bin`,
    ]);
    const { download_uri: uri } = JSON.parse(file.stdout) as { download_uri: string };
    const got = path.join(work, 'rest-got.bin');
    const dl = await curl(['-o', got, uri]);
    expect(dl.code, dl.stderr).to.equal(0);
    expect(md5File(got)).to.equal(md5File(path.join(work, 'up.bin')));
    const after = await scrape();
    const key = { interface: 'restapi', direction: 'out' };
    expect(
      valueOf(after, 'svc_transfer_bytes_total', key) - valueOf(before, 'svc_transfer_bytes_total', key),
    ).to.equal(SIZE);
    const logged = await settledLines(from);
    // The client's request id is kept, so a balancer's or a client's trace finds the line.
    expect(logged.find((l) => l.message === 'access' && l.request_id === 'trace-42')).to.include({
      interface: 'restapi',
      user: ADMIN,
      ip: '127.0.0.1',
      method: 'GET',
      path: '/api/rest/v1/files/m-dav.bin',
      status: 200,
    });
    // The signed URL's token is a credential: never in the log.
    const token = new URL(uri).pathname.split('/')[2]!;
    expect(JSON.stringify(logged)).not.to.include(token);
    expect(logged.find((l) => l.message === 'transfer' && l.interface === 'restapi')).to.include({
      path: '/download/…',
      direction: 'out',
      bytes: SIZE,
      status: 'ok',
      ip: '127.0.0.1',
    });
  });

  /** unlock ends the admin's lockout and its count of failures, with the operator's command beside the gateway. */
  async function unlock(): Promise<void> {
    // Not execFileSync: the database proxy runs on this test's event loop.
    await promisify(execFile)(process.execPath, ['bin/svc-gateway.js', 'users', 'unlock', ADMIN], {
      env: { ...process.env, ...env, SVC_DATA_DIR: dir, SVC_LOG_LEVEL: 'warn' },
    });
  }

  it('logs failed logins and the lockout they cause, and counts them', async () => {
    // The failure of the test before counts toward the lockout: start from none.
    await unlock();
    const from = gw.stderr.length;
    const before = await scrape();
    // lockout.max_failures is 3 here; the 4th attempt meets the lockout.
    for (let i = 0; i < 4; i++) {
      const r = await curl(['-u', `${ADMIN}:not-it-${i}`, `ftp://127.0.0.1:${gw.ports.ftp}/`]);
      expect(r.code).to.not.equal(0);
    }
    const logged = await settledLines(from);
    const failed = logged.filter((l) => l.message === 'login failed');
    expect(failed.map((l) => l.failure_type)).to.deep.equal([
      'password_mismatch',
      'password_mismatch',
      'password_mismatch',
      'locked_out',
    ]);
    const lockout = logged.filter((l) => l.message === 'user locked out');
    expect(lockout).to.have.length(1);
    expect(lockout[0]).to.include({ interface: 'ftp', user: ADMIN, ip: '127.0.0.1', level: 'warn' });
    const after = await scrape();
    const delta = (result: string) =>
      valueOf(after, 'svc_logins_total', { interface: 'ftp', result }) -
      valueOf(before, 'svc_logins_total', { interface: 'ftp', result });
    expect(delta('password_mismatch')).to.equal(3);
    expect(delta('locked_out')).to.equal(1);
    await unlock();
  });

  it('answers /readyz 200, and 503 naming the blob store while its folder is not one', async () => {
    const ok = await http('/readyz');
    expect(ok.status).to.equal(200);
    expect(JSON.parse(ok.body)).to.deep.equal({
      status: 'ready',
      database: 'ok',
      storage: 'ok',
      draining: false,
    });
    const blobs = path.join(dir, 'blobs');
    renameSync(blobs, `${blobs}.away`);
    writeFileSync(blobs, 'not a folder');
    try {
      const broken = await http('/readyz');
      expect(broken.status).to.equal(503);
      expect(JSON.parse(broken.body)).to.include({ status: 'not ready', database: 'ok', storage: 'ENOTDIR' });
      // Liveness stays: the process answers.
      expect((await http('/healthz')).status).to.equal(200);
    } finally {
      rmSync(blobs);
      renameSync(`${blobs}.away`, blobs);
    }
    expect((await http('/readyz')).status).to.equal(200);
  });

  it('answers /readyz 503 while the database is cut, and 200 once it is back (PostgreSQL)', async function () {
    if (!proxy) return this.skip();
    await proxy.cut();
    try {
      await until('/readyz 503', async () => (await http('/readyz')).status === 503);
      const r = await http('/readyz');
      const body = JSON.parse(r.body) as Record<string, unknown>;
      expect(body.status).to.equal('not ready');
      expect(body.database).to.not.equal('ok');
      expect(body.storage).to.equal('ok');
      expect((await http('/healthz')).status).to.equal(200);
    } finally {
      await proxy.restore();
    }
    await until('/readyz 200 again', async () => (await http('/readyz')).status === 200);
  });

  it('writes no access or transfer lines with log_access off, and still the login lines', async () => {
    await stopProcess(gw);
    await start({ SVC_LOG_ACCESS: 'off' });
    const from = gw.stderr.length;
    expect((await http('/healthz')).status).to.equal(200);
    const up = await lftp(`put ${path.join(work, 'up.bin')} -o m-quiet.bin`);
    expect(up.code, up.stderr).to.equal(0);
    // Lines reach stderr in batches, in order: a failed login's line, logged after the upload,
    // tells that every line of the upload has come.
    const denied = await curl([
      '-o',
      '/dev/null',
      '-w',
      '%{http_code}',
      '-H',
      'Content-Type: application/json',
      '-d',
      '{"username":"nobody-here","password":"wrong"}',
      `https://127.0.0.1:${gw.ports.https}/api/rest/v1/sessions`,
    ]);
    expect(denied.stdout).to.equal('401');
    await until('the failed login line', () => lines(from).some((l) => l.message === 'login failed'));
    const logged = lines(from);
    expect(logged.filter((l) => l.message === 'access' || l.message === 'transfer')).to.deep.equal([]);
    expect(logged.find((l) => l.message === 'login')).to.include({ interface: 'ftp', user: ADMIN });
    // Counting does not depend on the log.
    const samples = await scrape();
    expect(valueOf(samples, 'svc_transfer_bytes_total', { interface: 'ftp', direction: 'in' })).to.equal(
      SIZE,
    );
  });

  it('answers /readyz 503 while draining (shutdown.unready_seconds), /healthz still 200', async () => {
    await stopProcess(gw);
    await start({ SVC_SHUTDOWN_UNREADY_SECONDS: '4' });
    expect((await http('/readyz')).status).to.equal(200);
    const exited = new Promise<number | null>((resolve) => gw.child.once('exit', resolve));
    gw.child.kill('SIGTERM');
    await until('the drain started', () => gw.stderr.some((l) => l.includes('shutdown.unready_seconds')));
    const r = await http('/readyz');
    expect(r.status).to.equal(503);
    expect(JSON.parse(r.body)).to.include({ status: 'not ready', draining: true, database: 'ok' });
    expect((await http('/healthz')).status).to.equal(200);
    expect(await exited).to.equal(0);
  });
});
