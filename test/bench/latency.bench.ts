/**
 * Latency benchmark (issue 13, "hashing off the event loop"): how long a second session waits for
 * an answer while a 1 GiB upload streams into the same gateway. The gateway runs compiled
 * (`svc-gateway serve` from dist/, SQLite, local blobs); a curl PUT over WebDAV sends the file, and
 * meanwhile a second client asks for a REST folder listing over and over on one keep-alive
 * connection (a database read, a permission check and JSON out: every front end's event loop
 * path). The same requests are timed first with nothing else running. The gateway's own view,
 * `nodejs_eventloop_lag_*` from /metrics (prom-client's monitorEventLoopDelay, reset per scrape),
 * is read after each phase.
 *
 *   npm run bench:latency
 *   SVC_BENCH_FILE_MB=256 npm run bench:latency
 *
 * Writes test/bench/results-latency.md.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import { serveProcess, stopProcess } from '../helpers/process.ts';
import { cleanups, f1, generate, runCleanups, table, type Row } from './lib.ts';

const MiB = 1024 * 1024;
const FILE_MB = Number(process.env.SVC_BENCH_FILE_MB ?? 1024);
const PASSWORD = 'bench-password-1';
const IDLE_MS = 5000;

const quantile = (sorted: number[], q: number) =>
  sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;

/** Timings are the second session's response times, in ms, sorted. */
function summary(ms: number[]): { n: number; p50: number; p99: number; max: number } {
  const sorted = [...ms].sort((a, b) => a - b);
  return { n: sorted.length, p50: quantile(sorted, 0.5), p99: quantile(sorted, 0.99), max: sorted.at(-1)! };
}

const started = performance.now();
const rows: Row[] = [];
try {
  const work = mkdtempSync(path.join(os.tmpdir(), 'svc-bench-latency-'));
  cleanups.push(() => rmSync(work, { recursive: true, force: true }));
  const big = path.join(work, 'big.bin');
  generate(big, FILE_MB * MiB);
  const dataDir = path.join(work, 'data');
  const gw = await serveProcess(dataDir, {
    SVC_ADMIN_PASSWORD: PASSWORD,
    SVC_FTP_PORT: 'off',
    SVC_FTPS_PORT: 'off',
    SVC_SFTP_PORT: 'off',
  });
  cleanups.push(async () => void (await stopProcess(gw)));
  const ca = readFileSync(path.join(dataDir, 'tls', 'cert.pem'));
  const agent = new https.Agent({ keepAlive: true, maxSockets: 1, ca });
  const headers: Record<string, string> = {};

  const call = (
    method: string,
    port: number,
    urlPath: string,
    json?: unknown,
  ): Promise<{ status: number; body: string }> =>
    new Promise((resolve, reject) => {
      const req = https.request(
        {
          host: '127.0.0.1',
          port,
          method,
          path: urlPath,
          agent,
          servername: 'localhost',
          headers: json === undefined ? headers : { ...headers, 'Content-Type': 'application/json' },
        },
        (res) => {
          let body = '';
          res.setEncoding('utf8');
          res.on('data', (c: string) => (body += c));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
        },
      );
      req.on('error', reject);
      req.end(json === undefined ? undefined : JSON.stringify(json));
    });
  const https_ = gw.ports.https!;
  const login = await call('POST', https_, '/api/rest/v1/sessions', {
    username: 'admin',
    password: PASSWORD,
  });
  headers['X-SvcAPI-Auth'] = (JSON.parse(login.body) as { id: string }).id;
  await call('POST', https_, '/api/rest/v1/folders/inbox');
  for (let i = 0; i < 50; i++) await call('POST', https_, `/api/rest/v1/folders/inbox/d${i}`);

  /** sample times the listing over and over until `until` resolves (or for `ms`). */
  const sample = async (until: Promise<unknown>): Promise<number[]> => {
    let done = false;
    void until.finally(() => (done = true));
    const times: number[] = [];
    while (!done) {
      const t = performance.now();
      const r = await call('GET', https_, '/api/rest/v1/folders/inbox?per_page=50');
      if (r.status !== 200) throw new Error(`listing answered ${r.status}: ${r.body}`);
      times.push(performance.now() - t);
    }
    return times;
  };
  const lag = async () => {
    const text = (await call('GET', https_, '/metrics')).body;
    const get = (name: string) =>
      Number(new RegExp(`^${name} ([0-9.e+-]+)$`, 'm').exec(text)?.[1] ?? NaN) * 1000;
    return { p99: get('nodejs_eventloop_lag_p99_seconds'), max: get('nodejs_eventloop_lag_max_seconds') };
  };

  await sample(new Promise((r) => setTimeout(r, 1000))); // warm
  await lag();
  const idle = summary(await sample(new Promise((r) => setTimeout(r, IDLE_MS))));
  const idleLag = await lag();

  const putStarted = performance.now();
  const put = new Promise<void>((resolve, reject) => {
    const c = spawn(
      'curl',
      [
        '-sS',
        '--http1.1',
        '--cacert',
        path.join(dataDir, 'tls', 'cert.pem'),
        '-u',
        `admin:${PASSWORD}`,
        '-T',
        big,
        '-o',
        '/dev/null',
        '-w',
        '%{http_code}',
        `https://localhost:${gw.ports.webdav}/inbox/big.bin`,
      ],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    let code = '';
    c.stdout.on('data', (d: Buffer) => (code += d.toString()));
    c.on('exit', (status) =>
      status === 0 && code === '201' ? resolve() : reject(new Error(`curl ${status} ${code}`)),
    );
  });
  const busy = summary(await sample(put));
  await put;
  const putSeconds = (performance.now() - putStarted) / 1000;
  const busyLag = await lag();

  const row = (metric: string, value: number, peer: string, base: number) =>
    rows.push({ metric, value: f1(value), peer, ratio: base > 0 ? `${(value / base).toFixed(2)}×` : '' });
  row(
    'second session: REST listing, median ms (peer column: idle)',
    busy.p50,
    `idle: ${f1(idle.p50)}`,
    idle.p50,
  );
  row('… 99th percentile, ms', busy.p99, `idle: ${f1(idle.p99)}`, idle.p99);
  row('… slowest, ms', busy.max, `idle: ${f1(idle.max)}`, idle.max);
  rows.push({
    metric: '… requests answered during the upload / in 5 s idle',
    value: String(busy.n),
    peer: `idle: ${idle.n}`,
    ratio: '',
  });
  row('gateway event-loop delay, p99 ms (/metrics)', busyLag.p99, `idle: ${f1(idleLag.p99)}`, idleLag.p99);
  row('gateway event-loop delay, max ms (/metrics)', busyLag.max, `idle: ${f1(idleLag.max)}`, idleLag.max);
  rows.push({
    metric: `the upload: ${FILE_MB} MiB WebDAV PUT with curl, MB/s`,
    value: f1((FILE_MB * MiB) / 1e6 / putSeconds),
    peer: '',
    ratio: '',
  });
  const text = table(
    'Latency benchmark',
    [
      `Compiled gateway (svc-gateway serve, SQLite, local blobs, durability ${process.env.SVC_DURABILITY ?? 'fsync'}); ` +
        `a second client lists a 50-entry folder over REST (one keep-alive connection, one request at a time) ` +
        `while curl PUTs ${FILE_MB} MiB over WebDAV. md5 and crc32 are computed in a worker thread (src/core/files/checksum.ts).`,
    ],
    rows,
    started,
  );
  console.log(text);
  writeFileSync(path.join('test', 'bench', 'results-latency.md'), `${text}\n`);
} finally {
  await runCleanups();
}
