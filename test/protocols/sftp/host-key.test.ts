/**
 * SVC_SSH_HOST_KEY (issue 16): instances behind one load balancer show clients one host key. Two
 * gateway processes given the same key files pass OpenSSH's strict host key check against one
 * known_hosts file; one that generated its own key fails it (so the check can fail). A key file
 * that is missing or not a private key stops the start with one line naming the variable.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import { serveProcess, stopProcess, type ServedProcess } from '../../helpers/process.ts';
import { authArgs, run } from './clients.ts';

const PASSWORD = 'host-key-password-1';
/** ALIAS is the name OpenSSH files the host key under for every instance (HostKeyAlias). */
const ALIAS = 'svc-balanced';

/** keygen makes a private key file with ssh-keygen (`pem`: the PEM format, else OpenSSH's). */
function keygen(file: string, type: string, pem = false): void {
  const args = ['-q', '-t', type, '-N', '', '-f', file, ...(pem ? ['-m', 'PEM'] : [])];
  const r = spawnSync('ssh-keygen', args);
  expect(r.status, r.stderr.toString()).to.equal(0);
}

describe('SVC_SSH_HOST_KEY: one host key for several instances', function () {
  this.timeout(120_000);
  let dir: string;
  let keys: string;
  let knownHosts: string;
  const served: ServedProcess[] = [];

  before(() => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'svc-hostkey-'));
    const ed25519 = path.join(dir, 'ssh_host_ed25519_key');
    const rsa = path.join(dir, 'ssh_host_rsa_key');
    keygen(ed25519, 'ed25519');
    keygen(rsa, 'rsa', true);
    expect(readFileSync(rsa, 'utf8')).to.match(/^-----BEGIN RSA PRIVATE KEY-----/);
    keys = `${ed25519}, ${rsa}`;
    knownHosts = path.join(dir, 'known_hosts');
    writeFileSync(
      knownHosts,
      [ed25519, rsa].map((k) => `${ALIAS} ${readFileSync(`${k}.pub`, 'utf8').trim()}\n`).join(''),
    );
  });

  after(async () => {
    await Promise.all(served.map((s) => stopProcess(s)));
    rmSync(dir, { recursive: true, force: true });
  });

  /** start runs a gateway process with its own data dir (SFTP only) and the admin's password. */
  async function start(env: Record<string, string>): Promise<ServedProcess> {
    const dataDir = mkdtempSync(path.join(dir, 'data-'));
    const s = await serveProcess(dataDir, {
      SVC_HTTPS_PORT: 'off',
      SVC_WEBDAV_PORT: 'off',
      SVC_FTP_PORT: 'off',
      SVC_FTPS_PORT: 'off',
      SVC_ADMIN_PASSWORD: PASSWORD,
      ...env,
    });
    served.push(s);
    // Keys are generated into the data dir only when SVC_SSH_HOST_KEY is unset.
    expect(existsSync(path.join(dataDir, 'ssh')), 'generated keys').to.equal(!env.SVC_SSH_HOST_KEY);
    return s;
  }

  /** strictLs lists `/` over SFTP, checking the host key strictly against the one known_hosts file. */
  function strictLs(s: ServedProcess, keyAlgorithms: string) {
    // Not sftpBatch: its SSH_OPTIONS turn the check off, and OpenSSH keeps the first value given.
    const { prefix, args } = authArgs({ password: PASSWORD });
    const options = [
      'StrictHostKeyChecking=yes',
      `UserKnownHostsFile=${knownHosts}`,
      'GlobalKnownHostsFile=/dev/null',
      `HostKeyAlias=${ALIAS}`,
      `HostKeyAlgorithms=${keyAlgorithms}`,
    ];
    const argv = [...prefix, 'sftp', ...args, ...options.flatMap((o) => ['-o', o])];
    argv.push('-b', '-', '-P', String(s.ports.sftp), 'admin@127.0.0.1');
    return run(argv, 'ls /\n', { timeoutMs: 30_000 });
  }

  it('two instances given the same key files pass one strict known_hosts; a generated key does not', async () => {
    const [one, two] = [await start({ SVC_SSH_HOST_KEY: keys }), await start({ SVC_SSH_HOST_KEY: keys })];
    for (const s of [one!, two!]) {
      for (const algorithm of ['ssh-ed25519', 'rsa-sha2-512']) {
        const r = await strictLs(s, algorithm);
        expect(r.code, `${algorithm}: ${r.stderr}`).to.equal(0);
      }
    }
    // The instance that generated its own keys into its data dir shows another key.
    const own = await start({});
    const r = await strictLs(own, 'ssh-ed25519');
    expect(r.code).to.not.equal(0);
    expect(r.stderr).to.match(/REMOTE HOST IDENTIFICATION HAS CHANGED|Host key verification failed/);
  });

  /** failedStart runs `svc-gateway serve` and returns its exit code and what it printed on stderr. */
  function failedStart(value: string): { code: number | null; stderr: string } {
    const r = spawnSync(process.execPath, ['bin/svc-gateway.js', 'serve'], {
      env: {
        ...process.env,
        SVC_DATA_DIR: mkdtempSync(path.join(dir, 'data-')),
        SVC_DATABASE_URL: '',
        SVC_BIND: '127.0.0.1',
        SVC_HTTPS_PORT: 'off',
        SVC_WEBDAV_PORT: 'off',
        SVC_FTP_PORT: 'off',
        SVC_FTPS_PORT: 'off',
        SVC_SFTP_PORT: '0',
        SVC_ADMIN_PASSWORD: PASSWORD,
        SVC_SSH_HOST_KEY: value,
      },
      timeout: 60_000,
    });
    return { code: r.status, stderr: r.stderr.toString() };
  }

  it('a missing file stops the start with one line naming SVC_SSH_HOST_KEY', () => {
    const missing = path.join(dir, 'no_such_key');
    const r = failedStart(missing);
    expect(r.code).to.equal(1);
    expect(r.stderr.trim().split('\n')).to.deep.equal([
      `svc-gateway: setting sftp.host_keys (SVC_SSH_HOST_KEY): file ${missing} does not exist`,
    ]);
  });

  it('a public key or a file of something else stops the start the same way', () => {
    const ed25519Pub = path.join(dir, 'ssh_host_ed25519_key.pub');
    const text = path.join(dir, 'notes.txt');
    writeFileSync(text, 'not a key\n');
    for (const file of [ed25519Pub, text]) {
      const r = failedStart(file);
      expect(r.code).to.equal(1);
      const lines = r.stderr.trim().split('\n');
      expect(lines).to.have.length(1);
      expect(lines[0]).to.contain(
        `svc-gateway: setting sftp.host_keys (SVC_SSH_HOST_KEY): file ${file} is not an unencrypted SSH private key`,
      );
    }
  });
});
