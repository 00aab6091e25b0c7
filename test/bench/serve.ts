/**
 * Benchmark child process: starts one server and prints one JSON line {port, key} on stdout.
 *   gateway <sqlite|postgres-url>  the whole gateway on a fresh database, a site-wide key and 100 users
 *   peer                           the peer: bare Koa over HTTPS with the same certificate, answering
 *                                  a constant JSON object (the ceiling of Koa + TLS on this machine)
 */
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import Koa from 'koa';
import { operatorPrincipal } from '../../src/core/index.ts';
import { startTestGateway } from '../helpers/gateway.ts';

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
  const gw = await startTestGateway({ log_level: 'error' });
  const admin = operatorPrincipal();
  for (let i = 0; i < 100; i++) {
    await gw.core.users.create(admin, {
      username: `bench${i}`,
      password: 'bench-password',
      email: `bench${i}@example.com`,
    });
  }
  console.log(JSON.stringify({ port: gw.port, key: gw.siteKey, dataDir: gw.config.data_dir }));
  process.on('SIGTERM', () => {
    void gw.stop().then(() => process.exit(0));
  });
}
