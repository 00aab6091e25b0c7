/**
 * Shared pieces of the protocol benchmarks (ftp.bench.ts, sftp.bench.ts): the gateway child
 * (test/bench/serve.ts), client processes run asynchronously (so the RSS sampler keeps ticking),
 * /proc sampling, a throwaway system user for the peer daemon, temp files and the table.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createHash, randomFillSync } from 'node:crypto';
import {
  closeSync,
  createReadStream,
  fsyncSync,
  openSync,
  readFileSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import https from 'node:https';
import net, { type AddressInfo } from 'node:net';
import os from 'node:os';
import { createInterface } from 'node:readline';

export const MB = 1e6;
export const MiB = 1024 * 1024;
export const FILE_BYTES = Number(process.env.SVC_BENCH_FILE_MB ?? 1024) * MiB;
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

/** api calls the gateway's REST API with its site key; anything but 200/201 throws. */
export function api<T = unknown>(
  gw: GatewayInfo,
  method: string,
  urlPath: string,
  body?: unknown,
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
          'X-SvcAPI-Key': gw.key,
          Accept: 'application/json',
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
