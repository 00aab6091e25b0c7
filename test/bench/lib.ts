/**
 * Shared pieces of the protocol benchmarks (ftp, sftp, webdav, mounts): the gateway child
 * (test/bench/serve.ts), client processes run asynchronously (so the RSS sampler keeps ticking),
 * /proc sampling, a throwaway system user and the peer daemons (OpenSSH sshd, nginx with WebDAV),
 * temp files and the table.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createHash, randomFillSync } from 'node:crypto';
import {
  closeSync,
  createReadStream,
  existsSync,
  fsyncSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import https from 'node:https';
import net, { type AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { freshDatabase } from '../helpers/database.ts';
import { serveProcess, stopProcess, type ServedProcess } from '../helpers/process.ts';
import { openSqlite } from './seed-actions.ts';

export const MB = 1e6;
export const MiB = 1024 * 1024;
/**
 * QUICK (SVC_BENCH_QUICK=1) is a smoke run of the protocol benchmarks: a 64 MiB big file, 100
 * small files, fewer idle connections and one repetition, to check that everything completes.
 */
export const QUICK = process.env.SVC_BENCH_QUICK === '1';
export const FILE_BYTES = Number(process.env.SVC_BENCH_FILE_MB ?? (QUICK ? 64 : 1024)) * MiB;
/** RUNS is how often each transfer runs per server, interleaved with the peer's; the best counts. */
export const RUNS = QUICK ? 1 : 2;
/** SMALL_FILES files of 4 KiB make the small-file rows. */
export const SMALL_FILES = QUICK ? 100 : 1000;
export const SIZE_LABEL =
  FILE_BYTES % (1024 * MiB) === 0 ? `${FILE_BYTES / (1024 * MiB)} GiB` : `${FILE_BYTES / MiB} MiB`;
export const RSS_LIMIT_MIB = 150;
export const API = '/api/rest/v1';

export const seconds = (t0: number) => (performance.now() - t0) / 1000;
export const mbps = (bytes: number, s: number) => bytes / MB / s;
export const f0 = (x: number) => x.toFixed(0);
export const f1 = (x: number) => x.toFixed(1);
export const f2 = (x: number) => x.toFixed(2);

// ---------------------------------------------------------------------------------------------
// Cleanups, run in reverse on exit and on SIGINT/SIGTERM

export const cleanups: (() => Promise<void> | void)[] = [];

export async function runCleanups(): Promise<void> {
  for (const f of cleanups.splice(0).reverse()) await Promise.resolve(f()).catch(() => undefined);
}

process.once('SIGINT', () => void runCleanups().then(() => process.exit(130)));
process.once('SIGTERM', () => void runCleanups().then(() => process.exit(143)));

// ---------------------------------------------------------------------------------------------
// The gateway child

export interface GatewayInfo {
  port: number;
  key: string;
  dataDir: string;
  pid: number;
  ports: Record<string, number>;
  populateMs?: number;
  /** the PostgreSQL database's URL ('' on SQLite, whose file is gateway.sqlite in dataDir) */
  databaseUrl: string;
}

/** startGateway starts test/bench/serve.ts gateway with `args`; `nodeArgs` go to node (e.g. --cpu-prof). */
export async function startGateway(
  args: string[],
  nodeArgs: string[] = [],
  env: NodeJS.ProcessEnv = { SVC_TEST_DATABASE_URL: '' },
): Promise<{ child: ChildProcess; info: GatewayInfo }> {
  const child = spawn(
    process.execPath,
    [...nodeArgs, '--import', 'tsx', 'test/bench/serve.ts', 'gateway', ...args],
    {
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  const line = await new Promise<string>((resolve, reject) => {
    createInterface({ input: child.stdout! }).once('line', resolve);
    child.once('exit', (code) => reject(new Error(`gateway exited with ${code}`)));
  });
  return { child, info: JSON.parse(line) as GatewayInfo };
}

export async function stopChild(child: ChildProcess, signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((r) => child.once('exit', r));
  child.kill(signal);
  await exited;
}

/** ApiTarget is where api() calls: a gateway's HTTPS port, its data dir (for the CA) and credentials. */
export interface ApiTarget {
  port: number;
  dataDir: string;
  /** an API key (X-SvcAPI-Key) */
  key?: string;
  /** a session id from POST /sessions (X-SvcAPI-Auth) */
  session?: string;
}

/** api calls the gateway's REST API with its key or a session; anything but 200/201 throws. */
export function api<T = unknown>(
  gw: ApiTarget,
  method: string,
  urlPath: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<T> {
  const ca = readFileSync(`${gw.dataDir}/tls/cert.pem`);
  const payload = body === undefined ? undefined : Buffer.from(JSON.stringify(body));
  return new Promise((resolve, reject) => {
    const req = https.request(
      {
        host: '127.0.0.1',
        port: gw.port,
        method,
        path: `${API}${urlPath}`,
        ca,
        servername: 'localhost',
        headers: {
          ...(gw.key ? { 'X-SvcAPI-Key': gw.key } : {}),
          ...(gw.session ? { 'X-SvcAPI-Auth': gw.session } : {}),
          Accept: 'application/json',
          ...headers,
          ...(payload
            ? { 'Content-Type': 'application/json', 'Content-Length': String(payload.length) }
            : {}),
        },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          if (res.statusCode !== 200 && res.statusCode !== 201)
            reject(new Error(`${method} ${urlPath}: ${res.statusCode} ${text.slice(0, 300)}`));
          else resolve(JSON.parse(text) as T);
        });
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}

/**
 * apiKey creates an API key named `name` for the session's user, who confirms it with their
 * password (POST /api_keys asks for it), and returns the key.
 */
export async function apiKey(gw: ApiTarget, password: string, name: string): Promise<string> {
  const created = await api<{ key: string }>(
    gw,
    'POST',
    '/api_keys',
    { name },
    { 'X-Svc-Reauthentication': `password:${password}` },
  );
  return created.key;
}

// ---------------------------------------------------------------------------------------------
// Client processes

export interface RunResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** run starts a program (never spawnSync: the samplers must keep ticking), feeds `input`, collects output. */
export function run(
  argv: string[],
  opts: { input?: string; cwd?: string; timeoutMs?: number } = {},
): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(argv[0]!, argv.slice(1), { cwd: opts.cwd, stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs ?? 300_000);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
    // A program that exits without reading its input must not crash the bench (EPIPE).
    child.stdin.on('error', () => undefined);
    child.stdin.end(opts.input ?? '');
  });
}

/** must runs a program and throws with its output unless it exits 0. */
export async function must(argv: string[], opts: Parameters<typeof run>[1] = {}): Promise<RunResult> {
  const r = await run(argv, opts);
  if (r.code !== 0)
    throw new Error(
      `${argv.slice(0, 3).join(' ')} … exited ${r.code}: ${(r.stderr || r.stdout).trim().slice(-600)}`,
    );
  return r;
}

/** timed runs a program that must succeed and returns its wall time in seconds. */
export async function timed(argv: string[], opts: Parameters<typeof run>[1] = {}): Promise<number> {
  const t = performance.now();
  await must(argv, opts);
  return seconds(t);
}

/** best runs `f` `times` times and keeps the shortest time (the machine is shared and noisy). */
export async function best(times: number, f: (i: number) => Promise<number>): Promise<number> {
  let s = Infinity;
  for (let i = 0; i < times; i++) s = Math.min(s, await f(i));
  return s;
}

// ---------------------------------------------------------------------------------------------
// /proc sampling

function readRss(pid: number): number {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) / 1024 : 0;
  } catch {
    return 0;
  }
}

/** cpuTicks is a process's user+system CPU time in seconds. */
export function cpuSeconds(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // Fields 14 and 15 (utime, stime) are at 11 and 12 after the command name.
    return (Number(f[11]) + Number(f[12])) / 100;
  } catch {
    return 0;
  }
}

/** RssSampler reads VmRSS of a process every 100 ms and keeps the maximum, in MiB. */
export class RssSampler {
  max = 0;
  private timer: NodeJS.Timeout | null = null;
  constructor(private readonly pid: number) {}
  get idle(): number {
    return readRss(this.pid);
  }
  start(): void {
    this.sample();
    this.timer ??= setInterval(() => this.sample(), 100);
  }
  pause(): void {
    this.sample();
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }
  private sample(): void {
    this.max = Math.max(this.max, readRss(this.pid));
  }
}

/** CpuMeter measures a process's CPU use over a span, as a percentage of one core. */
export class CpuMeter {
  private cpu0 = 0;
  private t0 = 0;
  constructor(private readonly pid: number) {}
  start(): void {
    this.cpu0 = cpuSeconds(this.pid);
    this.t0 = performance.now();
  }
  stop(): number {
    return (100 * (cpuSeconds(this.pid) - this.cpu0)) / seconds(this.t0);
  }
}

/** kib reads one field (VmRSS, Pss…) of a /proc file in KiB; 0 when the process is gone. */
export function kib(file: string, field: string): number {
  try {
    const m = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(readFileSync(file, 'utf8'));
    return m ? Number(m[1]) : 0;
  } catch {
    return 0;
  }
}

/** processTree is `pid` and every process below it (vsftpd and sshd fork per connection). */
export function processTree(pid: number): number[] {
  const children = new Map<number, number[]>();
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      children.set(ppid, [...(children.get(ppid) ?? []), Number(name)]);
    } catch {
      // gone meanwhile
    }
  }
  const out: number[] = [];
  const walk = (p: number) => {
    out.push(p);
    for (const c of children.get(p) ?? []) walk(c);
  };
  walk(pid);
  return out;
}

/** Memory is the memory of a set of processes: VmRSS and Pss (smaps_rollup) summed, in MiB. */
export interface Memory {
  rss: number;
  pss: number;
  processes: number;
}

/**
 * memory sums VmRSS and Pss of the processes, in MiB, and counts them. VmRSS counts shared pages
 * in each process; Pss divides them among their sharers, the figure to compare forking servers by.
 */
export function memory(pids: number[]): Memory {
  let rss = 0;
  let pss = 0;
  for (const pid of pids) {
    rss += kib(`/proc/${pid}/status`, 'VmRSS');
    pss += kib(`/proc/${pid}/smaps_rollup`, 'Pss');
  }
  return { rss: rss / 1024, pss: pss / 1024, processes: pids.length };
}

/** settle waits a little, so the RSS read after a burst of logins is the idle figure. */
export const settle = (ms = 3000) => new Promise((r) => setTimeout(r, ms));

/** perConnection is the growth from `before` to `during` (MiB) per connection of `count`, in KiB, signed. */
export const perConnection = (before: number, during: number, count: number) => {
  const k = ((during - before) * 1024) / count;
  return `${k >= 0 ? '+' : ''}${f0(k)}`;
};

// ---------------------------------------------------------------------------------------------
// Many idle sessions

/** IDLE_SOURCES loopback addresses (127.0.0.2…) idle connections come from, as many clients would. */
export const IDLE_SOURCES = 5;

/**
 * sourceAddress is the loopback address connection `i` binds to: spread over IDLE_SOURCES, so a
 * server's cap per client address (the gateway's default 256) does not bite at 1,000.
 */
export const sourceAddress = (i: number) => `127.0.0.${2 + (i % IDLE_SOURCES)}`;

/**
 * openMany runs `open(first)` … `open(first + count - 1)`, `parallel` at a time, and returns what
 * opened in order of completion. After the first failure it starts no more and returns, beside
 * what opened, that error (an `open` that fails closes what it opened itself).
 */
export async function openMany<T>(
  count: number,
  parallel: number,
  open: (i: number) => Promise<T>,
  first = 0,
): Promise<{ opened: T[]; error: Error | null }> {
  const opened: T[] = [];
  let error: Error | null = null;
  let next = first;
  const worker = async () => {
    while (!error && next < first + count) {
      try {
        opened.push(await open(next++));
      } catch (err) {
        error ??= err as Error;
      }
    }
  };
  await Promise.all(Array.from({ length: parallel }, worker));
  return { opened, error };
}

/** FtpAccount is where and as whom ftpLogin logs in. */
export interface FtpAccount {
  name: string;
  port: number;
  user: string;
  password: string;
}

/**
 * ftpLogin opens FTP control connection `i` from sourceAddress(i) to 127.0.0.1, logs it in (USER,
 * PASS → 230) and resolves with the socket, left idle; on failure the socket is destroyed.
 */
export function ftpLogin(s: FtpAccount, i: number): Promise<net.Socket> {
  return new Promise<net.Socket>((resolve, reject) => {
    const socket = net.connect({ host: '127.0.0.1', port: s.port, localAddress: sourceAddress(i) });
    const fail = (err: Error) => {
      socket.destroy();
      reject(err);
    };
    socket.setTimeout(60_000, () => fail(new Error(`${s.name}: login ${i} timed out`)));
    socket.on('error', fail);
    const lines = createInterface({ input: socket });
    lines.on('line', (line) => {
      // Multi-line replies (`220-`) wait for their last line.
      if (!/^\d{3} /.test(line)) return;
      const code = line.slice(0, 3);
      if (code === '220') socket.write(`USER ${s.user}\r\n`);
      else if (code === '331') socket.write(`PASS ${s.password}\r\n`);
      else if (code === '230') {
        socket.setTimeout(0);
        lines.close();
        // readline paused the socket on close: flowing again, a server's own close is seen.
        socket.resume();
        resolve(socket);
      } else fail(new Error(`${s.name}: login ${i} answered ${line}`));
    });
  });
}

/** closeFtp ends FTP control connections (QUIT) and waits until each is closed. */
export async function closeFtp(sockets: net.Socket[]): Promise<void> {
  await Promise.all(
    sockets.map(
      (socket) =>
        new Promise<void>((resolve) => {
          if (socket.destroyed) return resolve();
          socket.once('close', () => resolve());
          socket.end('QUIT\r\n');
          setTimeout(() => socket.destroy(), 5000).unref();
        }),
    ),
  );
}

// ---------------------------------------------------------------------------------------------
// Ports, users, files

export async function freePort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const { port } = s.address() as AddressInfo;
  await new Promise((r) => s.close(r));
  return port;
}

export async function waitForPort(port: number, child: ChildProcess, what: string, ms = 5000): Promise<void> {
  const until = Date.now() + ms;
  while (Date.now() < until) {
    if (child.exitCode !== null) throw new Error(`${what} exited with ${child.exitCode}`);
    const ok = await new Promise<boolean>((resolve) => {
      const sock = net.connect(port, '127.0.0.1', () => {
        sock.destroy();
        resolve(true);
      });
      sock.on('error', () => resolve(false));
    });
    if (ok) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`${what} did not listen on ${port} within ${ms} ms`);
}

/** ensurePackage installs a Debian package with apt-get unless `bin` already exists. */
export function ensurePackage(bin: string, pkg: string): void {
  if (spawnSync('test', ['-x', bin]).status === 0) return;
  console.log(`${bin} not found; apt-get install -y ${pkg}`);
  const r = spawnSync('apt-get', ['install', '-y', pkg], {
    encoding: 'utf8',
    timeout: 300_000,
    env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
  });
  if (spawnSync('test', ['-x', bin]).status !== 0)
    throw new Error(`${pkg} is missing and apt-get failed: ${(r.stderr ?? '').trim().slice(-300)}`);
}

/**
 * systemUser creates a throwaway local user (home `home`, shell /bin/bash, password `password`)
 * for a peer daemon and registers its removal; a leftover of an interrupted run is removed first.
 */
export function systemUser(name: string, home: string, password: string): { uid: number; gid: number } {
  spawnSync('userdel', [name]);
  const add = spawnSync('useradd', ['-M', '-d', home, '-s', '/bin/bash', name], { encoding: 'utf8' });
  if (add.status !== 0) throw new Error(`useradd ${name}: ${add.stderr}`);
  cleanups.push(() => void spawnSync('userdel', [name]));
  const pw = spawnSync('chpasswd', [], { input: `${name}:${password}\n`, encoding: 'utf8' });
  if (pw.status !== 0) throw new Error(`chpasswd: ${pw.stderr}`);
  const id = (flag: string) => Number(spawnSync('id', [flag, name], { encoding: 'utf8' }).stdout.trim());
  return { uid: id('-u'), gid: id('-g') };
}

// ---------------------------------------------------------------------------------------------
// Peer daemons

/**
 * startSshd starts OpenSSH's sshd on a free loopback port with its own sshd_config, host key and
 * pid file in `dir`: password login (UsePAM no, StrictModes no) for `user` only, sftp-server as
 * the sftp subsystem, then the `extra` lines of sshd_config. Its stop is registered in cleanups.
 */
export async function startSshd(
  dir: string,
  user: string,
  extra: string[] = [],
): Promise<{ child: ChildProcess; port: number; version: string }> {
  ensurePackage('/usr/sbin/sshd', 'openssh-server');
  ensurePackage('/usr/lib/openssh/sftp-server', 'openssh-sftp-server');
  const hostKey = path.join(dir, 'ssh_host_ed25519_key');
  await must(['ssh-keygen', '-q', '-t', 'ed25519', '-N', '', '-f', hostKey]);
  // sshd refuses to start without its privilege separation directory.
  if (!existsSync('/run/sshd')) {
    mkdirSync('/run/sshd', { mode: 0o755 });
    cleanups.push(() => rmSync('/run/sshd', { recursive: true, force: true }));
  }
  const port = await freePort();
  const conf = path.join(dir, 'sshd_config');
  writeFileSync(
    conf,
    [
      `Port ${port}`,
      'ListenAddress 127.0.0.1',
      `HostKey ${hostKey}`,
      `PidFile ${path.join(dir, 'sshd.pid')}`,
      'UsePAM no',
      'StrictModes no',
      'PasswordAuthentication yes',
      'KbdInteractiveAuthentication no',
      'PubkeyAuthentication no',
      'PermitRootLogin no',
      `AllowUsers ${user}`,
      'PrintMotd no',
      'LogLevel ERROR',
      'Subsystem sftp /usr/lib/openssh/sftp-server',
      ...extra,
      '',
    ].join('\n'),
  );
  const child = spawn('/usr/sbin/sshd', ['-D', '-e', '-f', conf], {
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  cleanups.push(() => stopChild(child));
  await waitForPort(port, child, 'sshd');
  const version = (await run(['/usr/sbin/sshd', '-V'])).stderr.trim().split(',')[0] ?? '';
  return { child, port, version };
}

/**
 * startVsftpd starts vsftpd (Debian) on a free loopback port from its own config `<name>.conf` in
 * `dir` (log and secure_chroot_dir there too): local users log in, write enabled, passive ports
 * `passive`…`passive + 99`, no cap on clients, then the `extra` lines (TLS settings). Its stop is
 * registered in cleanups.
 */
export async function startVsftpd(
  dir: string,
  name: string,
  passive: number,
  extra: string[],
): Promise<{ child: ChildProcess; port: number }> {
  ensurePackage('/usr/sbin/vsftpd', 'vsftpd');
  mkdirSync(path.join(dir, 'empty'), { recursive: true });
  const port = await freePort();
  const conf = path.join(dir, `${name}.conf`);
  writeFileSync(
    conf,
    [
      'listen=YES',
      'listen_ipv6=NO',
      'listen_address=127.0.0.1',
      `listen_port=${port}`,
      'background=NO',
      'anonymous_enable=NO',
      'local_enable=YES',
      'write_enable=YES',
      'local_umask=022',
      'pasv_enable=YES',
      `pasv_min_port=${passive}`,
      `pasv_max_port=${passive + 99}`,
      // Its defaults, said out loud: no cap on clients or per address (the 1,000 idle logins).
      'max_clients=0',
      'max_per_ip=0',
      // Containers often refuse the namespaces and seccomp filters vsftpd would set up.
      'seccomp_sandbox=NO',
      'isolate=NO',
      'isolate_network=NO',
      'xferlog_enable=NO',
      `vsftpd_log_file=${path.join(dir, `${name}.log`)}`,
      `secure_chroot_dir=${path.join(dir, 'empty')}`,
      'pam_service_name=vsftpd',
      ...extra,
      '',
    ].join('\n'),
  );
  const child = spawn('/usr/sbin/vsftpd', [conf], { stdio: ['ignore', 'inherit', 'inherit'] });
  cleanups.push(() => stopChild(child));
  await waitForPort(port, child, `vsftpd (${name})`);
  console.log(`vsftpd ${name} pid ${child.pid} on :${port}, passive ${passive}-${passive + 99}`);
  return { child, port };
}

export const DAV_EXT = '/usr/lib/nginx/modules/ngx_http_dav_ext_module.so';

function aptInstall(pkg: string): void {
  console.log(`trying apt-get install -y ${pkg}`);
  spawnSync('apt-get', ['install', '-y', pkg], {
    stdio: 'ignore',
    timeout: 180_000,
    env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
  });
}

/** davTools finds nginx (with the dav module), dav-ext and rclone, installing what is missing. */
export function davTools(): { nginx: string; davExt: boolean; rclone: boolean } {
  const findNginx = () =>
    ['/usr/sbin/nginx', '/usr/local/sbin/nginx', '/usr/bin/nginx'].find(
      (bin) =>
        spawnSync(bin, ['-V'], { encoding: 'utf8' }).stderr?.includes('--with-http_dav_module') ?? false,
    );
  let nginx = findNginx();
  if (!nginx) {
    aptInstall('nginx');
    nginx = findNginx();
  }
  if (!nginx) throw new Error('nginx with --with-http_dav_module is missing and apt-get install failed');
  if (!existsSync(DAV_EXT)) aptInstall('libnginx-mod-http-dav-ext');
  const hasRclone = () => spawnSync('rclone', ['version']).status === 0;
  let rclone = hasRclone();
  if (!rclone) {
    aptInstall('rclone');
    rclone = hasRclone();
  }
  if (spawnSync('curl', ['--version']).status !== 0) aptInstall('curl');
  return { nginx, davExt: existsSync(DAV_EXT), rclone };
}

/**
 * startNginx serves `root` over HTTPS (the certificate and key in `tlsDir`) with WebDAV writes,
 * and PROPFIND with dav-ext; its config, temp folders and log live in `dir`. Its worker runs as
 * nobody: `root` must be reachable and writable for it. `workerConnections` (nginx's
 * worker_connections, 64 by default here) caps the connections its one worker holds.
 */
export async function startNginx(
  bin: string,
  dir: string,
  root: string,
  tlsDir: string,
  davExt: boolean,
  opts: { workerConnections?: number } = {},
): Promise<{ child: ChildProcess; port: number }> {
  const port = await freePort();
  mkdirSync(path.join(dir, 'tmp'), { recursive: true });
  const t = (name: string) => path.join(dir, 'tmp', name);
  const conf = `daemon off;
worker_processes 1;
${davExt ? `load_module ${DAV_EXT};` : ''}
pid ${path.join(dir, 'nginx.pid')};
error_log ${path.join(dir, 'error.log')} warn;
events { worker_connections ${opts.workerConnections ?? 64}; }
http {
  default_type application/octet-stream;
  access_log off;
  sendfile on;
  client_max_body_size 0;
  client_body_temp_path ${t('body')};
  proxy_temp_path ${t('proxy')};
  fastcgi_temp_path ${t('fastcgi')};
  uwsgi_temp_path ${t('uwsgi')};
  scgi_temp_path ${t('scgi')};
  server {
    listen 127.0.0.1:${port} ssl;
    ssl_certificate ${path.join(tlsDir, 'cert.pem')};
    ssl_certificate_key ${path.join(tlsDir, 'key.pem')};
    root ${root};
    dav_methods PUT DELETE MKCOL COPY MOVE;
    ${davExt ? 'dav_ext_methods PROPFIND OPTIONS;' : ''}
    create_full_put_path on;
    dav_access user:rw group:rw all:r;
  }
}
`;
  const file = path.join(dir, 'nginx.conf');
  writeFileSync(file, conf);
  const child = spawn(bin, ['-p', dir, '-e', path.join(dir, 'error.log'), '-c', file], {
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  await waitForPort(port, child, 'nginx');
  return { child, port };
}

/** generate writes `bytes` random bytes to `file` (fsynced) and returns their md5. */
export function generate(file: string, bytes: number): string {
  const fd = openSync(file, 'w');
  const md5 = createHash('md5');
  const buf = Buffer.alloc(MiB);
  try {
    for (let left = bytes; left > 0; left -= buf.length) {
      const chunk = left >= buf.length ? buf : buf.subarray(0, left);
      randomFillSync(chunk);
      md5.update(chunk);
      writeSync(fd, chunk);
    }
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  return md5.digest('hex');
}

/** md5File streams a file through md5. */
export async function md5File(file: string): Promise<string> {
  const h = createHash('md5');
  for await (const c of createReadStream(file, { highWaterMark: MiB })) h.update(c as Buffer);
  return h.digest('hex');
}

/** smallFiles writes `count` files of `bytes` random bytes named s0000.bin… into `dir`. */
export function smallFiles(dir: string, count: number, bytes: number): void {
  const buf = Buffer.alloc(bytes);
  for (let i = 0; i < count; i++) {
    randomFillSync(buf);
    writeFileSync(`${dir}/s${String(i).padStart(4, '0')}.bin`, buf);
  }
}

// ---------------------------------------------------------------------------------------------
// Table

export interface Row {
  metric: string;
  value: string;
  peer: string;
  ratio: string;
}

/** table renders the result: a title line, notes, the markdown table and any extra text. */
export function table(title: string, notes: string[], rows: Row[], started: number, extra = ''): string {
  return [
    `${title}, ${new Date().toISOString()}, ${process.version}, ${os.cpus().length} cores, ` +
      `${os.cpus()[0]?.model ?? ''}; total ${f0(seconds(started))} s`,
    ...notes,
    '',
    '| metric | value | peer | ratio |',
    '|---|---:|---|---:|',
    ...rows.map((r) => `| ${r.metric} | ${r.value} | ${r.peer} | ${r.ratio} |`),
    ...(extra ? ['', extra] : []),
  ].join('\n');
}

// ---------------------------------------------------------------------------------------------
// Durability, the compiled gateway and the results files of the protocol benchmarks

export type Durability = 'fsync' | 'os';

/** DURABILITY is SVC_DURABILITY (storage.durability) for the gateway under test; fsync by default. */
export const DURABILITY: Durability = (() => {
  const v = process.env.SVC_DURABILITY ?? 'fsync';
  if (v !== 'fsync' && v !== 'os') throw new Error(`SVC_DURABILITY must be fsync or os, not ${v}`);
  return v;
})();

/** durabilityNote says, for a table's notes, what the gateway and `peer` do before an upload is answered. */
export function durabilityNote(peer: string): string {
  return DURABILITY === 'fsync'
    ? `Durability \`fsync\` (SVC_DURABILITY, the default): the gateway has each upload's bytes and its ` +
        `commit on disk before it answers; ${peer} does not fsync (the page cache), so upload rows compare ` +
        `unlike work, marked "no fsync" beside the peer's figure.`
    : `Durability \`os\` (SVC_DURABILITY=os): the gateway, like ${peer}, leaves uploads to the page cache ` +
        `(no fsync before it answers); "no fsync" beside the peer's figure holds for both sides here.`;
}

/** noFsync labels a peer's upload figure: the peer answered before its bytes were on disk. */
export const noFsync = (peer: string) => `${peer} (no fsync)`;

/** benchTitle is a results table's title: the protocol and the durability setting of the run. */
export const benchTitle = (protocol: string) =>
  `${protocol} benchmark, durability \`${DURABILITY}\`${QUICK ? ' (QUICK smoke run: figures not comparable)' : ''}`;

/** ServedGateway is the compiled gateway (`svc-gateway serve`) with an admin session for api(). */
export interface ServedGateway {
  served: ServedProcess;
  pid: number;
  dataDir: string;
  ports: Record<string, number>;
  /** the REST API as the site admin (session) */
  rest: ApiTarget;
}

/**
 * serveCompiled starts the gateway as an operator runs it: `svc-gateway serve` from the compiled
 * dist/ with `npm start`'s node options (run `npm run compile` first; `npm run bench` does), on SQLite with the local blob store in
 * `dataDir`, at DURABILITY, the site admin's password `adminPassword`, the front ends not named in
 * `env` bound on free ports. Its stop is registered in cleanups.
 */
export async function serveCompiled(
  dataDir: string,
  adminPassword: string,
  env: Record<string, string>,
  opts: { prefix?: string[]; nodeArgs?: string[] } = {},
): Promise<ServedGateway> {
  if (!existsSync('dist/.built')) throw new Error('dist/ is not built: run `npm run compile` first');
  const served = await serveProcess(
    dataDir,
    {
      SVC_ADMIN_PASSWORD: adminPassword,
      SVC_DURABILITY: DURABILITY,
      SVC_TEST_DATABASE_URL: '',
      ...env,
    },
    opts,
  );
  cleanups.push(async () => void (await stopProcess(served)));
  const rest: ApiTarget = { port: served.ports.https!, dataDir };
  rest.session = (
    await api<{ id: string }>(rest, 'POST', '/sessions', { username: 'admin', password: adminPassword })
  ).id;
  return { served, pid: served.child.pid!, dataDir, ports: served.ports, rest };
}

/**
 * freshHttpsOnly makes a fresh data dir named `prefix…` and, on the PostgreSQL server `serverUrl`
 * when given, a fresh database, both gone at exit; `env` names them for serveCompiled and turns
 * every listener but HTTPS off (the REST benchmarks).
 */
export async function freshHttpsOnly(
  serverUrl: string,
  prefix: string,
): Promise<{ dataDir: string; env: Record<string, string> }> {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), prefix));
  cleanups.push(() => rmSync(dataDir, { recursive: true, force: true }));
  const env: Record<string, string> = {
    SVC_WEBDAV_PORT: 'off',
    SVC_FTP_PORT: 'off',
    SVC_FTPS_PORT: 'off',
    SVC_SFTP_PORT: 'off',
  };
  if (serverUrl) {
    const fresh = await freshDatabase(serverUrl, 'svc_bench');
    cleanups.push(() => fresh.drop());
    env.SVC_DATABASE_URL = fresh.url;
  }
  return { dataDir, env };
}

/**
 * populateSqlite writes `count` file rows (no blobs) into the folder big/ (made beforehand, e.g.
 * POST /folders/big) of a gateway's SQLite file, while it runs; sizes spread without following names.
 */
export function populateSqlite(dataDir: string, count: number): void {
  const db = openSqlite(path.join(dataDir, 'gateway.sqlite'));
  try {
    db.pragma('busy_timeout = 10000');
    const insert = db.prepare(
      'INSERT INTO files (path, parent, name, type, size, mtime, md5, crc32, blob_id) ' +
        "VALUES (?, 'big', ?, 'file', ?, ?, NULL, NULL, NULL)",
    );
    const base = Date.now() - count * 1000;
    db.transaction(() => {
      for (let j = 0; j < count; j++) {
        const name = `f${String(j).padStart(7, '0')}.bin`;
        insert.run(`big/${name}`, name, (j * 7919) % 1_000_003, base + j * 1000);
      }
    })();
  } finally {
    db.close();
  }
}

/**
 * Figure is one measured pair for the summary of `npm run bench` (test/bench/summary.ts): it reads
 * the figures from results-<name>[-os].json, never the markdown.
 */
export interface Figure {
  /** a stable key the summary looks up, e.g. `stor.plain` */
  key: string;
  gateway: number;
  /** the peer's figure, null when there is none (a limit, not a server) */
  peer: number | null;
  peerName: string;
  unit: 'MB/s' | 'files/s' | 'ms' | 'MiB';
  /** false when the peer answered before its bytes were on disk (an upload to vsftpd, OpenSSH, nginx) */
  peerFsyncs?: boolean;
  /** the peer timed with an fsync of what it stored added (like for like with `fsync`) */
  peerWithFsync?: number;
}

/** writeResults prints the table and writes results-<name>[-os].md and its figures as .json beside it. */
export function writeResults(name: string, text: string, figures: Figure[]): void {
  const base = path.join('test', 'bench', `results-${name}${DURABILITY === 'os' ? '-os' : ''}`);
  console.log(`\n${text}\n`);
  writeFileSync(`${base}.md`, `${text}\n`);
  writeFileSync(
    `${base}.json`,
    `${JSON.stringify(
      {
        bench: name,
        durability: DURABILITY,
        quick: QUICK,
        date: new Date().toISOString(),
        machine: `${os.cpus().length} cores, ${os.cpus()[0]?.model ?? ''}`,
        sizeLabel: SIZE_LABEL,
        smallFiles: SMALL_FILES,
        runs: RUNS,
        figures,
      },
      null,
      2,
    )}\n`,
  );
  console.log(`wrote ${base}.md and ${base}.json`);
}
