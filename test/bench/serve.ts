/**
 * Benchmark child process: starts one server and prints one JSON line {port, key} on stdout.
 *   gateway [--populate N] [--ports ftp,ftps,sftp] [--pasv FIRST-LAST] [--config JSON]
 *                                  the whole gateway on a fresh database (SQLite, or PostgreSQL when
 *                                  SVC_TEST_DATABASE_URL names a server), a site-wide key and 100
 *                                  users; the line also carries pid, dataDir and ports (every bound
 *                                  listener by name). With --populate, the folder /big first gets N
 *                                  file rows, inserted through dbOf(core).work in batches of 500
 *                                  (populateMs says how long that took). --ports binds the named
 *                                  front ends (ftp, ftps, sftp, webdav) on free ports; --pasv sets
 *                                  the FTP passive port range (default config/default.yaml's);
 *                                  databaseUrl names the PostgreSQL database ('' on SQLite);
 *                                  --config merges settings (e.g. {"sessions":{…}}) into the test's
 *                                  --users N adds N users crowd00000… (rows only, no password)
 *   peer                           the peer: bare Koa over HTTPS with the same certificate, answering
 *                                  a constant JSON object (the ceiling of Koa + TLS on this machine)
 */
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import Koa from 'koa';
import { operatorPrincipal, type Core } from '../../src/core/index.ts';
import { FileEntity, type FileRow } from '../../src/db/entities.ts';
import { startTestGateway } from '../helpers/gateway.ts';
import { dbOf } from '../helpers/internals.ts';
import { insertUsers } from '../helpers/users.ts';

const [mode] = process.argv.slice(2);
if (mode === 'peer') {
  const { readFileSync } = await import('node:fs');
  const dir = process.argv[3]!;
  const app = new Koa();
  app.use((ctx) => {
    ctx.body = { id: 1, descriptive_label: 'abcdef...1234', user_id: null, permission_set: 'full' };
  });
  const server = https.createServer(
    { cert: readFileSync(`${dir}/tls/cert.pem`), key: readFileSync(`${dir}/tls/key.pem`) },
    app.callback(),
  );
  server.listen(0, '127.0.0.1', () =>
    console.log(JSON.stringify({ port: (server.address() as AddressInfo).port })),
  );
} else {
  const arg = (flag: string) => {
    const at = process.argv.indexOf(flag);
    return at > 0 ? process.argv[at + 1] : undefined;
  };
  const ports: Record<string, unknown> = {};
  for (const name of (arg('--ports') ?? '').split(',').filter(Boolean)) ports[name] = 0;
  const pasv = arg('--pasv');
  if (pasv) ports.ftp_pasv = pasv;
  const extra = JSON.parse(arg('--config') ?? '{}') as Record<string, unknown>;
  const gw = await startTestGateway({ ...extra, log_level: 'error', ports });
  const admin = operatorPrincipal();
  for (let i = 0; i < 100; i++) {
    await gw.core.users.create(admin, {
      username: `bench${i}`,
      password: 'bench-password',
      email: `bench${i}@example.com`,
    });
  }
  const crowd = arg('--users');
  if (crowd !== undefined) await insertUsers(gw.core, Number(crowd), 'crowd');
  const count = arg('--populate');
  const populateMs = count !== undefined ? await populate(gw.core, Number(count)) : undefined;
  console.log(
    JSON.stringify({
      port: gw.port,
      key: gw.siteKey,
      dataDir: gw.config.data_dir,
      pid: process.pid,
      ports: gw.ports,
      populateMs,
      databaseUrl: gw.config.database.url,
    }),
  );
  process.on('SIGTERM', () => {
    void gw.stop().then(() => process.exit(0));
  });
}

/** populate creates /big with `count` real file rows (no blobs), 500 per unit of work; returns ms. */
async function populate(core: Core, count: number): Promise<number> {
  if (!Number.isInteger(count) || count < 0) throw new Error(`--populate needs a count, got ${count}`);
  const t0 = performance.now();
  await core.files.session(operatorPrincipal()).mkdir('big');
  const base = Date.now() - count * 1000;
  for (let i = 0; i < count; i += 500) {
    const rows: Omit<FileRow, 'id'>[] = [];
    for (let j = i; j < Math.min(count, i + 500); j++) {
      const name = `f${String(j).padStart(7, '0')}.bin`;
      rows.push({
        path: `big/${name}`,
        parent: 'big',
        name,
        type: 'file' as const,
        // Sizes spread without following name order, so sort_by[size] reorders the folder.
        size: (j * 7919) % 1_000_003,
        mtime: new Date(base + j * 1000),
        md5: null,
        crc32: null,
        blob_id: null,
      });
    }
    await dbOf(core).work((em) => em.insert(FileEntity, rows));
  }
  return Math.round(performance.now() - t0);
}
