/**
 * REST benchmark (issue: requests/s and p99 of key-authenticated GET /api_key and GET /users with
 * 100 users, 50 connections, on SQLite and PostgreSQL). Each server runs in its own process; the
 * peer, bare Koa over the same TLS, runs in the same session so results are read as a ratio.
 *
 *   npm run bench:rest                    (PostgreSQL at SVC_BENCH_DATABASE_URL or 127.0.0.1:5432/test)
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import autocannon from 'autocannon';

const DURATION = Number(process.env.SVC_BENCH_SECONDS ?? 10);
const CONNECTIONS = 50;
const PG = process.env.SVC_BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

interface Started {
  child: ChildProcess;
  info: { port: number; key?: string; dataDir?: string };
}

async function start(args: string[], env: NodeJS.ProcessEnv): Promise<Started> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'test/bench/serve.ts', ...args], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const line = await new Promise<string>((resolve, reject) => {
    createInterface({ input: child.stdout! }).once('line', resolve);
    child.once('exit', (code) => reject(new Error(`server exited with ${code}`)));
  });
  return { child, info: JSON.parse(line) as Started['info'] };
}

async function stop(s: Started): Promise<void> {
  s.child.kill('SIGTERM');
  await new Promise((r) => s.child.once('exit', r));
}

interface Row {
  scenario: string;
  rps: number;
  p99: number;
  errors: number;
}

async function load(
  scenario: string,
  port: number,
  path: string,
  headers: Record<string, string>,
): Promise<Row> {
  // Warm-up: TLS handshakes, JIT, caches.
  await autocannon({
    url: `https://127.0.0.1:${port}${path}`,
    connections: CONNECTIONS,
    duration: 2,
    headers,
  });
  const r = await autocannon({
    url: `https://127.0.0.1:${port}${path}`,
    connections: CONNECTIONS,
    duration: DURATION,
    headers,
  });
  const errors = r.errors + r.timeouts + r.non2xx;
  return { scenario, rps: Math.round(r.requests.average), p99: r.latency.p99, errors };
}

const rows: Row[] = [];
for (const [db, env] of [
  ['SQLite', { SVC_TEST_DATABASE_URL: '' }],
  ['PostgreSQL', { SVC_TEST_DATABASE_URL: PG }],
] as const) {
  const gw = await start(['gateway'], env);
  const auth = { 'X-SvcAPI-Key': gw.info.key! };
  rows.push(await load(`GET /api_key (${db})`, gw.info.port, '/api/rest/v1/api_key', auth));
  rows.push(await load(`GET /users, 100 users (${db})`, gw.info.port, '/api/rest/v1/users', auth));
  if (db === 'SQLite') {
    const peer = await start(['peer', gw.info.dataDir!], {});
    rows.push(await load('peer: bare Koa + TLS, constant JSON', peer.info.port, '/', {}));
    await stop(peer);
  }
  await stop(gw);
}

const peer = rows.find((r) => r.scenario.startsWith('peer'))!;
console.log(`\n${CONNECTIONS} connections, ${DURATION} s each, HTTPS keep-alive, ${process.version}\n`);
console.log('| scenario | requests/s | p99 ms | vs peer | errors |');
console.log('|---|---:|---:|---:|---:|');
for (const r of rows) {
  console.log(`| ${r.scenario} | ${r.rps} | ${r.p99} | ${(r.rps / peer.rps).toFixed(2)} | ${r.errors} |`);
}
