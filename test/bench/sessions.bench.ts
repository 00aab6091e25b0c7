/**
 * Idle sessions benchmark (performance issue 13, "Memory: report RSS idle, at 100 and at 1,000
 * idle sessions per protocol"): the gateway's memory with no session, with 100 and with 1,000
 * idle logged-in sessions held open, protocol by protocol, each beside its peer from Debian held
 * the same way:
 *
 *   FTP     control connections logged in (USER, PASS), against vsftpd;
 *   SFTP    SSH connections (ssh2's Client, password login) each with an sftp channel open,
 *           against OpenSSH's sshd with its sftp-server;
 *   WebDAV  HTTPS keep-alive connections each having answered one PROPFIND Depth 0 of / (the
 *           gateway's with an API key as Basic user), against nginx dav with dav-ext.
 *
 * One gateway serves all three in turn: `svc-gateway serve` from the compiled dist/ (`npm run
 * bench:sessions` compiles first), SQLite, the local blob store, its open-file limit raised with
 * prlimit and its connection limits set for 1,000 sessions. The clients connect from IDLE_SOURCES
 * loopback addresses, PARALLEL logins at a time; each server's sessions are closed, and it is left
 * to settle, before the next. The gateway's figure is its VmRSS (its Pss beside it); a peer's is the
 * sum of Pss over its process tree (vsftpd and sshd fork per connection; VmRSS, which counts each
 * shared page in every process, beside it). A peer that cannot hold 1,000 is reported with what it
 * reached and why.
 *
 *   npm run bench:sessions
 *   SVC_BENCH_QUICK=1 npm run bench:sessions     (a smoke run: 10 and 100 sessions)
 *
 * Memory in MiB, per session in KiB. The table is printed and written to
 * test/bench/results-sessions.md, its figures to results-sessions.json. Needs root (useradd,
 * prlimit, the peers); installs vsftpd, openssh-server and nginx if missing.
 */
import { spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { chmodSync, chownSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import https from 'node:https';
import type net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import ssh2 from 'ssh2';
import {
  api,
  cleanups,
  closeFtp,
  davTools,
  ensurePackage,
  f0,
  f1,
  f2,
  type Figure,
  ftpLogin,
  IDLE_SOURCES,
  type Memory,
  memory,
  MiB,
  openMany,
  perConnection,
  processTree,
  QUICK,
  runCleanups,
  type Row,
  seconds,
  serveCompiled,
  settle,
  sourceAddress,
  startNginx,
  startSshd,
  startVsftpd,
  stopChild,
  systemUser,
  table,
  writeResults,
  apiKey,
} from './lib.ts';

/** COUNTS are the numbers of idle sessions measured, each reached by adding to the last. */
const COUNTS = QUICK ? [10, 100] : [100, 1000];
/** PARALLEL logins at a time: a crowd of clients arriving, not a flood (sshd's MaxStartups). */
const PARALLEL = 20;
/**
 * BUDGET_S bounds one server's logins: a peer slower than this is reported with what it reached
 * (keeps the run within minutes); the gateway must reach every count.
 */
const BUDGET_S = 120;
/**
 * GATEWAY_QUIET_S is how long the gateway is left alone before its idle reading: V8 gives back the
 * heap that sessions used only when its memory reducer runs, which took 20-25 s after 1,000 SFTP
 * sessions closed in a probe (RSS 208 → 166 MiB, heap used 75 → 48 MiB); 3 s would read the last
 * protocol's garbage as the next one's idle figure.
 */
const GATEWAY_QUIET_S = 30;
const USER = 'sessbench';
const PASSWORD = 'Bench-password-1';
const SYS_USER = 'svcbenchsess';

/** Session is one idle logged-in connection the bench holds. */
interface Session {
  /** open is false once the server closed it (an idle timeout would show here) */
  open(): boolean;
  close(): Promise<void>;
}

/** Reading is a server's memory at one moment; the gateway's also what its /metrics said then. */
interface Reading {
  memory: Memory;
  /** the gateway's V8 heap in use, MiB (nodejs_heap_size_used_bytes) */
  heap?: number;
  /** the connections the gateway counts open on the protocol's interface (svc_connections_open) */
  serverOpen?: number;
}

/** Point is a server's reading with `count` sessions held, `open` of them still open on our side. */
interface Point extends Reading {
  count: number;
  open: number;
  loginS: number;
}

/** Series is one server's figures: idle, then a Point per count reached; `shortfall` says why not all. */
interface Series {
  server: string;
  idle: Reading;
  points: Point[];
  shortfall: string | null;
}

/** Gateway is what measure needs of the gateway beside its pid: a scrape of its /metrics. */
interface Gateway {
  /** the interface label of the protocol under test in svc_connections_open (ftp, sftp, dav) */
  iface: string;
  metrics(): Promise<string>;
}

/** ftpSession logs FTP control connection `i` in and leaves it idle. */
async function ftpSession(name: string, port: number, user: string, i: number): Promise<Session> {
  const socket = await ftpLogin({ name, port, user, password: PASSWORD }, i);
  return { open: () => !socket.destroyed, close: () => closeFtp([socket]) };
}

/** sftpSession opens SSH connection `i`, logs in by password and opens an sftp channel, left idle. */
function sftpSession(name: string, port: number, user: string, i: number): Promise<Session> {
  return new Promise((resolve, reject) => {
    const client = new ssh2.Client();
    let closed = false;
    const close = () =>
      new Promise<void>((done) => {
        if (closed) return done();
        client.once('close', () => done());
        client.end();
        setTimeout(() => client.destroy(), 5000).unref();
      });
    // Both stay for the session's life: a later error or close (the server's) only marks it closed.
    client.on('close', () => {
      closed = true;
      reject(new Error(`${name}: SSH connection ${i} closed before its sftp channel opened`));
    });
    client.on('error', (err) => {
      client.destroy();
      reject(new Error(`${name}: SSH connection ${i}: ${err.message}`));
    });
    client.on('ready', () =>
      client.sftp((err) => {
        if (!err) return resolve({ open: () => !closed, close });
        client.destroy();
        reject(new Error(`${name}: sftp channel ${i}: ${err.message}`));
      }),
    );
    client.connect({
      host: '127.0.0.1',
      port,
      localAddress: sourceAddress(i),
      username: user,
      password: PASSWORD,
      readyTimeout: 60_000,
    });
  });
}

/**
 * davSession opens HTTPS connection `i`, has it answer one PROPFIND Depth 0 of / (207) and leaves
 * it open and idle. Each has its own keep-alive agent: the socket waits in it after the response,
 * and no other session's request can take it over.
 */
function davSession(
  name: string,
  port: number,
  ca: Buffer,
  authorization: string | null,
  i: number,
): Promise<Session> {
  const agent = new https.Agent({ keepAlive: true, maxSockets: 1 });
  let socket: net.Socket | null = null;
  let closed = false;
  const close = async () => {
    agent.destroy();
    if (socket && !closed) await once(socket, 'close');
  };
  return new Promise((resolve, reject) => {
    const fail = (err: Error) => {
      agent.destroy();
      reject(new Error(`${name}: PROPFIND ${i}: ${err.message}`));
    };
    const req = https.request(
      {
        host: '127.0.0.1',
        port,
        method: 'PROPFIND',
        path: '/',
        agent,
        ca,
        servername: 'localhost',
        localAddress: sourceAddress(i),
        timeout: 60_000,
        headers: { Depth: '0', ...(authorization ? { Authorization: authorization } : {}) },
      },
      (res) => {
        res.resume();
        res.on('end', () => {
          if (res.statusCode !== 207) fail(new Error(`answered ${res.statusCode}`));
          else resolve({ open: () => !closed, close });
        });
      },
    );
    req.on('socket', (s) => {
      socket = s;
      s.once('close', () => (closed = true));
    });
    req.on('timeout', () => req.destroy(new Error('timed out')));
    req.on('error', fail);
    req.end();
  });
}

/** metricValue is one sample's value in Prometheus text, or undefined. */
function metricValue(text: string, sample: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${sample} `));
  return line === undefined ? undefined : Number(line.slice(sample.length + 1));
}

/** scrape reads the gateway's /metrics (answered to loopback without an account, metrics.allowed_ips). */
function scrape(port: number, ca: Buffer): Promise<string> {
  return new Promise((resolve, reject) => {
    https
      .get({ host: '127.0.0.1', port, path: '/metrics', ca, servername: 'localhost' }, (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (text += c));
        res.on('end', () =>
          res.statusCode === 200 ? resolve(text) : reject(new Error(`/metrics answered ${res.statusCode}`)),
        );
      })
      .on('error', reject);
  });
}

/** read takes a server's reading: /proc first, then (the gateway) /metrics, whose scrape allocates. */
async function read(pids: number[], gateway: Gateway | null): Promise<Reading> {
  const m = memory(pids);
  if (!gateway) return { memory: m };
  const text = await gateway.metrics();
  return {
    memory: m,
    heap: (metricValue(text, 'nodejs_heap_size_used_bytes') ?? NaN) / MiB,
    serverOpen: metricValue(text, `svc_connections_open{interface="${gateway.iface}"}`) ?? 0,
  };
}

/** describe is a reading for the log. */
const describe = (r: Reading) =>
  `RSS ${f0(r.memory.rss)} MiB, Pss ${f0(r.memory.pss)} MiB, ${r.memory.processes} process(es)` +
  (r.heap === undefined ? '' : `, heap used ${f0(r.heap)} MiB, ${r.serverOpen} open by its count`);

/**
 * measure reads a server's memory idle, then with each of COUNTS sessions from `open` held (read
 * after a settle), and closes them. `gateway` (null for a peer) is read after GATEWAY_QUIET_S, and
 * cannot fall short of a count without throwing; a peer's shortfall (a refusal, or BUDGET_S spent)
 * is kept in the series.
 */
async function measure(
  server: string,
  pids: () => number[],
  open: (i: number) => Promise<Session>,
  gateway: Gateway | null,
): Promise<Series> {
  await settle(gateway ? GATEWAY_QUIET_S * 1000 : undefined);
  const idle = await read(pids(), gateway);
  console.log(`${server}: idle, ${describe(idle)}`);
  const held: Session[] = [];
  const points: Point[] = [];
  let shortfall: string | null = null;
  const deadline = performance.now() + BUDGET_S * 1000;
  const budgeted = (i: number) =>
    !gateway && performance.now() > deadline
      ? Promise.reject(new Error(`stopped: ${BUDGET_S} s of logins spent (the bench's time budget)`))
      : open(i);
  try {
    for (const count of COUNTS) {
      const t = performance.now();
      const { opened, error } = await openMany(count - held.length, PARALLEL, budgeted, held.length);
      held.push(...opened);
      const loginS = seconds(t);
      if (error) {
        if (gateway) throw error;
        shortfall = `reached ${held.length} of ${count}: ${error.message}`;
        console.log(`${server}: ${shortfall}`);
      }
      await settle();
      const r = await read(pids(), gateway);
      const live = held.filter((s) => s.open()).length;
      points.push({ ...r, count: held.length, open: live, loginS });
      console.log(
        `${server}: ${held.length} sessions (${live} open) after ${f1(loginS)} s of logins, ${describe(r)}`,
      );
      if (error) break;
    }
  } finally {
    await Promise.all(held.map((s) => s.close()));
  }
  return { server, idle, points, shortfall };
}

/** raiseOwnFileLimit lifts this process's open-file limit: it holds 1,000 client sockets at once. */
function raiseOwnFileLimit(): void {
  const m = /^Max open files\s+(\d+)/m.exec(readFileSync('/proc/self/limits', 'utf8'));
  if (m && Number(m[1]) >= 8192) return;
  const r = spawnSync('prlimit', ['--pid', String(process.pid), '--nofile=8192:8192'], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`prlimit of the bench itself: ${r.stderr}`);
}

const rows: Row[] = [];
const figures: Figure[] = [];
const notes: string[] = [];
const started = performance.now();
/** the 1-minute load average at the start: other work on the machine, said beside the figures */
const loadAtStart = os.loadavg()[0]!;

/**
 * cell is a reading for the table: VmRSS, with Pss (and the gateway's heap used) in brackets, MiB
 * (one decimal below 10 MiB: a peer's idle).
 */
const cell = (r: Reading) => {
  const f = (x: number) => (x < 10 ? f1(x) : f0(x));
  return `${f(r.memory.rss)} (Pss ${f(r.memory.pss)}${r.heap === undefined ? '' : `, heap ${f0(r.heap)}`})`;
};

/**
 * report adds a protocol's rows and figures: idle, then each count, the gateway's VmRSS beside the
 * peer's Pss sum, KiB per session from the idle figure (the gateway's VmRSS, the peer's Pss).
 */
function report(key: string, protocol: string, what: string, gw: Series, peer: Series, prior: string): void {
  const procs = (r: Reading) => `${r.memory.processes} process${r.memory.processes === 1 ? '' : 'es'}`;
  rows.push({
    metric: `${protocol}: idle, no session${prior ? ` (after ${prior}'s)` : ''}`,
    value: cell(gw.idle),
    peer: `${peer.server}: ${cell(peer.idle)}, ${procs(peer.idle)}`,
    ratio: f2(gw.idle.memory.rss / peer.idle.memory.pss),
  });
  figures.push({
    key: `${key}.idle`,
    gateway: gw.idle.memory.rss,
    peer: peer.idle.memory.pss,
    peerName: peer.server,
    unit: 'MiB',
  });
  COUNTS.forEach((count, k) => {
    const g = gw.points[k]!;
    const p = peer.points[k];
    // Sessions a server closed by itself, or (the gateway) a count of its own that differs, are said.
    const short = (pt: Point) =>
      (pt.open < pt.count ? `; only ${pt.open} still open` : '') +
      (pt.serverOpen !== undefined && pt.serverOpen !== pt.count ? `; it counts ${pt.serverOpen} open` : '');
    let peerCell = `${peer.server}: not reached (see above)`;
    if (p) {
      const reached = p.count < count ? `reached ${p.count}: ` : '';
      peerCell =
        `${peer.server}: ${reached}${cell(p)}, ${procs(p)}; ` +
        `${perConnection(peer.idle.memory.pss, p.memory.pss, p.count)} KiB Pss/session${short(p)}`;
    }
    rows.push({
      metric: `${protocol}: ${count.toLocaleString('en')} idle ${what}`,
      value: `${cell(g)}; ${perConnection(gw.idle.memory.rss, g.memory.rss, g.count)} KiB/session${short(g)}`,
      peer: peerCell,
      ratio: p ? f2(g.memory.rss / p.memory.pss) : '–',
    });
    figures.push({
      key: `${key}.${count}`,
      gateway: g.memory.rss,
      peer: p && p.count === count ? p.memory.pss : null,
      peerName: peer.server,
      unit: 'MiB',
    });
  });
  const logins = (s: Series) => s.points.map((pt) => `${pt.count} in ${f1(pt.loginS)} s`).join(', then ');
  notes.push(
    `${protocol} logins, ${PARALLEL} at a time (wall time, for orientation only): gateway ${logins(gw)}; ` +
      `${peer.server} ${logins(peer)}.` +
      (peer.shortfall ? ` ${peer.server} ${peer.shortfall}.` : ''),
  );
}

try {
  ensurePackage('/usr/bin/prlimit', 'util-linux');
  raiseOwnFileLimit();
  const tools = davTools();
  if (!tools.davExt) throw new Error('nginx dav-ext (libnginx-mod-http-dav-ext) is missing: no PROPFIND');

  // The work dir is world-traversable: vsftpd's and sshd's sessions run as the bench user, nginx's
  // worker as nobody.
  const work = mkdtempSync(path.join(os.tmpdir(), 'svc-bench-sessions-'));
  cleanups.push(() => rmSync(work, { recursive: true, force: true }));
  chmodSync(work, 0o755);

  const dataDir = path.join(work, 'data');
  const gw = await serveCompiled(
    dataDir,
    PASSWORD,
    {
      SVC_FTPS_PORT: 'off',
      // The defaults follow the open-file limit; set for 1,000 sessions of one user, from
      // IDLE_SOURCES addresses (200 each, under the default cap of 256 per address).
      SVC_MAX_CONNECTIONS: '4000',
      SVC_MAX_CONNECTIONS_PER_ADDRESS: '256',
      SVC_MAX_SESSIONS_PER_USER: '4000',
    },
    { prefix: ['prlimit', '--nofile=8192:8192', '--'] },
  );
  const gwPids = () => [gw.pid];
  const ca = readFileSync(path.join(dataDir, 'tls', 'cert.pem'));
  /** gateway is the gateway as measure sees it while `iface` is under test. */
  const gateway = (iface: string): Gateway => ({ iface, metrics: () => scrape(gw.ports.https!, ca) });
  await api(gw.rest, 'POST', '/users', {
    username: USER,
    password: PASSWORD,
    user_root: '',
    grant_permission: 'full',
  });
  const key = await apiKey(gw.rest, PASSWORD, 'sessions bench');
  console.log(`gateway pid ${gw.pid} (compiled), ports ${JSON.stringify(gw.ports)}`);

  // One local user for vsftpd and sshd, its home in the work dir.
  const home = path.join(work, 'home');
  mkdirSync(home);
  const { uid, gid } = systemUser(SYS_USER, home, PASSWORD);
  chownSync(home, uid, gid);

  // FTP, then vsftpd (stopped afterwards, so its processes are not in the later figures).
  const gFtp = await measure(
    'gateway',
    gwPids,
    (i) => ftpSession('gateway', gw.ports.ftp!, USER, i),
    gateway('ftp'),
  );
  const vdir = path.join(work, 'vsftpd');
  const vsftpd = await startVsftpd(vdir, 'plain', 24000 + 100 * Math.floor(Math.random() * 50), [
    'ssl_enable=NO',
  ]);
  const pFtp = await measure(
    'vsftpd',
    () => processTree(vsftpd.child.pid!),
    (i) => ftpSession('vsftpd', vsftpd.port, SYS_USER, i),
    null,
  );
  await stopChild(vsftpd.child);
  report('ftp', 'FTP', 'logged-in control connections (USER, PASS)', gFtp, pFtp, '');

  // SFTP, then sshd. MaxStartups (10:30:100 by default) drops connections at random from 10
  // unauthenticated ones on, and 20 logins at a time are that; MaxSessions (10 per connection)
  // is not reached by one channel each.
  const gSftp = await measure(
    'gateway',
    gwPids,
    (i) => sftpSession('gateway', gw.ports.sftp!, USER, i),
    gateway('sftp'),
  );
  const sdir = path.join(work, 'sshd');
  mkdirSync(sdir);
  const sshd = await startSshd(sdir, SYS_USER, ['MaxStartups 200']);
  const pSftp = await measure(
    'OpenSSH',
    () => processTree(sshd.child.pid!),
    (i) => sftpSession('OpenSSH', sshd.port, SYS_USER, i),
    null,
  );
  await stopChild(sshd.child);
  report(
    'sftp',
    'SFTP',
    'SSH connections (password login, an sftp channel open in each)',
    gSftp,
    pSftp,
    'FTP',
  );

  // WebDAV, then nginx (its one worker allowed the connections; it serves without authentication).
  const tlsDir = path.join(dataDir, 'tls');
  const basic = `Basic ${Buffer.from(`${key}:`).toString('base64')}`;
  const gDav = await measure(
    'gateway',
    gwPids,
    (i) => davSession('gateway', gw.ports.webdav!, ca, basic, i),
    gateway('dav'),
  );
  const davRoot = path.join(work, 'dav');
  const ndir = path.join(work, 'nginx');
  mkdirSync(davRoot);
  mkdirSync(ndir);
  chmodSync(davRoot, 0o777);
  const nginx = await startNginx(tools.nginx, ndir, davRoot, tlsDir, tools.davExt, {
    workerConnections: COUNTS.at(-1)! + 100,
  });
  cleanups.push(() => stopChild(nginx.child));
  const pDav = await measure(
    'nginx',
    () => processTree(nginx.child.pid!),
    (i) => davSession('nginx', nginx.port, ca, null, i),
    null,
  );
  await stopChild(nginx.child);
  report(
    'webdav',
    'WebDAV',
    'HTTPS keep-alive connections (each after one PROPFIND Depth 0 of /)',
    gDav,
    pDav,
    'SFTP',
  );
  notes.unshift(
    `Gateway: \`svc-gateway serve\` from the compiled dist/ (npm start's node options), SQLite, local blob ` +
      `store, open-file limit 8192 (prlimit), limits.max_connections 4000, max_connections_per_address 256, ` +
      `max_sessions_per_user 4000; FTP and SFTP as a regular user (password, bcrypt), WebDAV with an API key ` +
      `of the site admin as Basic user. One gateway process serves the three protocols in turn; each ` +
      `protocol's idle row is read after the previous protocol's sessions closed and the gateway had ` +
      `${GATEWAY_QUIET_S} s or more with nothing to do (V8 returns its heap only then). Peers (Debian): vsftpd ` +
      `(a local user through PAM, plain), ${sshd.version} sshd with sftp-server (password, MaxStartups 200), ` +
      `nginx with dav and dav-ext (1 worker, worker_connections ${COUNTS.at(-1)! + 100}, no authentication), ` +
      `each started for its protocol and stopped after. Clients from ${IDLE_SOURCES} loopback addresses, ` +
      `${PARALLEL} logins at a time, each count reached by adding to the last; memory read 3 s after the ` +
      `last login, so the gateway's figures with sessions include the logins' garbage not yet collected.`,
    `Memory in MiB: the gateway's VmRSS, in brackets its Pss and its V8 heap in use (/metrics); a peer's ` +
      `sum over its process tree of VmRSS (shared pages counted in every process), in brackets its Pss sum ` +
      `(shared pages divided among their sharers, the comparable figure). The gateway's Pss is below its ` +
      `VmRSS mostly because other Node processes (the bench's own among them) share the node binary's pages. KiB/session: ` +
      `growth from the idle row divided by the sessions, the gateway's VmRSS, the peer's Pss. ratio: ` +
      `gateway VmRSS / peer Pss (lower is better). The gateway's own count of open connections ` +
      `(svc_connections_open) is checked against the sessions held: a difference would be said.`,
    `WebDAV's idle sessions are bounded in time on both sides: the gateway closes an idle keep-alive ` +
      `connection after 65 s, nginx after 75 s (keepalive_timeout); "only N still open" would say so.`,
  );
  notes.push(
    `Load average (1 min) at the start ${f1(loadAtStart)}, at the end ${f1(os.loadavg()[0]!)}, on ` +
      `${os.cpus().length} cores: other work shares the machine.`,
  );
} finally {
  await runCleanups();
}

const text = table(
  `Idle sessions benchmark${QUICK ? ' (QUICK smoke run: figures not comparable)' : ''}`,
  notes,
  rows,
  started,
);
writeResults('sessions', text, figures);
