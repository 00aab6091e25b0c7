/**
 * GET /site (an extension, site admins only) over real HTTPS: what the running gateway serves
 * (every listener with its bound port, storage, database, version, this instance) and the problems
 * its operator should fix, in words — the bootstrap admin's password from SVC_ADMIN_PASSWORD until
 * it is changed, a certificate about to expire, a loopback public URL and no FTP passive address
 * while the listeners bind every address. Anyone else is refused.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import { certificatePems } from '../../helpers/certificates.ts';
import { dbKind, startTestGateway, type TestGateway } from '../../helpers/gateway.ts';
import { API, createKey, createUser, expectError, keyAuth, sessionAuth } from './client.ts';

const DAY = 86_400_000;

interface Problem {
  check: string;
  severity: string;
  detail: string;
}

const problem = (problems: Problem[], check: string) => problems.find((p) => p.check === check);

describe(`GET /site (${dbKind})`, function () {
  this.timeout(60_000);

  describe('a gateway on loopback with FTP and SFTP', () => {
    let gw: TestGateway;
    before(async () => {
      gw = await startTestGateway({ ports: { ftp: 0, sftp: 0 } });
    });
    after(async () => gw?.stop());

    it('names each listener with its bound port, the storage, database, version and this instance', async () => {
      const r = await gw.request('GET', `${API}/site`, { headers: keyAuth(gw.siteKey) });
      expect(r.status, r.text).to.equal(200);
      const byName = Object.fromEntries(
        (r.json.listeners as { name: string; enabled: boolean; port: number | null }[]).map((l) => [
          l.name,
          l,
        ]),
      );
      expect(Object.keys(byName)).to.deep.equal(['https', 'webdav', 'ftp', 'ftps', 'sftp']);
      for (const name of ['https', 'ftp', 'sftp']) {
        expect(byName[name]!.enabled, name).to.equal(true);
        expect(byName[name]!.port, name).to.equal(gw.ports[name]).and.to.be.above(0);
      }
      expect(byName.webdav).to.include({ enabled: false, port: null });
      expect(byName.ftps).to.include({ enabled: false, port: null });
      expect(r.json.database).to.equal(dbKind);
      expect(r.json.storage).to.deep.equal({ kind: 'local', bucket: null, endpoint: null });
      const pkg = JSON.parse(readFileSync('package.json', 'utf8')) as { version: string };
      expect(r.json.version).to.equal(pkg.version);
      expect(r.json.instances).to.have.length(1);
      expect(r.json.instances[0]).to.include({ pid: process.pid, current: true, host: os.hostname() });
      expect(r.json.certificate).to.include({ generated: true });
      expect(new Date(r.json.certificate.valid_until).getTime()).to.be.above(Date.now() + 365 * DAY);
      expect(r.json.public_url).to.equal(`https://127.0.0.1:${gw.port}`);
      // On loopback only: no public URL or passive address problem.
      expect(problem(r.json.problems, 'public URL')).to.equal(undefined);
      expect(problem(r.json.problems, 'FTP passive address')).to.equal(undefined);
    });

    it('tells that the bootstrap admin still has the SVC_ADMIN_PASSWORD password, until it is changed', async () => {
      const site = () => gw.request('GET', `${API}/site`, { headers: keyAuth(gw.siteKey) });
      const before = problem((await site()).json.problems, 'admin password');
      expect(before, 'admin password problem').to.not.equal(undefined);
      expect(before!.severity).to.equal('warn');
      expect(before!.detail).to.match(
        /site admin admin still signs in with the password set by .*SVC_ADMIN_PASSWORD/,
      );
      const admin = await gw.request('GET', `${API}/users?per_page=1`, { headers: keyAuth(gw.siteKey) });
      const id = (admin.json as { id: number; username: string }[])[0]!.id;
      const put = await gw.request('PUT', `${API}/users/${id}`, {
        headers: keyAuth(gw.siteKey),
        body: { password: 'a-better-password-7' },
      });
      expect(put.status, put.text).to.equal(200);
      expect(problem((await site()).json.problems, 'admin password')).to.equal(undefined);
    });

    it('refuses a user who is not a site admin, by key and by session', async () => {
      const u = await createUser(gw);
      const key = await createKey(gw, u.id);
      expectError(
        await gw.request('GET', `${API}/site`, { headers: keyAuth(key.key) }),
        403,
        'not-authorized/site-admin-required',
      );
      const s = await gw.request('POST', `${API}/sessions`, {
        body: { username: u.username, password: u.password },
      });
      expect(s.status, s.text).to.equal(200);
      expectError(
        await gw.request('GET', `${API}/site`, { headers: sessionAuth(s.json.id) }),
        403,
        'not-authorized/site-admin-required',
      );
      expectError(await gw.request('GET', `${API}/site`), 401, 'not-authenticated/authentication-required');
    });
  });

  describe('a gateway on every address, with a certificate about to expire', () => {
    let gw: TestGateway;
    let dir: string;
    before(async () => {
      // The gateway's own data dir, with the certificate it serves (the test client trusts it there).
      dir = mkdtempSync(path.join(os.tmpdir(), 'svc-site-'));
      const pems = await certificatePems(
        'localhost',
        new Date(Date.now() - DAY),
        new Date(Date.now() + 5 * DAY),
        ['127.0.0.1'],
      );
      mkdirSync(path.join(dir, 'tls'));
      writeFileSync(path.join(dir, 'tls', 'cert.pem'), pems.cert);
      writeFileSync(path.join(dir, 'tls', 'key.pem'), pems.key);
      gw = await startTestGateway({
        data_dir: dir,
        bind: '0.0.0.0',
        ports: { ftp: 0 },
        tls: { cert: path.join(dir, 'tls', 'cert.pem'), key: path.join(dir, 'tls', 'key.pem') },
      });
    });
    after(async () => {
      await gw?.stop();
      rmSync(dir, { recursive: true, force: true });
    });

    it('raises the expiring certificate, the loopback public URL and the unset passive address', async () => {
      const r = await gw.request('GET', `${API}/site`, { headers: keyAuth(gw.siteKey) });
      expect(r.status, r.text).to.equal(200);
      expect(r.json.bind).to.equal('0.0.0.0');
      const cert = problem(r.json.problems, 'certificate');
      expect(cert, JSON.stringify(r.json.problems)).to.not.equal(undefined);
      expect(cert!.severity).to.equal('warn');
      expect(cert!.detail).to.match(/expires in [45] days: renew it and replace/);
      const url = problem(r.json.problems, 'public URL');
      expect(url!.severity).to.equal('warn');
      expect(url!.detail).to.include(
        'names 127.0.0.1, a loopback address, while the listeners bind every address',
      );
      const pasv = problem(r.json.problems, 'FTP passive address');
      expect(pasv!.severity).to.equal('warn');
      expect(pasv!.detail).to.include('ftp.passive_address (SVC_FTP_PASV_ADDRESS) is unset');
      // The certificate names 127.0.0.1, the public URL's host.
      expect(problem(r.json.problems, 'certificate names')).to.equal(undefined);
    });
  });
});
