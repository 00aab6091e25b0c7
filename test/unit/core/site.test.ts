/**
 * The core's site report (core.site, GET /site's source): the bootstrap admin's generated
 * password is a problem until it is changed; an expired certificate, or one that does not name the
 * public URL's host, is a failure in words; the ports main.ts reports are the listeners' ports.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import { operatorPrincipal, type Problem } from '../../../src/core/index.ts';
import { certificatePems } from '../../helpers/certificates.ts';
import { dbKind, openTestCore, type TestCore } from '../../helpers/gateway.ts';

const DAY = 86_400_000;
const op = operatorPrincipal();
const problem = (problems: Problem[], check: string) => problems.find((p) => p.check === check);

describe(`core site report (${dbKind})`, function () {
  this.timeout(30_000);
  let t: TestCore;
  let dir: string;

  before(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'svc-site-unit-'));
    const pems = await certificatePems(
      'files.example.com',
      new Date(Date.now() - 400 * DAY),
      new Date(Date.now() - DAY),
    );
    writeFileSync(path.join(dir, 'cert.pem'), pems.cert);
    writeFileSync(path.join(dir, 'key.pem'), pems.key);
    // No admin.password: the first start generates one (main.ts), as in production.
    t = await openTestCore({
      admin: { username: 'root', password: '' },
      public_url: 'https://gateway.example.org',
      tls: { cert: path.join(dir, 'cert.pem'), key: path.join(dir, 'key.pem') },
    });
  });
  after(async () => {
    await t?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('tells that the bootstrap admin keeps the generated password, until it is changed', async () => {
    const admin = await t.core.users.bootstrapAdmin('root', 'generated-Pass-1');
    const first = problem((await t.core.site.report(op)).problems, 'admin password');
    expect(first, 'admin password problem').to.not.equal(undefined);
    expect(first!.detail).to.include(
      'the site admin root still has the password generated and printed at the first start',
    );
    await t.core.users.update(op, admin!.id, { password: 'chosen-Pass-2' });
    expect(problem((await t.core.site.report(op)).problems, 'admin password')).to.equal(undefined);
  });

  it('fails an expired certificate and one that does not name the public URL host', async () => {
    const { problems, certificate } = await t.core.site.report(op);
    expect(certificate).to.include({ generated: false, file: path.join(dir, 'cert.pem') });
    expect(certificate!.names).to.include('files.example.com');
    expect(problem(problems, 'certificate')).to.include({ severity: 'fail' });
    expect(problem(problems, 'certificate')!.detail).to.match(/expired on .*: renew it and replace/);
    expect(problem(problems, 'certificate names')).to.include({ severity: 'fail' });
    expect(problem(problems, 'certificate names')!.detail).to.include(
      'the certificate does not name gateway.example.org, the host of public_url (SVC_PUBLIC_URL)',
    );
  });

  it('shows the ports the front ends are bound to once they listen', async () => {
    const before = await t.core.site.report(op);
    expect(before.listeners.find((l) => l.name === 'https')).to.include({ enabled: true, port: 0 });
    t.core.site.listening({ https: 40443 });
    const after = await t.core.site.report(op);
    expect(after.listeners.find((l) => l.name === 'https')).to.include({ enabled: true, port: 40443 });
    expect(after.listeners.find((l) => l.name === 'sftp')).to.include({ enabled: false, port: null });
  });
});
