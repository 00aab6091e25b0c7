/**
 * `svc-gateway doctor` end to end (issue 16, item 5), as its own process beside a served gateway
 * on the same settings: a healthy gateway passes (exit 0, no `fail` line); a certificate that has
 * expired or does not name the public URL's host, and a database that does not answer, are each
 * one `fail` line saying what to fix, and exit 1.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import { certificatePems } from '../helpers/certificates.ts';
import { TEST_DATABASE_URL, dbKind } from '../helpers/gateway.ts';
import { freshDatabase, type FreshDatabase } from '../helpers/database.ts';
import { serveProcess, stopProcess, type ServedProcess } from '../helpers/process.ts';
import { closedPort } from '../helpers/tcp-proxy.ts';

/** Report is what one doctor run printed, line by line, and its exit code. */
interface Report {
  code: number;
  lines: string[];
  stderr: string;
}

/** certificate writes a PEM pair naming `host`, valid from `from` to `to`, and answers its files. */
async function certificate(
  dir: string,
  host: string,
  from: Date,
  to: Date,
): Promise<{ cert: string; key: string }> {
  const pems = await certificatePems(host, from, to);
  const cert = path.join(dir, `${host}-${to.getTime()}.crt`);
  const key = path.join(dir, `${host}-${to.getTime()}.key`);
  writeFileSync(cert, pems.cert);
  writeFileSync(key, pems.key);
  return { cert, key };
}

const DAY = 86_400_000;

describe(`svc-gateway doctor (${dbKind})`, function () {
  this.timeout(120_000);
  let dir: string;
  let db: FreshDatabase | null = null;
  let env: Record<string, string>;
  let gw: ServedProcess;

  /** doctor runs `svc-gateway doctor` with the gateway's settings and `extra`. */
  function doctor(extra: Record<string, string> = {}): Promise<Report> {
    return new Promise((resolve) => {
      execFile(
        process.execPath,
        ['bin/svc-gateway.js', 'doctor'],
        { env: { ...process.env, ...env, ...extra }, timeout: 60_000 },
        (err, stdout, stderr) => {
          const code = err ? (typeof err.code === 'number' ? err.code : -1) : 0;
          resolve({ code, lines: stdout.trim().split('\n'), stderr });
        },
      );
    });
  }

  /** line finds the report's line for check `name`. */
  function line(r: Report, name: string): string {
    const found = r.lines.find((l) => l.slice(6).startsWith(`${name}:`));
    expect(found, `${name} in\n${r.lines.join('\n')}`).to.be.a('string');
    return found!;
  }

  before(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'svc-doctor-'));
    db = TEST_DATABASE_URL ? await freshDatabase(TEST_DATABASE_URL) : null;
    const first = 20_000 + Math.floor(Math.random() * 10_000);
    env = {
      SVC_DATA_DIR: dir,
      SVC_BIND: '127.0.0.1',
      SVC_FTP_PASV_PORTS: `${first}-${first + 9}`,
      SVC_LOG_LEVEL: 'warn',
      ...(db ? { SVC_DATABASE_URL: db.url } : {}),
    };
    gw = await serveProcess(dir, { ...env, SVC_LOG_LEVEL: 'info' });
  });

  after(async () => {
    if (gw) await stopProcess(gw);
    await db?.drop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('passes a healthy gateway: one line per check, no fail, exit 0', async () => {
    const r = await doctor();
    expect(r.code, r.lines.join('\n') + r.stderr).to.equal(0);
    for (const l of r.lines) expect(l).to.match(/^(ok|warn) {2}[\w ]+: /);
    expect(line(r, 'database')).to.match(/^ok {4}database: .*schema up to date/);
    expect(line(r, 'storage')).to.match(/^ok {4}storage: local store/);
    expect(line(r, 'clock')).to.match(/^ok /);
    if (db) expect(line(r, 'clock')).to.include("agrees with the database server's");
    // The generated certificate is self-signed: worth saying, not a failure.
    expect(line(r, 'certificate')).to.match(/^warn {2}certificate: self-signed/);
    expect(line(r, 'public URL')).to.match(/^ok /);
    expect(line(r, 'FTP passive address')).to.match(/^ok /);
  });

  it('fails a certificate that does not name the public URL host, and passes one that does', async () => {
    const wrong = await doctor({ SVC_PUBLIC_URL: 'https://files.example.com:8443' });
    expect(wrong.code).to.equal(1);
    expect(line(wrong, 'certificate names')).to.match(
      /^fail {2}certificate names: the certificate does not name files\.example\.com, the host of public_url \(SVC_PUBLIC_URL\)/,
    );
    const { cert, key } = await certificate(
      dir,
      'files.example.com',
      new Date(Date.now() - DAY),
      new Date(Date.now() + 90 * DAY),
    );
    const right = await doctor({
      SVC_PUBLIC_URL: 'https://files.example.com:8443',
      SVC_TLS_CERT: cert,
      SVC_TLS_KEY: key,
    });
    expect(right.code, right.lines.join('\n')).to.equal(0);
    expect(line(right, 'certificate')).to.match(/^ok {4}certificate: .* valid (89|90) more days/);
    expect(line(right, 'certificate names')).to.match(/^ok /);
  });

  it('fails an expired certificate, and warns of one that expires soon', async () => {
    const expired = await certificate(
      dir,
      'localhost',
      new Date(Date.now() - 400 * DAY),
      new Date(Date.now() - DAY),
    );
    const r = await doctor({ SVC_TLS_CERT: expired.cert, SVC_TLS_KEY: expired.key });
    expect(r.code).to.equal(1);
    expect(line(r, 'certificate')).to.match(/^fail {2}certificate: .* expired on .*: renew it and replace/);
    const soon = await certificate(
      dir,
      'localhost',
      new Date(Date.now() - DAY),
      new Date(Date.now() + 5 * DAY),
    );
    const s = await doctor({ SVC_TLS_CERT: soon.cert, SVC_TLS_KEY: soon.key });
    expect(s.code).to.equal(0);
    expect(line(s, 'certificate')).to.match(/^warn {2}certificate: .* expires in [45] days/);
  });

  it('fails a database that does not answer, naming the setting', async () => {
    const port = await closedPort();
    const r = await doctor({ SVC_DATABASE_URL: `postgres://postgres@127.0.0.1:${port}/gone` });
    expect(r.code).to.equal(1);
    expect(line(r, 'database')).to.match(
      /^fail {2}database: setting database\.url \(SVC_DATABASE_URL\): cannot connect to .*nothing answers there/,
    );
    // The rest is still checked.
    expect(line(r, 'storage')).to.match(/^ok /);
    expect(r.stderr).not.to.match(/\n\s+at /);
  });

  it('warns of a loopback public URL and fails a loopback passive address while binding every address', async () => {
    const r = await doctor({
      SVC_BIND: '0.0.0.0',
      SVC_PUBLIC_URL: 'https://127.0.0.1:8443',
      SVC_FTP_PASV_ADDRESS: '127.0.0.1',
    });
    expect(r.code).to.equal(1);
    expect(line(r, 'public URL')).to.match(/^warn {2}public URL: .* names 127\.0\.0\.1, a loopback address/);
    expect(line(r, 'FTP passive address')).to.match(/^fail {2}FTP passive address: .*SVC_FTP_PASV_ADDRESS/);
  });
});
