/**
 * Child processes of the events benchmark (events.bench.ts); each prints one JSON line on stdout
 * once it is ready.
 *   receiver                  a webhook receiver: answers every POST with 204 and counts it;
 *                             `GET /stats` answers {count, first, last} (epoch ms of the first and
 *                             last POST), `POST /reset` clears them. Prints {port}.
 *   gateway [--webhook URL] [--backlog N] [--records N]
 *                             the whole gateway (HTTPS and WebDAV on free ports) on a fresh
 *                             database (SQLite, or PostgreSQL when SVC_TEST_DATABASE_URL names a
 *                             server), with one webhook to URL for the file actions. --backlog
 *                             records N `create` Actions through the core's own recordAction (so
 *                             each queues its delivery exactly as an upload does) before the
 *                             background loops start, 500 per unit of work. --records inserts N
 *                             webhook delivery records (for exports) in units of 1,000. Prints
 *                             {port, webdav, key, dataDir, pid, databaseUrl, backlogMs}.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createLogger } from '../../src/log.ts';
import { startGateway } from '../../src/main.ts';
import { createCore, operatorPrincipal, type Core } from '../../src/core/index.ts';
import { recordAction } from '../../src/core/actions/record.ts';
import { WebhookAttemptEntity, type WebhookAttemptRow } from '../../src/db/entities.ts';
import { testConfig } from '../helpers/gateway.ts';
import { dbOf } from '../helpers/internals.ts';

const arg = (flag: string) => {
  const at = process.argv.indexOf(flag);
  return at > 0 ? process.argv[at + 1] : undefined;
};

if (process.argv[2] === 'receiver') {
  let count = 0;
  let first = 0;
  let last = 0;
  const server = http.createServer((req, res) => {
    if (req.method === 'GET' && req.url === '/stats') {
      res.writeHead(200, { 'Content-Type': 'application/json' }).end(JSON.stringify({ count, first, last }));
      return;
    }
    if (req.url === '/reset') {
      count = first = last = 0;
      res.writeHead(204).end();
      return;
    }
    req.resume();
    req.on('end', () => {
      const now = Date.now();
      count++;
      first ||= now;
      last = now;
      res.writeHead(204).end();
    });
  });
  server.keepAliveTimeout = 30_000;
  server.listen(0, '127.0.0.1', () =>
    console.log(JSON.stringify({ port: (server.address() as AddressInfo).port })),
  );
} else {
  const webhook = arg('--webhook');
  const { config, cleanup } = await testConfig({
    log_level: 'error',
    ports: { https: 0, webdav: 0 },
    webhooks: webhook ? [{ url: webhook, secret: 'bench-secret' }] : [],
    events: { poll_interval_ms: 1000 },
  });
  const log = createLogger('error', { silent: true });
  const backlog = Number(arg('--backlog') ?? 0);
  let backlogMs: number | undefined;
  if (backlog > 0) {
    // A core without background loops queues the backlog; the gateway below then delivers it.
    const core = await createCore(config, log, { background: false });
    backlogMs = await queueActions(core, backlog);
    await core.close();
  }
  const gw = await startGateway(config, log, { announce: () => undefined });
  const records = Number(arg('--records') ?? 0);
  if (records > 0) await insertRecords(gw.core, records);
  const key = (await gw.core.apiKeys.createSiteWide('bench')).key!;
  console.log(
    JSON.stringify({
      port: gw.ports.https,
      webdav: gw.ports.webdav,
      key,
      dataDir: config.data_dir,
      pid: process.pid,
      databaseUrl: config.database.url,
      backlogMs,
    }),
  );
  process.on('SIGTERM', () => {
    void gw
      .stop()
      .then(cleanup)
      .then(() => process.exit(0));
  });
}

/** queueActions records `n` file `create` Actions, as uploads by the site operator would. */
async function queueActions(core: Core, n: number): Promise<number> {
  const t0 = performance.now();
  const who = operatorPrincipal();
  for (let i = 0; i < n; i += 500) {
    await dbOf(core).work(async (em) => {
      for (let j = i; j < Math.min(n, i + 500); j++)
        await recordAction(em, who, { action: 'create', path: `in/f${j}.bin`, size: 4096 });
    });
  }
  return Math.round(performance.now() - t0);
}

/** insertRecords writes `n` delivery records, a third of them failures, over 100 folders. */
async function insertRecords(core: Core, n: number): Promise<void> {
  const t = Date.now() - n * 10;
  for (let i = 0; i < n; i += 1000) {
    const rows: Omit<WebhookAttemptRow, 'id'>[] = [];
    for (let j = i; j < Math.min(n, i + 1000); j++) {
      const folder = `site/folder${j % 100}`;
      const ok = j % 3 !== 0;
      rows.push({
        delivery_id: j + 1,
        created_at: new Date(t + j * 10),
        status: ok ? 200 : 500,
        message: ok ? 'delivered (HTTP 200)' : 'HTTP 500 Internal Server Error',
        success: ok,
        request_headers: JSON.stringify({
          'Content-Type': 'application/json',
          'User-Agent': 'svc-gateway-webhook',
          'X-Svc-Action-Id': String(j + 1),
          'X-Svc-Signature': `sha256=${'0'.repeat(64)}`,
        }),
        request_method: 'POST',
        request_url: 'https://hooks.example.com/svc',
        path: `${folder}/file${j}.bin`,
        folder,
      });
    }
    // updateEntity(false): TypeORM would re-read the 1,000 rows with one OR per row otherwise.
    await dbOf(core).work((em) =>
      em.createQueryBuilder().insert().into(WebhookAttemptEntity).values(rows).updateEntity(false).execute(),
    );
  }
}
