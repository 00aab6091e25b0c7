/**
 * The runtime contract of DESIGN.md, as an operator meets it: `svc-gateway serve` as its own
 * process, the admin password printed once on first start, one `ready` line with the ports,
 * /healthz without credentials, keys and certificate kept across restarts, and SIGTERM ending
 * the process cleanly with exit code 0.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import https from 'node:https';
import net from 'node:net';
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

  /** refusal starts `svc-gateway serve` with `env` and answers what it printed on stderr, after exit 1. */
  async function refusal(env: Record<string, string>): Promise<string> {
    const child = spawn(process.execPath, ['bin/svc-gateway.js', 'serve'], {
      env: {
        ...process.env,
        SVC_DATA_DIR: dir,
        SVC_BIND: '127.0.0.1',
        SVC_HTTPS_PORT: '0',
        SVC_WEBDAV_PORT: 'off',
        SVC_FTP_PORT: 'off',
        SVC_FTPS_PORT: 'off',
        SVC_SFTP_PORT: 'off',
        SVC_LOG_LEVEL: 'warn',
        ...(dbUrl ? { SVC_DATABASE_URL: dbUrl } : {}),
        ...env,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr!.on('data', (c: Buffer) => (stderr += c.toString()));
    const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
    expect(code, stderr).to.equal(1);
    expect(stderr, 'no stack trace').to.not.include('    at ');
    return stderr.trim();
  }

  it('refuses to start on a wrong setting, naming it', async () => {
    expect(await refusal({ SVC_HTTPS_PORT: 'eighty' })).to.include('ports.https (SVC_HTTPS_PORT)');
  });

  it('refuses to start when a port is taken, the bind address is not here, or every port is off', async () => {
    const taken = net.createServer().listen(0, '127.0.0.1');
    await once(taken, 'listening');
    const port = (taken.address() as net.AddressInfo).port;
    try {
      expect(await refusal({ SVC_SFTP_PORT: String(port) })).to.equal(
        `svc-gateway: setting ports.sftp (SVC_SFTP_PORT): 127.0.0.1:${port} is already in use by another program`,
      );
    } finally {
      taken.close();
    }
    // 192.0.2.0/24 is TEST-NET-1 (RFC 5737): never an address of a real machine.
    expect(await refusal({ SVC_BIND: '192.0.2.1' })).to.equal(
      'svc-gateway: setting bind (SVC_BIND): 192.0.2.1 is not an address of this machine',
    );
    expect(await refusal({ SVC_HTTPS_PORT: 'off' })).to.match(
      /^svc-gateway: every listener is off \(ports\.\* \//,
    );
  });

  it('refuses to start when the database cannot be reached, naming the setting but not the password', async () => {
    const closed = await refusal({ SVC_DATABASE_URL: 'postgres://postgres:s3cret@127.0.0.1:1/svc' });
    expect(closed).to.equal(
      'svc-gateway: setting database.url (SVC_DATABASE_URL): cannot connect to postgres://postgres:***@127.0.0.1:1/svc: nothing answers there (is PostgreSQL running, on that host and port?)',
    );
    if (dbUrl) {
      const missing = new URL(dbUrl);
      missing.pathname = '/svc_no_such_database';
      expect(await refusal({ SVC_DATABASE_URL: missing.toString() })).to.include(
        'database "svc_no_such_database" does not exist (create it: createdb svc_no_such_database)',
      );
    }
  });

  it('refuses to start with an unknown key in its config file', async () => {
    const file = path.join(dir, 'site.yaml');
    writeFileSync(file, 'ports:\n  htps: 9443\n');
    const message = await refusal({ SVC_CONFIG: file });
    expect(message).to.include(`unknown setting ports.htps in config file ${file} (SVC_CONFIG)`);
  });
});
