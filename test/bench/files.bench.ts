/**
 * Files benchmark: the REST multi-step upload and the signed download of a 1 GiB file, the
 * gateway's RSS while they run, folder listings of 100,000 entries and 1,000 small uploads, against
 * plain references on the same machine: `cp` on the same disk for uploads, nginx serving the same
 * file over HTTPS with the gateway's certificate for downloads. The transfers and the small uploads
 * run against the compiled gateway `npm start` runs (`svc-gateway serve` from dist/, at the
 * durability SVC_DURABILITY names, `fsync` by default); the listings against test/bench/serve.ts,
 * which fills /big with 100,000 rows through the core. SQLite with the local blob store, and again
 * PostgreSQL when SVC_BENCH_DATABASE_URL names a server.
 *
 *   npm run bench:files
 *   SVC_BENCH_FILE_MB=256 npm run bench:files      (a smaller big file, for a quick look)
 *
 * MB/s are 10^6 bytes per second; RSS is VmRSS in MiB. The table is printed and written to
 * test/bench/results-files.md.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createHash, randomFillSync } from 'node:crypto';
import {
  chmodSync,
  closeSync,
  createReadStream,
  fsyncSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readFileSync,
  rmSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { stopProcess } from '../helpers/process.ts';
import {
  apiKey,
  cleanups,
  DURABILITY,
  freshHttpsOnly,
  runCleanups,
  serveCompiled,
  startNginx,
} from './lib.ts';

const MB = 1e6;
const MiB = 1024 * 1024;
const FILE_BYTES = Number(process.env.SVC_BENCH_FILE_MB ?? 1024) * MiB;
const LIST_ENTRIES = 100_000;
const LIST_REPEAT = 20;
const DOWNLOAD_RUNS = 2;
const SMALL_FILES = 1000;
const SMALL_BYTES = 4096;
const SMALL_CONCURRENCY = 8;
const SMALL_RUNS = 2;
const RSS_LIMIT_MIB = 150;
const PG = process.env.SVC_BENCH_DATABASE_URL ?? '';
const API = '/api/rest/v1';

// ---------------------------------------------------------------------------------------------
// Child processes

interface GatewayInfo {
  port: number;
  key: string;
  dataDir: string;
  pid: number;
  populateMs: number;
}

async function startGateway(
  env: NodeJS.ProcessEnv,
  populate: number,
): Promise<{ child: ChildProcess; info: GatewayInfo }> {
  const child = spawn(
    process.execPath,
    [
      '--import',
      'tsx',
      'test/bench/serve.ts',
      'gateway',
      ...(populate ? ['--populate', String(populate)] : []),
    ],
    { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'inherit'] },
  );
  const line = await new Promise<string>((resolve, reject) => {
    createInterface({ input: child.stdout! }).once('line', resolve);
    child.once('exit', (code) => reject(new Error(`gateway exited with ${code}`)));
  });
  return { child, info: JSON.parse(line) as GatewayInfo };
}

async function stopChild(child: ChildProcess, signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((r) => child.once('exit', r));
  child.kill(signal);
  await exited;
}

// ---------------------------------------------------------------------------------------------
// HTTPS client (keep-alive, trusting the gateway's certificate)

interface Reply {
  status: number;
  body: Buffer;
}

function request(
  agent: https.Agent,
  url: string,
  method: string,
  opts: {
    headers?: Record<string, string>;
    body?: Buffer | Readable;
    sink?: (res: Readable) => Promise<void>;
  } = {},
): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = https.request(url, { method, agent, headers: opts.headers ?? {} }, (res) => {
      if (opts.sink && res.statusCode === 200) {
        opts.sink(res).then(() => resolve({ status: 200, body: Buffer.alloc(0) }), reject);
        return;
      }
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks) }));
      res.on('error', reject);
    });
    req.on('error', reject);
    if (opts.body === undefined || Buffer.isBuffer(opts.body)) req.end(opts.body);
    else pipeline(opts.body, req).catch(reject);
  });
}

class Client {
  readonly agent: https.Agent;
  constructor(
    readonly base: string,
    ca: Buffer,
    private readonly key?: string,
  ) {
    this.agent = new https.Agent({ ca, keepAlive: true, maxSockets: 32 });
  }

  /** api calls the REST API with JSON in and out; anything but 200/201 throws. */
  async api<T = unknown>(method: string, urlPath: string, body?: unknown): Promise<T> {
    const payload = body === undefined ? undefined : Buffer.from(JSON.stringify(body));
    const headers: Record<string, string> = { 'X-SvcAPI-Key': this.key!, Accept: 'application/json' };
    if (payload) {
      headers['Content-Type'] = 'application/json';
      headers['Content-Length'] = String(payload.length);
    }
    const r = await request(this.agent, `${this.base}${API}${urlPath}`, method, {
      headers,
      ...(payload ? { body: payload } : {}),
    });
    if (r.status !== 200 && r.status !== 201) {
      throw new Error(`${method} ${urlPath}: ${r.status} ${r.body.toString('utf8').slice(0, 300)}`);
    }
    return JSON.parse(r.body.toString('utf8')) as T;
  }

  /** download streams a URL through md5 into nothing; returns the hex md5 and byte count. */
  async download(url: string): Promise<{ md5: string; bytes: number }> {
    const md5 = createHash('md5');
    let bytes = 0;
    const r = await request(this.agent, url, 'GET', {
      sink: async (res) => {
        for await (const chunk of res) {
          md5.update(chunk as Buffer);
          bytes += (chunk as Buffer).length;
        }
      },
    });
    if (r.status !== 200) throw new Error(`GET ${url}: ${r.status} ${r.body.toString('utf8').slice(0, 300)}`);
    return { md5: md5.digest('hex'), bytes };
  }

  close(): void {
    this.agent.destroy();
  }
}

// ---------------------------------------------------------------------------------------------
// Measurements

/** RssSampler reads VmRSS of a process every 100 ms and keeps the maximum. */
class RssSampler {
  max = 0;
  private readonly timer: NodeJS.Timeout;
  constructor(private readonly pid: number) {
    this.sample();
    this.timer = setInterval(() => this.sample(), 100);
  }
  private sample(): void {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${this.pid}/status`, 'utf8'));
    if (m) this.max = Math.max(this.max, Number(m[1]) / 1024);
  }
  stop(): number {
    clearInterval(this.timer);
    this.sample();
    return this.max;
  }
}

function rssNow(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) / 1024 : 0;
}

const seconds = (t0: number) => (performance.now() - t0) / 1000;
const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};

/** generate writes `bytes` random bytes to `file` (fsynced) and returns their md5. */
function generate(file: string, bytes: number): string {
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

/** UploadObj is the part of SPEC's Upload object the client uses. */
interface UploadObj {
  ref: string;
  upload_uri: string;
  http_method: string;
  partsize: number;
  send: Record<string, string>;
  headers: Record<string, string>;
}

/** FileObj is SPEC's file entry. */
interface FileObj {
  path: string;
  size: number | null;
  md5: string | null;
  download_uri?: string;
}

/** upload runs SPEC's multi-step upload of `file` to `remote`: put, PUT each part, put+ref+part, end. */
async function upload(
  c: Client,
  remote: string,
  file: string,
  size: number,
): Promise<{ entry: FileObj; partSize: number; partsS: number; endS: number }> {
  const t0 = performance.now();
  let u = await c.api<UploadObj>('POST', `/files/${remote}`, { action: 'put' });
  const partSize = u.partsize;
  const parts = Math.max(1, Math.ceil(size / partSize));
  for (let n = 1; n <= parts; n++) {
    if (n > 1) u = await c.api<UploadObj>('POST', `/files/${remote}`, { action: 'put', ref: u.ref, part: n });
    if (u.send.partsize !== 'required-header Content-Length' || u.send.partdata !== 'body') {
      throw new Error(`unexpected send map ${JSON.stringify(u.send)}`);
    }
    const start = (n - 1) * partSize;
    const end = Math.min(size, start + partSize) - 1;
    const headers = { ...u.headers, 'Content-Length': String(end - start + 1) };
    const body = createReadStream(file, { start, end, highWaterMark: 256 * 1024 });
    const r = await request(c.agent, u.upload_uri, u.http_method, { headers, body });
    if (r.status !== 200)
      throw new Error(`PUT part ${n}: ${r.status} ${r.body.toString('utf8').slice(0, 300)}`);
  }
  const partsS = seconds(t0);
  const t1 = performance.now();
  const entry = await c.api<FileObj>('POST', `/files/${remote}`, { action: 'end', ref: u.ref });
  return { entry, partSize, partsS, endS: seconds(t1) };
}

/** ensureNginx finds nginx, installing it with apt-get if missing; returns its path or why not. */
function ensureNginx(): { bin: string } | { why: string } {
  const find = () => {
    for (const bin of ['/usr/sbin/nginx', '/usr/local/sbin/nginx', '/usr/bin/nginx']) {
      if (spawnSync(bin, ['-v']).status === 0) return bin;
    }
    return null;
  };
  let bin = find();
  if (bin) return { bin };
  console.log('nginx not found; trying apt-get install -y nginx');
  const r = spawnSync('apt-get', ['install', '-y', 'nginx'], {
    encoding: 'utf8',
    timeout: 180_000,
    env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
  });
  bin = find();
  if (bin) return { bin };
  return {
    why: `nginx is missing and apt-get install failed: ${(r.error?.message ?? r.stderr ?? '').trim().slice(-300)}`,
  };
}

// ---------------------------------------------------------------------------------------------
// The run

interface Row {
  metric: string;
  value: string;
  peer: string;
  ratio: string;
}
const rows: Row[] = [];
const mbps = (bytes: number, s: number) => bytes / MB / s;
const f0 = (x: number) => x.toFixed(0);
const f1 = (x: number) => x.toFixed(1);
const f2 = (x: number) => x.toFixed(2);
const sizeLabel =
  FILE_BYTES % (1024 * MiB) === 0 ? `${FILE_BYTES / (1024 * MiB)} GiB` : `${FILE_BYTES / MiB} MiB`;

interface Refs {
  cpMBps: number;
  nginxMBps: number | null;
  nginxWhy: string;
}

/** startLogged starts a gateway child and says where it is. */
async function startLogged(db: string, env: NodeJS.ProcessEnv, populate: number) {
  const t0 = performance.now();
  const gw = await startGateway(env, populate);
  cleanups.push(() => stopChild(gw.child));
  console.log(
    `[${db}] gateway pid ${gw.info.pid} on :${gw.info.port}, data dir ${gw.info.dataDir}` +
      (populate ? `; ${populate} rows populated in ${gw.info.populateMs} ms` : '') +
      ` (up in ${f1(seconds(t0))} s)`,
  );
  const ca = readFileSync(path.join(gw.info.dataDir, 'tls', 'cert.pem'));
  return { gw, c: new Client(`https://127.0.0.1:${gw.info.port}`, ca, gw.info.key) };
}

/**
 * startCompiled starts the compiled gateway on a fresh data dir (and a fresh database on the
 * PostgreSQL server `serverUrl`, when given), only its HTTPS listener, with an API key.
 */
async function startCompiled(db: string, serverUrl: string) {
  const t0 = performance.now();
  const { dataDir, env } = await freshHttpsOnly(serverUrl, 'svc-files-bench-');
  const password = 'files-bench-password';
  const gw = await serveCompiled(dataDir, password, env);
  const key = await apiKey(gw.rest, password, 'files bench');
  console.log(
    `[${db}] compiled gateway pid ${gw.pid} on :${gw.ports.https} (durability ${DURABILITY}), ` +
      `data dir ${dataDir} (up in ${f1(seconds(t0))} s)`,
  );
  const ca = readFileSync(path.join(dataDir, 'tls', 'cert.pem'));
  return {
    pid: gw.pid,
    dataDir,
    c: new Client(`https://127.0.0.1:${gw.ports.https}`, ca, key),
    stop: () => stopProcess(gw.served),
  };
}

/** benchTransfers: the big upload and download with RSS, then the small uploads, on a fresh compiled gateway. */
async function benchTransfers(
  db: string,
  serverUrl: string,
  refs: (tlsDir: string) => Promise<Refs>,
  source: { file: string; md5: string },
) {
  const { pid, dataDir, c, stop } = await startCompiled(db, serverUrl);
  try {
    const r = await refs(path.join(dataDir, 'tls'));
    await c.api('POST', '/folders/bench');
    const idle = rssNow(pid);

    // Upload.
    let rss = new RssSampler(pid);
    let t = performance.now();
    const up = await upload(c, 'bench/big.bin', source.file, FILE_BYTES);
    const upS = seconds(t);
    const upRss = rss.stop();
    if (up.entry.size !== FILE_BYTES || up.entry.md5 !== source.md5) {
      throw new Error(
        `uploaded entry is wrong: size ${up.entry.size}, md5 ${up.entry.md5}; want ${FILE_BYTES}, ${source.md5}`,
      );
    }
    const upMBps = mbps(FILE_BYTES, upS);
    console.log(
      `[${db}] upload ${f1(upMBps)} MB/s (${f1(upS)} s: parts ${f1(up.partsS)} s = ${f1(mbps(FILE_BYTES, up.partsS))} MB/s, ` +
        `action=end ${f1(up.endS)} s), max RSS ${f0(upRss)} MiB (idle ${f0(idle)})`,
    );
    rows.push({
      metric: `REST upload ${sizeLabel} (put, PUT ${f0(up.partSize / MiB)} MiB parts, end; md5 checked), MB/s (${db})`,
      value: f0(upMBps),
      peer: `cp same disk + sync: ${f0(r.cpMBps)}`,
      ratio: f2(upMBps / r.cpMBps),
    });
    rows.push({
      metric: `… of which action=end (joins the parts into the file), s (${db})`,
      value: f1(up.endS),
      peer: `parts: ${f1(up.partsS)} s`,
      ratio: f2(up.endS / up.partsS),
    });

    // Download.
    // Best of DOWNLOAD_RUNS, each asking for a fresh download_uri; RSS over all of them.
    rss = new RssSampler(pid);
    let downS = Infinity;
    for (let i = 0; i < DOWNLOAD_RUNS; i++) {
      t = performance.now();
      const { download_uri } = await c.api<FileObj>('GET', '/files/bench/big.bin');
      const got = await c.download(download_uri!);
      downS = Math.min(downS, seconds(t));
      if (got.bytes !== FILE_BYTES || got.md5 !== source.md5) {
        throw new Error(
          `download is wrong: ${got.bytes} bytes, md5 ${got.md5}; want ${FILE_BYTES}, ${source.md5}`,
        );
      }
    }
    const downRss = rss.stop();
    const down = mbps(FILE_BYTES, downS);
    console.log(`[${db}] download ${f1(down)} MB/s (${f1(downS)} s), max RSS ${f0(downRss)} MiB`);
    rows.push({
      metric: `REST download ${sizeLabel} (GET /files → download_uri, md5 checked; best of ${DOWNLOAD_RUNS}), MB/s (${db})`,
      value: f0(down),
      peer: r.nginxMBps === null ? `nginx: skipped (${r.nginxWhy})` : `nginx HTTPS: ${f0(r.nginxMBps)}`,
      ratio: r.nginxMBps === null ? '—' : f2(down / r.nginxMBps),
    });
    rows.push({
      metric: `gateway max RSS during upload, MiB (idle before: ${f0(idle)}) (${db})`,
      value: f0(upRss),
      peer: `limit ${RSS_LIMIT_MIB}`,
      ratio: f2(upRss / RSS_LIMIT_MIB),
    });
    rows.push({
      metric: `gateway max RSS during download, MiB (${db})`,
      value: f0(downRss),
      peer: `limit ${RSS_LIMIT_MIB}`,
      ratio: f2(downRss / RSS_LIMIT_MIB),
    });

    // Small uploads.
    const small = Buffer.alloc(SMALL_BYTES);
    randomFillSync(small);
    const smallMd5 = createHash('md5').update(small).digest('hex');
    // SMALL_RUNS rounds into folders of their own, the best kept (as the protocol benchmarks keep
    // the best of their repetitions): the first round after the 1 GiB transfers also warms the JIT.
    let best: { s: number; phase: { put: number; part: number; end: number } } | null = null;
    for (let round = 0; round < SMALL_RUNS; round++) {
      const folder = `small-${round}`;
      await c.api('POST', `/folders/${folder}`);
      const phase = { put: 0, part: 0, end: 0 };
      const timed = async <T>(k: keyof typeof phase, f: () => Promise<T>): Promise<T> => {
        const t1 = performance.now();
        try {
          return await f();
        } finally {
          phase[k] += performance.now() - t1;
        }
      };
      let next = 0;
      t = performance.now();
      await Promise.all(
        Array.from({ length: SMALL_CONCURRENCY }, async () => {
          while (next < SMALL_FILES) {
            const i = next++;
            const remote = `${folder}/s${String(i).padStart(4, '0')}.bin`;
            const u = await timed('put', () =>
              c.api<UploadObj>('POST', `/files/${remote}`, { action: 'put' }),
            );
            const r2 = await timed('part', () =>
              request(c.agent, u.upload_uri, u.http_method, {
                headers: { ...u.headers, 'Content-Length': String(SMALL_BYTES) },
                body: small,
              }),
            );
            if (r2.status !== 200)
              throw new Error(`PUT ${remote}: ${r2.status} ${r2.body.toString('utf8').slice(0, 300)}`);
            const e = await timed('end', () =>
              c.api<FileObj>('POST', `/files/${remote}`, { action: 'end', ref: u.ref }),
            );
            if (e.size !== SMALL_BYTES || e.md5 !== smallMd5)
              throw new Error(`${remote}: size ${e.size}, md5 ${e.md5}`);
          }
        }),
      );
      const smallS = seconds(t);
      const per = (k: keyof typeof phase) => f1(phase[k] / SMALL_FILES);
      console.log(
        `[${db}] round ${round + 1}: ${SMALL_FILES} small uploads in ${f1(smallS)} s; mean latency put ` +
          `${per('put')} ms, PUT ${per('part')} ms, end ${per('end')} ms`,
      );
      if (!best || smallS < best.s) best = { s: smallS, phase };
    }
    const per = (k: 'put' | 'part' | 'end') => f1(best!.phase[k] / SMALL_FILES);
    rows.push({
      metric:
        `${SMALL_FILES} × 4 KiB REST uploads (put + PUT + end), ${SMALL_CONCURRENCY} concurrent, best of ` +
        `${SMALL_RUNS}, files/s (mean ms: put ${per('put')}, PUT ${per('part')}, end ${per('end')}) (${db})`,
      value: f0(SMALL_FILES / best!.s),
      peer: '—',
      ratio: '—',
    });
  } finally {
    c.close();
    await stop();
  }
}

/** benchListing: folder pages of /big, which the child filled with LIST_ENTRIES rows before listening. */
async function benchListing(db: string, env: NodeJS.ProcessEnv) {
  const { gw, c } = await startLogged(db, env, LIST_ENTRIES);
  try {
    rows.push({
      metric: `populate /big: ${LIST_ENTRIES} file rows, core.db.work batches of 500, ms (${db})`,
      value: f0(gw.info.populateMs),
      peer: '—',
      ratio: '—',
    });
    const lastPage = Math.ceil(LIST_ENTRIES / 1000);
    const sizeDesc = (e: FileObj[]) => e.every((x, i) => i === 0 || (e[i - 1]!.size ?? 0) >= (x.size ?? 0));
    const listings: [string, string, (e: FileObj[]) => boolean, string | null][] = [
      ['page 1', `page=1`, (e) => e[0]?.path === 'big/f0000000.bin', null],
      [
        `page ${lastPage} (last)`,
        `page=${lastPage}`,
        (e) => e[999]?.path === `big/f${String(LIST_ENTRIES - 1).padStart(7, '0')}.bin`,
        'page 1',
      ],
      ['sort_by[size]=desc page 1', `sort_by%5Bsize%5D=desc&page=1`, sizeDesc, null],
      [
        `sort_by[size]=desc page ${lastPage} (last)`,
        `sort_by%5Bsize%5D=desc&page=${lastPage}`,
        sizeDesc,
        'sort_by[size]=desc page 1',
      ],
    ];
    const medians = new Map<string, number>();
    for (const [label, q, check, refLabel] of listings) {
      const url = `/folders/big?per_page=1000&${q}`;
      const warm = await c.api<FileObj[]>('GET', url);
      if (warm.length !== 1000 || !check(warm))
        throw new Error(`GET ${url}: unexpected listing (${warm.length} entries)`);
      const times: number[] = [];
      for (let i = 0; i < LIST_REPEAT; i++) {
        const t1 = performance.now();
        await c.api('GET', url);
        times.push(performance.now() - t1);
      }
      const ms = median(times);
      medians.set(label, ms);
      const ref = refLabel ? medians.get(refLabel)! : 0;
      rows.push({
        metric: `GET /folders/big?per_page=1000 ${label}, median of ${LIST_REPEAT}, ms (${db})`,
        value: f1(ms),
        peer: ref ? `${refLabel}: ${f1(ref)}` : '—',
        ratio: ref ? f2(ms / ref) : '—',
      });
      console.log(`[${db}] list ${label}: median ${f1(ms)} ms`);
    }
  } finally {
    c.close();
    await stopChild(gw.child);
  }
}

const started = performance.now();

try {
  // The big file lives next to the gateway's data dir (both in os.tmpdir(), see test/helpers/gateway.ts).
  const work = mkdtempSync(path.join(os.tmpdir(), 'svc-bench-files-'));
  cleanups.push(() => rmSync(work, { recursive: true, force: true }));
  const www = path.join(work, 'www');
  mkdirSync(www);
  const file = path.join(www, 'big.bin');
  const t = performance.now();
  const md5 = generate(file, FILE_BYTES);
  console.log(`generated ${sizeLabel} of random bytes in ${f1(seconds(t))} s (md5 ${md5}) in ${work}`);

  let refs: Refs | null = null;
  // References need the gateway's certificate, so they run once the first gateway is up.
  const measureRefs = async (tlsDir: string): Promise<Refs> => {
    if (refs) return refs;
    // cp on the same disk, then sync: the bytes are on disk when the clock stops.
    spawnSync('sync');
    const copy = path.join(work, 'copy.bin');
    const t1 = performance.now();
    const cp = spawnSync('cp', [file, copy]);
    spawnSync('sync');
    const cpS = seconds(t1);
    if (cp.status !== 0) throw new Error(`cp failed: ${cp.stderr.toString()}`);
    rmSync(copy);
    const cpMBps = mbps(FILE_BYTES, cpS);
    console.log(`cp ${f1(cpMBps)} MB/s (${f1(cpS)} s)`);
    rows.push({
      metric: `cp ${sizeLabel} on the same disk + sync, MB/s`,
      value: f0(cpMBps),
      peer: '—',
      ratio: '—',
    });

    let nginxMBps: number | null = null;
    let nginxWhy = '';
    const found = ensureNginx();
    if ('why' in found) {
      nginxWhy = found.why;
      console.log(`nginx row skipped: ${nginxWhy}`);
    } else {
      // nginx's workers may run as nobody: they must be able to read the served file.
      chmodSync(work, 0o755);
      chmodSync(www, 0o755);
      chmodSync(file, 0o644);
      const nginxDir = path.join(work, 'nginx');
      mkdirSync(nginxDir);
      let nginx: { child: ChildProcess; port: number } | null = null;
      try {
        nginx = await startNginx(found.bin, nginxDir, www, tlsDir, false);
        const ngx = nginx;
        cleanups.push(() => stopChild(ngx.child));
        const peer = new Client(
          `https://127.0.0.1:${nginx.port}`,
          readFileSync(path.join(tlsDir, 'cert.pem')),
        );
        // Best of DOWNLOAD_RUNS (the first also warms TLS and the page cache), as for the gateway.
        let s = Infinity;
        for (let i = 0; i < DOWNLOAD_RUNS; i++) {
          const t2 = performance.now();
          const got = await peer.download(`${peer.base}/big.bin`);
          s = Math.min(s, seconds(t2));
          if (got.bytes !== FILE_BYTES || got.md5 !== md5)
            throw new Error(`nginx served ${got.bytes} bytes, md5 ${got.md5}`);
        }
        peer.close();
        nginxMBps = mbps(FILE_BYTES, s);
        console.log(`nginx HTTPS download ${f1(nginxMBps)} MB/s (${f1(s)} s)`);
        rows.push({
          metric: `peer: nginx ${found.bin} HTTPS download ${sizeLabel}, md5 checked, best of ${DOWNLOAD_RUNS}, MB/s`,
          value: f0(nginxMBps),
          peer: '—',
          ratio: '—',
        });
      } catch (err) {
        nginxWhy = `nginx failed: ${(err as Error).message}`;
        console.log(`nginx row skipped: ${nginxWhy}`);
      } finally {
        if (nginx) await stopChild(nginx.child);
      }
    }
    refs = { cpMBps, nginxMBps, nginxWhy };
    return refs;
  };

  const dbs: [string, string][] = [['SQLite', '']];
  if (PG) dbs.push(['PostgreSQL', PG]);
  for (const [db, serverUrl] of dbs) {
    await benchTransfers(db, serverUrl, measureRefs, { file, md5 });
    await benchListing(db, { SVC_TEST_DATABASE_URL: serverUrl });
  }
} finally {
  await runCleanups();
}

const header = [
  `Files benchmark, ${new Date().toISOString()}, ${process.version}, ${os.cpus().length} cores, ` +
    `${os.cpus()[0]?.model ?? ''}; total ${f0(seconds(started))} s`,
  `MB/s = 10^6 bytes/s; RSS = /proc/<pid>/status VmRSS sampled every 100 ms, MiB. Gateway in its own process: ` +
    `transfers and small uploads the compiled build (\`svc-gateway serve\`, durability ${DURABILITY}), listings ` +
    `test/bench/serve.ts; local blob store; client in this process (md5 of every byte on both sides).`,
  '',
  '| metric | value | peer/limit | ratio |',
  '|---|---:|---|---:|',
  ...rows.map((r) => `| ${r.metric} | ${r.value} | ${r.peer} | ${r.ratio} |`),
].join('\n');
console.log(`\n${header}\n`);
writeFileSync(path.join('test', 'bench', 'results-files.md'), `${header}\n`);
