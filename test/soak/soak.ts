/**
 * The soak (issue 19, "Days, not minutes"): the compiled gateway as its own process, N users each
 * working over every protocol at once for a given time, an admin reading history, idle connections
 * held open; then a quiet spell, and a check of every file the load believes exists. One row a
 * minute (RSS, open descriptors, operations/s per protocol, errors, p99 per operation kind) and a
 * summary whose `failures` say why the run did not pass. `npm run soak` is its command
 * (test/soak/run.ts); test/protocols/soak.test.ts runs a short one in CI.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { serverBuildIsFresh } from '../../bin/built.js';
import { SPARES } from '../../src/core/files/spares.ts';
import { freshDatabase, type FreshDatabase } from '../helpers/database.ts';
import { serveProcess, stopProcess, type ServedProcess } from '../helpers/process.ts';
import {
  PROTOCOLS,
  connect,
  expectStatus,
  httpsCall,
  makeBody,
  type Endpoint,
  type FileClient,
  type Protocol,
} from './clients.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const MiB = 1024 * 1024;
const API = '/api/rest/v1';
const ADMIN_PASSWORD = 'soak-admin-password-1';
const USER_PASSWORD = 'soak-user-password-1';
/**
 * DESCRIPTOR_SLACK is how many descriptors may stay open beyond the baseline: a few (log files, a
 * pooled connection) and the empty files kept made ahead for the next uploads, SPARES for small
 * blobs and SPARES for staged writes (spares.ts), which the first uploads open after the baseline.
 */
export const DESCRIPTOR_SLACK = 4 + 2 * SPARES;
/** RSS_LIMIT_MIB is how far RSS after the quiet spell may be above the first loaded minute. */
export const RSS_LIMIT_MIB = 60;
/**
 * DISK_LIMIT is how many times the live files' bytes the blobs may take after the quiet spell
 * (issue 19: "disk used within 1.5x of live data plus what is being read"; nothing is read then),
 * plus DISK_SLACK_MIB for a small run's few blobs a signed URL still holds until it expires.
 */
export const DISK_LIMIT = 1.5;
export const DISK_SLACK_MIB = 16;
/**
 * DISK_CHECK_QUIET_SECONDS: a signed download URL (the REST clients' downloads) keeps a deleted
 * file's bytes until it expires, 3 minutes after it was handed out, and the minute sweep frees
 * them; only a quiet spell longer than both has nothing left that a reader may still hold.
 */
export const DISK_CHECK_QUIET_SECONDS = 4 * 60;
/** OPERATIONS_PER_LOGIN is how many work cycles a client does before it logs out and in again. */
const CYCLES_PER_LOGIN = 6;
/** FILES_KEPT is how many files each client keeps in its folder; beyond it, it deletes. */
const FILES_KEPT = 4;

/** OPERATION_KINDS are the timed operations, the columns of p99. */
export const OPERATION_KINDS = [
  'login',
  'list',
  'upload',
  'download',
  'rename',
  'delete',
  'history',
] as const;
type OperationKind = (typeof OPERATION_KINDS)[number];

/** SoakOptions are the command's options. */
export interface SoakOptions {
  minutes: number;
  users: number;
  /** a PostgreSQL URL whose server gets a fresh database for the run; empty for SQLite */
  database: string;
  /** the largest upload in MiB (sizes are log-uniform from 1 KiB) */
  maxMiB: number;
  idleSeconds: number;
  idleConnections: number;
  /** pause between one client's operations */
  pauseMs: number;
  /** where rows and messages go (console.log by default) */
  print: (line: string) => void;
}

/** MinuteRow is one row of the table. */
export interface MinuteRow {
  minute: number;
  rssMiB: number;
  descriptors: number;
  /** operations per second by protocol, and `admin` for the history reader */
  opsPerSecond: Record<string, number>;
  mibPerSecond: number;
  errors: number;
  /** p99 in ms by operation kind */
  p99: Partial<Record<OperationKind, number>>;
}

/** SoakSummary is what the run found; `failures` is empty when it passed. */
export interface SoakSummary {
  rows: MinuteRow[];
  operations: number;
  errors: number;
  errorSamples: string[];
  filesVerified: number;
  lost: string[];
  changed: string[];
  unexpected: string[];
  baselineDescriptors: number;
  endDescriptors: number;
  firstMinuteRssMiB: number;
  idleRssMiB: number;
  diskBytes: number;
  liveBytes: number;
  movedBytes: number;
  /** warn and error lines the gateway logged */
  gatewayLogLines: string[];
  failures: string[];
}

/** Tally is what the clients did in the current minute. */
class Tally {
  ops: Record<string, number> = {};
  errors = 0;
  bytes = 0;
  latencies: Record<string, number[]> = {};
  add(protocol: string, kind: OperationKind, ms: number): void {
    this.ops[protocol] = (this.ops[protocol] ?? 0) + 1;
    (this.latencies[kind] ??= []).push(ms);
  }
}

function p99(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil(sorted.length * 0.99) - 1)] ?? 0;
}

/** rssMiB reads VmRSS of a process. */
function rssMiB(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) / 1024 : 0;
}

/** descriptors counts a process's open descriptors. */
function descriptors(pid: number): number {
  return readdirSync(`/proc/${pid}/fd`).length;
}

/** diskBytes is what a folder takes on disk (`du`), 0 when it does not exist. */
function diskBytes(dir: string): number {
  if (!existsSync(dir)) return 0;
  const r = spawnSync('du', ['-sb', dir], { encoding: 'utf8' });
  return Number(r.stdout.split('\t')[0] ?? 0);
}

/**
 * compile runs `npm run compile` unless dist/ is current, so that bin/svc-gateway.js runs the
 * compiled build of these sources (it falls back to tsx when dist/ is stale, which is not what an
 * operator runs).
 */
function compile(print: (line: string) => void): void {
  if (serverBuildIsFresh()) return print('soak: the compiled build is current');
  print('soak: npm run compile');
  const r = spawnSync('npm', ['run', 'compile'], { cwd: ROOT, encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`npm run compile failed: ${r.stdout}${r.stderr}`);
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** logUniform picks a size from 1 KiB to `max` bytes, evenly on a log scale. */
function logUniform(max: number): number {
  const min = 1024;
  return Math.round(Math.exp(Math.log(min) + Math.random() * (Math.log(max) - Math.log(min))));
}

/** Admin is the REST API as the site admin, in one session (POST /sessions). */
interface Admin {
  call(method: string, p: string, body?: unknown): ReturnType<typeof httpsCall>;
}

async function adminOf(e: Endpoint): Promise<Admin> {
  const base = `https://${e.host}:${e.ports.https}${API}`;
  const json = { 'Content-Type': 'application/json' };
  const login = expectStatus(
    await httpsCall(e.ca, {
      method: 'POST',
      url: `${base}/sessions`,
      headers: json,
      body: JSON.stringify({ username: 'admin', password: ADMIN_PASSWORD }),
    }),
    [200],
    'admin login',
  );
  const session = (JSON.parse(login.text) as { id: string }).id;
  return {
    call: (method, p, body) =>
      httpsCall(e.ca, {
        method,
        url: `${base}${p}`,
        headers: { 'X-SvcAPI-Auth': session, ...(body === undefined ? {} : json) },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      }),
  };
}

/** Worker is one user's client of one protocol, in its own folder, and the files it believes exist. */
interface Worker {
  user: string;
  protocol: Protocol;
  /** the folder as the client names it */
  dir: string;
  /** the folder's site path */
  siteDir: string;
  files: Map<string, { size: number; md5: string }>;
  /** names an operation failed on: they may or may not exist */
  uncertain: Set<string>;
}

/**
 * runSoak runs the whole soak and returns its summary; it never throws for what the load finds
 * (that is in `failures`), only for what kept it from running.
 */
export async function runSoak(o: SoakOptions): Promise<SoakSummary> {
  const print = o.print;
  compile(print);
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'svc-soak-'));
  let db: FreshDatabase | null = null;
  let gateway: ServedProcess | null = null;
  try {
    if (o.database) {
      db = await freshDatabase(o.database, 'svc_soak');
      print(`soak: PostgreSQL database ${db.name} (fresh, dropped at the end)`);
    } else print('soak: SQLite');
    // A passive range of its own: 2 per FTP client is plenty; away from the tests' ranges.
    const pasvFirst = 42000 + (process.pid % 60) * 100;
    gateway = await serveProcess(dataDir, {
      SVC_ADMIN_USERNAME: 'admin',
      SVC_ADMIN_PASSWORD: ADMIN_PASSWORD,
      SVC_FTP_PASV_PORTS: `${pasvFirst}-${pasvFirst + 99}`,
      ...(db ? { SVC_DATABASE_URL: db.url } : {}),
    });
    return await load(o, gateway, dataDir);
  } finally {
    if (gateway) await stopProcess(gateway);
    await db?.drop().catch((err: Error) => print(`soak: could not drop ${db?.name}: ${err.message}`));
    rmSync(dataDir, { recursive: true, force: true });
  }
}

async function load(o: SoakOptions, gateway: ServedProcess, dataDir: string): Promise<SoakSummary> {
  const print = o.print;
  const pid = gateway.child.pid!;
  const e: Endpoint = {
    host: '127.0.0.1',
    ports: gateway.ports,
    ca: readFileSync(path.join(dataDir, 'tls', 'cert.pem')),
  };
  const admin = await adminOf(e);

  // Users, each with a user_root made first, full rights on it and one folder per protocol.
  const workers: Worker[] = [];
  for (let u = 1; u <= o.users; u++) {
    const user = `soak${u}`;
    const root = `home/${user}`;
    expectStatus(await admin.call('POST', `/folders/${root}`), [201], 'POST /folders');
    expectStatus(
      await admin.call('POST', '/users', { username: user, password: USER_PASSWORD, user_root: `${root}/` }),
      [201],
      'POST /users',
    );
    expectStatus(
      await admin.call('POST', '/permissions', { path: root, username: user, permission: 'full' }),
      [201],
      'POST /permissions',
    );
    for (const protocol of PROTOCOLS) {
      expectStatus(await admin.call('POST', `/folders/${root}/${protocol}`), [201], 'POST /folders');
      workers.push({
        user,
        protocol,
        dir: protocol === 'rest' ? `${root}/${protocol}` : `/${protocol}`,
        siteDir: `${root}/${protocol}`,
        files: new Map(),
        uncertain: new Set(),
      });
    }
  }
  await sleep(2000);
  const baselineDescriptors = descriptors(pid);
  print(
    `soak: gateway pid ${pid}, ${o.users} users × ${PROTOCOLS.length} protocols, ` +
      `${o.idleConnections} idle connections, uploads 1 KiB–${o.maxMiB} MiB, ${o.minutes} min; ` +
      `baseline ${baselineDescriptors} descriptors, RSS ${rssMiB(pid).toFixed(0)} MiB`,
  );

  let tally = new Tally();
  let operations = 0;
  let errors = 0;
  let movedBytes = 0;
  const errorSamples: string[] = [];
  const failed = (what: string, err: unknown) => {
    tally.errors++;
    errors++;
    const line = `${what}: ${err instanceof Error ? err.message : String(err)}`;
    if (errorSamples.length < 50) errorSamples.push(line);
    if (errorSamples.length <= 10) print(`soak: error ${line}`);
  };
  const timed = async <T>(protocol: string, kind: OperationKind, f: () => Promise<T>): Promise<T> => {
    const t = performance.now();
    const out = await f();
    tally.add(protocol, kind, performance.now() - t);
    operations++;
    return out;
  };

  const deadline = Date.now() + o.minutes * 60_000;
  const running = () => Date.now() < deadline;
  let serial = 0;

  /** work is one client's loop: log in, a few cycles of list/upload/download/rename/delete, log out. */
  const work = async (w: Worker): Promise<void> => {
    const id = `${w.user} ${w.protocol}`;
    const name = (n: string) => `${w.dir}/${n}`;
    while (running()) {
      let client: FileClient | null = null;
      let current = '';
      try {
        client = await timed(w.protocol, 'login', () => connect(e, w.protocol, w.user, USER_PASSWORD));
        for (let cycle = 0; cycle < CYCLES_PER_LOGIN && running(); cycle++) {
          const c: FileClient = client;
          current = '';
          const listed = await timed(w.protocol, 'list', () => c.list(w.dir));
          for (const f of w.files.keys())
            if (!listed.includes(f)) throw new Error(`list of ${w.dir} misses ${f}`);
          await sleep(o.pauseMs);

          const fresh = `f${serial++}-${Math.random().toString(36).slice(2, 8)}.bin`;
          const body = makeBody(logUniform(o.maxMiB * MiB));
          current = fresh;
          await timed(w.protocol, 'upload', () => c.upload(name(fresh), body));
          w.files.set(fresh, { size: body.size, md5: body.md5 });
          tally.bytes += body.size;
          movedBytes += body.size;
          current = '';
          await sleep(o.pauseMs);

          // Download a file it holds (the new one half the time), and check every byte.
          const names = [...w.files.keys()];
          const pick = Math.random() < 0.5 ? fresh : names[Math.floor(Math.random() * names.length)]!;
          const got = await timed(w.protocol, 'download', () => c.download(name(pick)));
          const want = w.files.get(pick)!;
          if (got.size !== want.size || got.md5 !== want.md5)
            throw new Error(
              `download of ${name(pick)}: ${got.size} bytes md5 ${got.md5}, uploaded ${want.size} md5 ${want.md5}`,
            );
          tally.bytes += got.size;
          movedBytes += got.size;
          await sleep(o.pauseMs);

          const moved = `r${serial++}-${pick.replace(/^r\d+-/, '')}`;
          current = pick;
          w.uncertain.add(moved);
          await timed(w.protocol, 'rename', () => c.rename(name(pick), name(moved)));
          w.files.delete(pick);
          w.files.set(moved, want);
          w.uncertain.delete(moved);
          current = '';
          await sleep(o.pauseMs);

          while (w.files.size > FILES_KEPT) {
            const gone = [...w.files.keys()][0]!;
            current = gone;
            await timed(w.protocol, 'delete', () => c.remove(name(gone)));
            w.files.delete(gone);
            current = '';
          }
          await sleep(o.pauseMs);
        }
        const c: FileClient = client;
        client = null;
        await c.close();
      } catch (err) {
        failed(id, err);
        if (current) {
          w.uncertain.add(current);
          w.files.delete(current);
        }
        client?.destroy();
        await sleep(1000);
      }
    }
  };

  /** history is the admin reading each user's folder history in turn. */
  const history = async (): Promise<void> => {
    for (let i = 0; running(); i++) {
      const user = `soak${(i % o.users) + 1}`;
      try {
        await timed('admin', 'history', async () =>
          expectStatus(
            await admin.call('GET', `/history/folders/home/${user}?per_page=100`),
            [200],
            'GET /history/folders',
          ),
        );
      } catch (err) {
        failed('admin history', err);
      }
      await sleep(1000);
    }
  };

  /** idle holds connections open, logged in, with a keep-alive a minute (NOOP, a stat, a PROPFIND). */
  const idle = async (i: number): Promise<void> => {
    const protocol = PROTOCOLS[i % PROTOCOLS.length]!;
    const user = `soak${(i % o.users) + 1}`;
    let client: FileClient | null = null;
    try {
      client = await connect(e, protocol, user, USER_PASSWORD);
      while (running()) {
        await sleep(Math.min(60_000, Math.max(0, deadline - Date.now())));
        if (running()) await client.keepAlive(protocol === 'rest' ? `home/${user}/rest` : `/${protocol}`);
      }
      await client.close();
    } catch (err) {
      failed(`idle ${protocol}`, err);
      client?.destroy();
    }
  };

  // One row a minute.
  const rows: MinuteRow[] = [];
  const started = Date.now();
  const header =
    `| min | RSS MiB | fds | ${PROTOCOLS.join(' | ')} | admin | MiB/s | errors | ` +
    OPERATION_KINDS.map((k) => `p99 ${k} ms`).join(' | ') +
    ' |';
  print('');
  print(header);
  print(
    `|---|${header
      .split('|')
      .slice(2, -1)
      .map(() => '---:')
      .join('|')}|`,
  );
  const row = (minute: number, seconds: number) => {
    const t = tally;
    tally = new Tally();
    const r: MinuteRow = {
      minute,
      rssMiB: rssMiB(pid),
      descriptors: descriptors(pid),
      opsPerSecond: Object.fromEntries([...PROTOCOLS, 'admin'].map((p) => [p, (t.ops[p] ?? 0) / seconds])),
      mibPerSecond: t.bytes / MiB / seconds,
      errors: t.errors,
      p99: Object.fromEntries(OPERATION_KINDS.map((k) => [k, p99(t.latencies[k] ?? [])])),
    };
    rows.push(r);
    print(
      `| ${minute} | ${r.rssMiB.toFixed(0)} | ${r.descriptors} | ` +
        [...PROTOCOLS, 'admin'].map((p) => r.opsPerSecond[p]!.toFixed(1)).join(' | ') +
        ` | ${r.mibPerSecond.toFixed(1)} | ${r.errors} | ` +
        OPERATION_KINDS.map((k) => (r.p99[k] ? r.p99[k].toFixed(0) : '–')).join(' | ') +
        ' |',
    );
  };
  let minute = 0;
  const ticker = setInterval(() => {
    minute++;
    if (Date.now() <= deadline + 1000) row(minute, 60);
  }, 60_000);

  try {
    await Promise.all([
      ...workers.map(work),
      history(),
      ...Array.from({ length: o.idleConnections }, (_, i) => idle(i)),
    ]);
  } finally {
    clearInterval(ticker);
  }
  // The last part-minute, when the run was not a whole number of minutes.
  const rest = (Date.now() - started) / 1000 - minute * 60;
  if (rest >= 5) row(minute + 1, rest);
  if (rows.length === 0) throw new Error('the run ended before its first minute');

  print(`soak: load over, quiet for ${o.idleSeconds} s`);
  await sleep(o.idleSeconds * 1000);
  const idleRssMiB = rssMiB(pid);
  const endDescriptors = descriptors(pid);

  // Every file the clients believe exists, whole, and nothing else in their folders.
  const lost: string[] = [];
  const changed: string[] = [];
  const unexpected: string[] = [];
  let filesVerified = 0;
  let liveBytes = 0;
  for (let u = 1; u <= o.users; u++) {
    const root = `home/soak${u}`;
    const top = JSON.parse(
      expectStatus(await admin.call('GET', `/folders/${root}?per_page=1000`), [200], 'verify list').text,
    ) as { path: string; type: string }[];
    for (const f of top) if (!PROTOCOLS.some((p) => f.path === `${root}/${p}`)) unexpected.push(f.path);
  }
  for (const w of workers) {
    const listed = JSON.parse(
      expectStatus(await admin.call('GET', `/folders/${w.siteDir}?per_page=1000`), [200], 'verify list').text,
    ) as { path: string; type: string; size: number }[];
    const names = new Set(listed.map((f) => f.path.slice(f.path.lastIndexOf('/') + 1)));
    for (const f of listed) {
      const n = f.path.slice(f.path.lastIndexOf('/') + 1);
      if (!w.files.has(n) && !w.uncertain.has(n)) unexpected.push(f.path);
    }
    for (const [n, want] of w.files) {
      const sitePath = `${w.siteDir}/${n}`;
      if (!names.has(n)) {
        lost.push(sitePath);
        continue;
      }
      const info = JSON.parse(
        expectStatus(await admin.call('GET', `/files/${sitePath}`), [200], 'verify GET /files').text,
      ) as { download_uri: string };
      const got = await httpsCall(e.ca, { method: 'GET', url: info.download_uri });
      if (got.status !== 200 || got.size !== want.size || got.md5 !== want.md5) changed.push(sitePath);
      filesVerified++;
      liveBytes += want.size;
    }
  }
  const disk = diskBytes(path.join(dataDir, 'blobs'));

  const firstMinuteRssMiB = rows[0]!.rssMiB;
  const gatewayLogLines = gateway.stderr.filter((l) => /"level":"(warn|error)"/.test(l));
  const failures: string[] = [];
  if (errors > 0) failures.push(`${errors} client errors`);
  if (lost.length) failures.push(`${lost.length} files lost`);
  if (changed.length) failures.push(`${changed.length} files changed`);
  if (unexpected.length) failures.push(`${unexpected.length} files nobody wrote`);
  if (endDescriptors > baselineDescriptors + DESCRIPTOR_SLACK)
    failures.push(`descriptors ${endDescriptors} at the end, baseline ${baselineDescriptors}`);
  if (idleRssMiB > firstMinuteRssMiB + RSS_LIMIT_MIB)
    failures.push(
      `RSS ${idleRssMiB.toFixed(0)} MiB after idle, ${firstMinuteRssMiB.toFixed(0)} MiB in the first minute`,
    );
  if (o.idleSeconds >= DISK_CHECK_QUIET_SECONDS && disk > DISK_LIMIT * liveBytes + DISK_SLACK_MIB * MiB)
    failures.push(
      `${(disk / MiB).toFixed(1)} MiB of blobs for ${(liveBytes / MiB).toFixed(1)} MiB of live files after idle`,
    );
  return {
    rows,
    operations,
    errors,
    errorSamples,
    filesVerified,
    lost,
    changed,
    unexpected,
    baselineDescriptors,
    endDescriptors,
    firstMinuteRssMiB,
    idleRssMiB,
    diskBytes: disk,
    liveBytes,
    movedBytes,
    gatewayLogLines,
    failures,
  };
}

/** describeSummary renders the summary as the lines the command prints. */
export function describeSummary(s: SoakSummary): string[] {
  const mib = (b: number) => (b / MiB).toFixed(1);
  return [
    '',
    `operations ${s.operations}, moved ${(s.movedBytes / 1024 / MiB).toFixed(2)} GiB, errors ${s.errors}`,
    `files verified ${s.filesVerified}, lost ${s.lost.length}, changed ${s.changed.length}, unexpected ${s.unexpected.length}`,
    `descriptors ${s.endDescriptors} at the end, ${s.baselineDescriptors} before the load (slack ${DESCRIPTOR_SLACK})`,
    `RSS ${s.idleRssMiB.toFixed(0)} MiB after idle, ${s.firstMinuteRssMiB.toFixed(0)} MiB in the first loaded minute (limit +${RSS_LIMIT_MIB})`,
    `disk ${mib(s.diskBytes)} MiB of blobs for ${mib(s.liveBytes)} MiB of live files` +
      (s.liveBytes ? ` (${(s.diskBytes / s.liveBytes).toFixed(2)}x)` : ''),
    `gateway warn/error log lines: ${s.gatewayLogLines.length}`,
    ...s.gatewayLogLines.slice(0, 10).map((l) => `  ${l.slice(0, 400)}`),
    ...[...s.lost, ...s.changed, ...s.unexpected].slice(0, 20).map((p) => `  file: ${p}`),
    ...s.errorSamples.slice(0, 20).map((l) => `  error: ${l}`),
    s.failures.length ? `FAILED: ${s.failures.join('; ')}` : 'PASSED',
  ];
}
