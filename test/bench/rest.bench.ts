/**
 * REST benchmark (issue: requests/s and p99 of key-authenticated GET /api_key and GET /users with
 * 100 users, 50 connections, on SQLite and PostgreSQL). The gateway is the compiled build `npm
 * start` runs (`svc-gateway serve` from dist/, access lines logged as in production), on a fresh
 * data dir and database, with a site-wide key made by `svc-gateway api-keys create --site-wide`;
 * the peer, bare Koa over the same TLS (test/bench/serve.ts peer), runs in the same session so
 * results are read as a ratio.
 *
 *   npm run bench:rest                    (PostgreSQL at SVC_BENCH_DATABASE_URL or 127.0.0.1:5432/test)
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import autocannon from 'autocannon';
import { stopProcess } from '../helpers/process.ts';
import { api, freshHttpsOnly, runCleanups, serveCompiled } from './lib.ts';

const DURATION = Number(process.env.SVC_BENCH_SECONDS ?? 10);
const CONNECTIONS = 50;
const USERS = 100;
const PG = process.env.SVC_BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const PASSWORD = 'rest-bench-password';

interface Started {
  child: ChildProcess;
  info: { port: number; key?: string; dataDir?: string };
}

/** start starts test/bench/serve.ts (the peer) and reads the line it prints. */
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

/**
 * startCompiled starts the compiled gateway (HTTPS only) on a fresh data dir, and a fresh database
 * on the PostgreSQL server `serverUrl` when given; makes USERS users and a site-wide key.
 */
async function startCompiled(serverUrl: string) {
  const { dataDir, env } = await freshHttpsOnly(serverUrl, 'svc-rest-bench-');
  const gw = await serveCompiled(dataDir, PASSWORD, env);
  let next = 0;
  await Promise.all(
    Array.from({ length: 4 }, async () => {
      for (let i = next++; i < USERS; i = next++)
        await api(gw.rest, 'POST', '/users', {
          username: `bench${i}`,
          password: 'bench-password',
          email: `bench${i}@example.com`,
        });
    }),
  );
  const made = spawnSync(
    process.execPath,
    ['bin/svc-gateway.js', 'api-keys', 'create', '--site-wide', '--name', 'rest bench'],
    { env: { ...process.env, SVC_DATA_DIR: dataDir, ...env }, encoding: 'utf8' },
  );
  const key = made.stdout.trim().split('\n').pop() ?? '';
  if (made.status !== 0 || !key) throw new Error(`api-keys create failed: ${made.stderr}`);
  return { port: gw.ports.https!, dataDir, key, stop: () => stopProcess(gw.served) };
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
try {
  for (const [db, serverUrl] of [
    ['SQLite', ''],
    ['PostgreSQL', PG],
  ] as const) {
    const gw = await startCompiled(serverUrl);
    const auth = { 'X-SvcAPI-Key': gw.key };
    rows.push(await load(`GET /api_key (${db})`, gw.port, '/api/rest/v1/api_key', auth));
    rows.push(await load(`GET /users, ${USERS} users (${db})`, gw.port, '/api/rest/v1/users', auth));
    if (db === 'SQLite') {
      const peer = await start(['peer', gw.dataDir], {});
      rows.push(await load('peer: bare Koa + TLS, constant JSON', peer.info.port, '/', {}));
      await stop(peer);
    }
    await gw.stop();
  }
} finally {
  await runCleanups();
}

const peer = rows.find((r) => r.scenario.startsWith('peer'))!;
console.log(`\n${CONNECTIONS} connections, ${DURATION} s each, HTTPS keep-alive, ${process.version}\n`);
console.log('| scenario | requests/s | p99 ms | vs peer | errors |');
console.log('|---|---:|---:|---:|---:|');
for (const r of rows) {
  console.log(`| ${r.scenario} | ${r.rps} | ${r.p99} | ${(r.rps / peer.rps).toFixed(2)} | ${r.errors} |`);
}
