/**
 * The runtime contract of DESIGN.md, as an operator meets it: `svc-gateway serve` as its own
 * process, the admin password printed once on first start, one `ready` line with the ports,
 * /healthz without credentials, keys and certificate kept across restarts, and SIGTERM ending
 * the process cleanly with exit code 0.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import { TEST_DATABASE_URL, dbKind } from '../helpers/gateway.ts';
import { freshDatabase } from '../helpers/database.ts';
import { serveProcess as serve, stopProcess as stop } from '../helpers/process.ts';

function healthz(port: number, ca: Buffer): Promise<number> {
  return new Promise((resolve, reject) => {
    https
      .get({ host: '127.0.0.1', port, path: '/healthz', ca, servername: 'localhost' }, (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      })
      .on('error', reject);
  });
}

describe(`the svc-gateway process (${dbKind})`, function () {
  this.timeout(120_000);
  let dir: string;
  let dbUrl = '';
  let dropDb: (() => Promise<void>) | null = null;

  before(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'svc-process-'));
    if (TEST_DATABASE_URL) {
      const db = await freshDatabase(TEST_DATABASE_URL, 'svc_proc');
      dbUrl = db.url;
      dropDb = db.drop;
    }
  });
  after(async () => {
    await dropDb?.();
    rmSync(dir, { recursive: true, force: true });
  });

  it('starts every listener, prints the admin password once, keeps its keys, and stops on SIGTERM with 0', async () => {
    const env = dbUrl ? { SVC_DATABASE_URL: dbUrl } : ({} as Record<string, string>);
    const first = await serve(dir, env);
    try {
      expect(Object.keys(first.ports).sort()).to.deep.equal(['ftp', 'ftps', 'https', 'sftp', 'webdav']);
      const ca = readFileSync(path.join(dir, 'tls', 'cert.pem'));
      expect(await healthz(first.ports.https!, ca)).to.equal(200);
      expect(
        first.stdout.filter((l) => /Created site admin "admin" with password: \S{12,}/.test(l)),
      ).to.have.length(1);
    } finally {
      expect(await stop(first)).to.equal(0);
    }
    const cert = readFileSync(path.join(dir, 'tls', 'cert.pem'), 'utf8');
    const secret = readFileSync(path.join(dir, 'secret'), 'utf8');

    const second = await serve(dir, env);
    try {
      expect(second.stdout.join('\n')).to.not.include('password');
      expect(readFileSync(path.join(dir, 'tls', 'cert.pem'), 'utf8')).to.equal(cert);
      expect(readFileSync(path.join(dir, 'secret'), 'utf8')).to.equal(secret);
      expect(await healthz(second.ports.https!, Buffer.from(cert))).to.equal(200);
    } finally {
      expect(await stop(second)).to.equal(0);
    }
  });

  it('refuses to start on a wrong setting, naming it', async () => {
    const child = spawn(process.execPath, ['bin/svc-gateway.js', 'serve'], {
      env: { ...process.env, SVC_DATA_DIR: dir, SVC_HTTPS_PORT: 'eighty' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr!.on('data', (c: Buffer) => (stderr += c.toString()));
    const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
    expect(code).to.equal(1);
    expect(stderr).to.include('ports.https (SVC_HTTPS_PORT)');
    expect(stderr).to.not.include('    at ');
  });
});
