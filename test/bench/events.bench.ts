/**
 * Events benchmark (issue 7): webhook delivery throughput, the cost of webhooks to the uploads
 * that trigger them, and building an export of 100,000 delivery records. Every server runs in its
 * own process (test/bench/events-serve.ts): a webhook receiver answering 204, and gateways on a
 * fresh database each (SQLite, or PostgreSQL when SVC_TEST_DATABASE_URL names a server).
 *
 *   npm run bench:events
 *   SVC_TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/test npm run bench:events
 *
 * 1. Throughput: 10,000 `create` Actions are queued through the core's recordAction (as uploads
 *    queue them) before the gateway's loops start; the receiver times the first to the last
 *    delivery. Peer: this process POSTing 10,000 bodies of the same size with node:http, 32 at a
 *    time (the gateway's batch), to the same receiver: the ceiling of Node's HTTP client and the
 *    receiver, without a queue or a delivery log.
 * 2. Upload latency: 4 KiB WebDAV PUTs, one at a time, to a gateway with a webhook and to one
 *    without, interleaved one by one; mean, median and p99 per upload, and how long after each
 *    round's last upload its delivery arrived.
 * 3. Export: 100,000 delivery records, one export of all of them: time to `ready`, CSV size and
 *    the gateway's RSS growth while it builds. Peer: the database's own CSV dump of the same
 *    columns (sqlite3 -csv, or psql \copy).
 *
 * The table is printed and written to test/bench/results-events.md (results-events-postgres.md).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import {
  API,
  cleanups,
  f0,
  f1,
  f2,
  must,
  runCleanups,
  RssSampler,
  seconds,
  stopChild,
  table,
  type Row,
} from './lib.ts';

const BACKLOG = 10_000;
const PEER_CONCURRENCY = 32;
const UPLOADS = 500;
const ROUNDS = 4;
const RECORDS = 100_000;
const UPLOAD_BYTES = 4096;
const pg = Boolean(process.env.SVC_TEST_DATABASE_URL);

interface Info {
  port: number;
  webdav: number;
  key: string;
  dataDir: string;
  pid: number;
  databaseUrl: string;
  backlogMs?: number;
}

/** child starts events-serve.ts with `args` and reads its JSON line. */
async function child<T>(args: string[]): Promise<{ proc: ChildProcess; info: T }> {
  const proc = spawn(process.execPath, ['--import', 'tsx', 'test/bench/events-serve.ts', ...args], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  cleanups.push(() => stopChild(proc));
  const line = await new Promise<string>((resolve, reject) => {
    createInterface({ input: proc.stdout! }).once('line', resolve);
    proc.once('exit', (code) => reject(new Error(`events-serve ${args[0]} exited with ${code}`)));
  });
  return { proc, info: JSON.parse(line) as T };
}

interface Stats {
  count: number;
  first: number;
  last: number;
}

async function stats(receiver: string): Promise<Stats> {
  return (await (await fetch(`${receiver}/stats`)).json()) as Stats;
}

async function waitForCount(receiver: string, n: number, ms: number): Promise<Stats> {
  const until = Date.now() + ms;
  for (;;) {
    const s = await stats(receiver);
    if (s.count >= n) return s;
    if (Date.now() > until) throw new Error(`the receiver got ${s.count} of ${n} deliveries in ${ms} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** sql runs one query on a gateway's database with the database's own client. */
async function sql(gw: Info, query: string): Promise<string> {
  const argv = gw.databaseUrl
    ? ['psql', '-At', gw.databaseUrl, '-c', query]
    : ['sqlite3', path.join(gw.dataDir, 'gateway.sqlite'), query];
  return (await must(argv)).stdout.trim();
}

/** request sends one HTTPS request to a gateway and resolves with its status and body. */
function request(
  agent: https.Agent,
  port: number,
  method: string,
  urlPath: string,
  headers: Record<string, string>,
  body?: Buffer,
): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = https.request(
      { host: '127.0.0.1', port, method, path: urlPath, agent, servername: 'localhost', headers },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }),
        );
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

function agentFor(gw: Info): https.Agent {
  return new https.Agent({ ca: readFileSync(`${gw.dataDir}/tls/cert.pem`), keepAlive: true, maxSockets: 1 });
}

const quantile = (xs: number[], q: number) => [...xs].sort((a, b) => a - b)[Math.ceil(q * xs.length) - 1]!;
const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;

/** Uploader PUTs 4 KiB files over WebDAV to one gateway, one at a time, and times each. */
class Uploader {
  readonly ms: number[] = [];
  private readonly agent: https.Agent;
  private readonly auth: string;
  private readonly body = Buffer.alloc(UPLOAD_BYTES, 7);

  constructor(private readonly gw: Info) {
    this.agent = agentFor(gw);
    this.auth = `Basic ${Buffer.from(`${gw.key}:x`).toString('base64')}`;
  }

  async mkcol(folder: string): Promise<void> {
    const r = await request(this.agent, this.gw.webdav, 'MKCOL', folder, { Authorization: this.auth });
    if (r.status !== 201) throw new Error(`MKCOL ${folder}: ${r.status} ${r.text}`);
  }

  async put(file: string): Promise<void> {
    const t = performance.now();
    const r = await request(
      this.agent,
      this.gw.webdav,
      'PUT',
      file,
      { Authorization: this.auth, 'Content-Length': String(this.body.length) },
      this.body,
    );
    this.ms.push(performance.now() - t);
    if (r.status !== 201) throw new Error(`PUT ${file}: ${r.status} ${r.text}`);
  }

  close(): void {
    this.agent.destroy();
  }
}

async function throughput(receiver: string, rows: Row[]): Promise<void> {
  await fetch(`${receiver}/reset`, { method: 'POST' });
  const { proc, info } = await child<Info>([
    'gateway',
    '--webhook',
    `${receiver}/hook`,
    '--backlog',
    String(BACKLOG),
  ]);
  const s = await waitForCount(receiver, BACKLOG, 600_000);
  const gatewayRate = BACKLOG / ((s.last - s.first) / 1000);
  const succeeded = Number(
    await sql(info, "SELECT COUNT(*) FROM webhook_deliveries WHERE status = 'succeeded'"),
  );
  const attempts = Number(await sql(info, 'SELECT COUNT(*) FROM webhook_attempts'));
  await stopChild(proc);
  if (s.count !== BACKLOG) throw new Error(`the receiver got ${s.count} deliveries for ${BACKLOG} Actions`);

  // The peer: the same bodies, posted straight from here.
  await fetch(`${receiver}/reset`, { method: 'POST' });
  const body = JSON.stringify({
    id: 1,
    action: 'create',
    interface: 'restapi',
    path: 'in/f1234.bin',
    destination: '',
    source: '',
    display: '',
    ip: '',
    targets: [],
    user_id: null,
    username: '',
    user: '',
    failure_type: '',
    when: new Date().toISOString(),
    size: 4096,
  });
  // The same client the gateway uses: node:http, keep-alive, 32 connections.
  const agent = new http.Agent({ keepAlive: true, maxSockets: PEER_CONCURRENCY });
  const post = () =>
    new Promise<void>((resolve, reject) => {
      const req = http.request(
        `${receiver}/hook`,
        {
          method: 'POST',
          agent,
          headers: { 'Content-Type': 'application/json', 'Content-Length': String(Buffer.byteLength(body)) },
        },
        (res) => {
          res.resume();
          res.on('end', resolve);
        },
      );
      req.on('error', reject);
      req.end(body);
    });
  let next = 0;
  await Promise.all(
    Array.from({ length: PEER_CONCURRENCY }, async () => {
      while (next < BACKLOG) {
        next++;
        await post();
      }
    }),
  );
  agent.destroy();
  const p = await stats(receiver);
  const peerRate = p.count / ((p.last - p.first) / 1000);
  rows.push(
    {
      metric: `deliveries/s, ${BACKLOG.toLocaleString('en')} queued Actions`,
      value: f0(gatewayRate),
      peer: `node:http, ${PEER_CONCURRENCY} at once: ${f0(peerRate)}`,
      ratio: f2(gatewayRate / peerRate),
    },
    {
      metric: 'queueing the 10,000 Actions (recordAction + delivery rows), Actions/s',
      value: f0(BACKLOG / (info.backlogMs! / 1000)),
      peer: '',
      ratio: '',
    },
    {
      metric: 'deliveries recorded succeeded / attempt rows',
      value: `${succeeded} / ${attempts}`,
      peer: `${BACKLOG} / ${BACKLOG}`,
      ratio: f2(succeeded / BACKLOG),
    },
  );
}

async function uploads(receiver: string, rows: Row[]): Promise<void> {
  await fetch(`${receiver}/reset`, { method: 'POST' });
  const on = await child<Info>(['gateway', '--webhook', `${receiver}/hook`]);
  const off = await child<Info>(['gateway']);
  const up = { on: new Uploader(on.info), off: new Uploader(off.info) };
  const lags: number[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    await up.on.mkcol(`/r${round}`);
    await up.off.mkcol(`/r${round}`);
    const before = (await stats(receiver)).count;
    // Interleaved one by one, alternating which goes first, so both see the same machine: the
    // noise of a shared 2-core machine moves both, not the ratio.
    for (let i = 0; i < UPLOADS; i++) {
      const order = i % 2 ? [up.on, up.off] : [up.off, up.on];
      for (const u of order) await u.put(`/r${round}/f${i}.bin`);
    }
    const done = Date.now();
    // One delivery per PUT, plus the MKCOL's create.
    const s = await waitForCount(receiver, before + UPLOADS + 1, 120_000);
    lags.push(Math.max(0, s.last - done));
  }
  up.on.close();
  up.off.close();
  await stopChild(on.proc);
  await stopChild(off.proc);
  const bOn = up.on.ms;
  const bOff = up.off.ms;
  rows.push(
    {
      metric: `4 KiB WebDAV PUT with a webhook, mean ms (${ROUNDS} × ${UPLOADS}, one at a time)`,
      value: f2(mean(bOn)),
      peer: `no webhook: ${f2(mean(bOff))}`,
      ratio: f2(mean(bOn) / mean(bOff)),
    },
    {
      metric: '4 KiB WebDAV PUT with a webhook, median ms',
      value: f2(quantile(bOn, 0.5)),
      peer: `no webhook: ${f2(quantile(bOff, 0.5))}`,
      ratio: f2(quantile(bOn, 0.5) / quantile(bOff, 0.5)),
    },
    {
      metric: '4 KiB WebDAV PUT with a webhook, p99 ms',
      value: f2(quantile(bOn, 0.99)),
      peer: `no webhook: ${f2(quantile(bOff, 0.99))}`,
      ratio: f2(quantile(bOn, 0.99) / quantile(bOff, 0.99)),
    },
    {
      metric: 'last delivery after the last upload, ms (each round)',
      value: lags.map(f0).join(' / '),
      peer: '',
      ratio: '',
    },
  );
}

async function exportRecords(rows: Row[], dir: string): Promise<void> {
  const { proc, info } = await child<Info>(['gateway', '--records', String(RECORDS)]);
  const agent = new https.Agent({ ca: readFileSync(`${info.dataDir}/tls/cert.pem`), keepAlive: true });
  const headers = {
    'X-SvcAPI-Key': info.key,
    'Content-Type': 'application/json',
    Accept: 'application/json',
  };
  const rss = new RssSampler(info.pid);
  await new Promise((r) => setTimeout(r, 1000));
  const idle = rss.idle;
  rss.start();
  const t0 = performance.now();
  const created = await request(
    agent,
    info.port,
    'POST',
    `${API}/action_notification_exports`,
    headers,
    Buffer.from('{}'),
  );
  if (created.status !== 201) throw new Error(`POST export: ${created.status} ${created.text}`);
  const id = (JSON.parse(created.text) as { id: number }).id;
  let done: { status: string; results_url: string };
  for (;;) {
    const r = await request(agent, info.port, 'GET', `${API}/action_notification_exports/${id}`, headers);
    done = JSON.parse(r.text) as typeof done;
    if (done.status !== 'building') break;
    await new Promise((res) => setTimeout(res, 20));
  }
  const readyS = seconds(t0);
  rss.pause();
  if (done.status !== 'ready') throw new Error(`export ${id} ended ${done.status}`);
  const csvFile = path.join(dir, 'export.csv');
  const t1 = performance.now();
  await must(['curl', '-sf', '--cacert', `${info.dataDir}/tls/cert.pem`, '-o', csvFile, done.results_url]);
  const downloadS = seconds(t1);
  const csvBytes = statSync(csvFile).size;
  const lines = readFileSync(csvFile, 'utf8').split('\n').filter(Boolean).length - 1;
  if (lines !== RECORDS) throw new Error(`the CSV holds ${lines} records, not ${RECORDS}`);

  // The peer: the database's own CSV dump of the same columns.
  const cols =
    'id, created_at, status, message, success, request_headers, request_method, request_url, path, folder';
  const peerFile = path.join(dir, 'peer.csv');
  const t2 = performance.now();
  if (info.databaseUrl)
    await must([
      'psql',
      info.databaseUrl,
      '-c',
      `\\copy (SELECT ${cols} FROM webhook_attempts ORDER BY id) TO '${peerFile}' CSV HEADER`,
    ]);
  else
    await must([
      'sqlite3',
      '-csv',
      '-header',
      path.join(info.dataDir, 'gateway.sqlite'),
      `.output ${peerFile}`,
      `SELECT ${cols} FROM webhook_attempts ORDER BY id`,
    ]);
  const peerS = seconds(t2);
  const peerBytes = statSync(peerFile).size;
  agent.destroy();
  await stopChild(proc);
  rows.push(
    {
      metric: `export of ${RECORDS.toLocaleString('en')} delivery records: POST to ready, s`,
      value: f2(readyS),
      peer: `${pg ? 'psql \\copy' : 'sqlite3 -csv'}: ${f2(peerS)}`,
      ratio: f2(readyS / peerS),
    },
    {
      metric: 'export CSV size, MB',
      value: f1(csvBytes / 1e6),
      peer: `${f1(peerBytes / 1e6)}`,
      ratio: f2(csvBytes / peerBytes),
    },
    { metric: 'CSV download through results_url, s', value: f2(downloadS), peer: '', ratio: '' },
    {
      metric: 'gateway RSS while building: idle → peak, MiB',
      value: `${f0(idle)} → ${f0(rss.max)}`,
      peer: '',
      ratio: '',
    },
  );
}

async function main(): Promise<void> {
  const started = performance.now();
  const dir = mkdtempSync(path.join(os.tmpdir(), 'svc-bench-events-'));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  const receiver = await child<{ port: number }>(['receiver']);
  const url = `http://127.0.0.1:${receiver.info.port}`;
  const rows: Row[] = [];
  // SVC_BENCH_ONLY=throughput|uploads|export runs one part (a quicker look while working on it).
  const only = process.env.SVC_BENCH_ONLY;
  if (!only || only === 'throughput') await throughput(url, rows);
  if (!only || only === 'uploads') await uploads(url, rows);
  if (!only || only === 'export') await exportRecords(rows, dir);
  const out = table(
    `Events benchmark (${pg ? 'PostgreSQL' : 'SQLite'}, local store)`,
    [
      'Webhook receiver: a plain node:http server in its own process answering 204.',
      'Uploads: WebDAV PUT over HTTPS keep-alive, one at a time; the gateway fsyncs each file.',
    ],
    rows,
    started,
  );
  console.log(out);
  if (!only) writeFileSync(`test/bench/results-events${pg ? '-postgres' : ''}.md`, `${out}\n`);
}

try {
  await main();
} finally {
  await runCleanups();
}
