/**
 * The FTP front end driven by real clients (lftp, curl): plain, explicit and implicit TLS, big and
 * resumed transfers, listings, MFMT, awkward names and the jail, as seen from the wire. The
 * permission matrix, the login gate, locks and the Actions of a file's lifecycle are the
 * cross-protocol scenarios' (test/protocols/scenarios/), run by lftp there too.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import os from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import { operatorPrincipal } from '../../../src/core/index.ts';
import { dbKind, type TestGateway } from '../../helpers/gateway.ts';
import {
  createFtpUser,
  curlFtp,
  lftp,
  md5,
  RawControl,
  readSiteFile,
  startFtpGateway,
  writeSiteFile,
  type LftpMode,
} from './clients.ts';

describe(`FTP with real clients (${dbKind})`, function () {
  this.timeout(60_000);
  let gw: TestGateway;
  let dir: string;

  before(async () => {
    gw = await startFtpGateway();
    dir = mkdtempSync(path.join(os.tmpdir(), 'svc-ftp-'));
    await createFtpUser(gw.core, 'alice');
  });
  after(async () => {
    await gw?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  const local = (name: string) => path.join(dir, name);

  for (const mode of ['plain', 'explicit', 'implicit'] as LftpMode[]) {
    it(`lftp ${mode}: mkdir, put, ls, get, rm round trip`, async () => {
      const data = randomBytes(300_000);
      writeFileSync(local(`up-${mode}.bin`), data);
      const r = await lftp(
        gw,
        mode,
        'alice',
        `mkdir ${mode}; put ${local(`up-${mode}.bin`)} -o ${mode}/file.bin; cls -l ${mode}; ` +
          `get ${mode}/file.bin -o ${local(`down-${mode}.bin`)}; rm ${mode}/file.bin; rmdir ${mode}`,
      );
      expect(r.code, r.stderr).to.equal(0);
      expect(r.stdout).to.match(/file\.bin/);
      expect(md5(readFileSync(local(`down-${mode}.bin`)))).to.equal(md5(data));
    });
  }

  it('explicit TLS data connections resume the control session (refused otherwise, the default)', async () => {
    // require_session_reuse is on by default: a listing over PROT P that succeeds proves the data
    // connection resumed the control connection's TLS session; the refusal itself is in robustness.test.ts.
    expect(gw.config.ftp.require_session_reuse).to.equal(true);
    const r = await curlFtp(gw, 'explicit', 'alice', '', ['-l']);
    expect(r.code, r.stderr).to.equal(0);
    const i = await curlFtp(gw, 'implicit', 'alice', '', ['-l']);
    expect(i.code, i.stderr).to.equal(0);
  });

  it('round-trips 50 MB over TLS with the same md5', async () => {
    const data = randomBytes(50 * 1024 * 1024);
    writeFileSync(local('big.bin'), data);
    const up = await curlFtp(gw, 'explicit', 'alice', 'big.bin', ['-T', local('big.bin')], 60_000);
    expect(up.code, up.stderr).to.equal(0);
    const down = await curlFtp(gw, 'explicit', 'alice', 'big.bin', ['-o', local('big-back.bin')], 60_000);
    expect(down.code, down.stderr).to.equal(0);
    expect(md5(readFileSync(local('big-back.bin')))).to.equal(md5(data));
    const x = await curlFtp(gw, 'plain', 'alice', '', ['-Q', 'XMD5 big.bin', '-l']);
    expect(x.code, x.stderr).to.equal(0);
  });

  it('resumes a download (REST + RETR, curl -C -)', async () => {
    const data = randomBytes(200_000);
    await writeSiteFile(gw.core, 'home/alice/resume-down.bin', data);
    writeFileSync(local('partial.bin'), data.subarray(0, 70_000));
    const r = await curlFtp(gw, 'plain', 'alice', 'resume-down.bin', ['-C', '-', '-o', local('partial.bin')]);
    expect(r.code, r.stderr).to.equal(0);
    expect(md5(readFileSync(local('partial.bin')))).to.equal(md5(data));
  });

  it('resumes an upload with APPE (curl -C -) and with REST + STOR (lftp put -c)', async () => {
    const data = randomBytes(150_000);
    writeFileSync(local('whole.bin'), data);
    await writeSiteFile(gw.core, 'home/alice/resume-up.bin', data.subarray(0, 50_000));
    const r = await curlFtp(gw, 'plain', 'alice', 'resume-up.bin', ['-C', '-', '-T', local('whole.bin')]);
    expect(r.code, r.stderr).to.equal(0);
    expect(md5(await readSiteFile(gw.core, 'home/alice/resume-up.bin'))).to.equal(md5(data));

    await writeSiteFile(gw.core, 'home/alice/resume-up2.bin', data.subarray(0, 60_000));
    const l = await lftp(gw, 'explicit', 'alice', `put -c ${local('whole.bin')} -o resume-up2.bin`, {
      extra: 'debug 5',
    });
    expect(l.code, l.stderr).to.equal(0);
    expect(l.stderr).to.match(/REST 60000/);
    expect(md5(await readSiteFile(gw.core, 'home/alice/resume-up2.bin'))).to.equal(md5(data));
  });

  it('lists with MLSD (UTC facts) and LIST (ls -l)', async () => {
    await gw.core.namespace.mkdir(operatorPrincipal(), 'home/alice/listed/sub');
    await writeSiteFile(gw.core, 'home/alice/listed/a.txt', 'aaaa');
    const mlsd = await curlFtp(gw, 'plain', 'alice', 'listed/', ['-X', 'MLSD']);
    expect(mlsd.code, mlsd.stderr).to.equal(0);
    expect(mlsd.stdout).to.match(/^type=file;size=4;modify=\d{14};perm=[a-z]+;unique=[0-9a-f]+; a\.txt\r?$/m);
    expect(mlsd.stdout).to.match(/^type=dir;modify=\d{14};perm=[a-z]+;unique=[0-9a-f]+; sub\r?$/m);
    const list = await curlFtp(gw, 'plain', 'alice', 'listed/');
    expect(list.stdout).to.match(/^-rw-r--r-- 1 ftp ftp +4 \w{3} [ \d]\d [ \d]\d:\d\d a\.txt\r?$/m);
    expect(list.stdout).to.match(/^drwxr-xr-x .* sub\r?$/m);
    const nlst = await curlFtp(gw, 'plain', 'alice', 'listed/', ['-l']);
    expect(nlst.stdout.split(/\r?\n/).filter(Boolean).sort()).to.deep.equal(['a.txt', 'sub']);
  });

  it('sets a modification time with MFMT and reads it back with MDTM and MLST', async () => {
    await writeSiteFile(gw.core, 'home/alice/stamped.txt', 'x');
    const c = await RawControl.connect(gw.ports.ftp!);
    expect(await c.login('alice')).to.match(/^230/);
    expect(await c.send('MFMT 20200102030405 stamped.txt')).to.equal(
      '213 Modify=20200102030405; /stamped.txt',
    );
    expect(await c.send('MDTM stamped.txt')).to.equal('213 20200102030405');
    expect(await c.send('MLST stamped.txt')).to.match(/modify=20200102030405;.*; \/stamped\.txt/);
    expect(await c.send('MFMT 2020130203 stamped.txt')).to.match(/^501/);
    c.close();
    const entry = await gw.core.files.session(operatorPrincipal()).stat('home/alice/stamped.txt');
    expect(entry.mtime.toISOString()).to.equal('2020-01-02T03:04:05.000Z');
  });

  it('uploads a zero-byte file over TLS', async () => {
    writeFileSync(local('empty'), '');
    const r = await curlFtp(gw, 'explicit', 'alice', 'empty.txt', ['-T', local('empty')]);
    expect(r.code, r.stderr).to.equal(0);
    const entry = await gw.core.files.session(operatorPrincipal()).stat('home/alice/empty.txt');
    expect(entry.size).to.equal(0);
    const l = await lftp(gw, 'explicit', 'alice', `put ${local('empty')} -o empty2.txt; cls -l empty2.txt`);
    expect(l.code, l.stderr).to.equal(0);
  });

  it('keeps names with spaces, quotes, a leading dash and non-ASCII intact', async () => {
    const names = ['with space.txt', 'quo"te\'s.txt', '-leading-dash.txt', 'naïve ünïcödé 日本.txt'];
    for (const [i, name] of names.entries()) {
      writeFileSync(local(`n${i}`), `content ${i}`);
      const c = await RawControl.connect(gw.ports.ftp!);
      expect(await c.login('alice')).to.match(/^230/);
      expect(await c.send(`MKD dir ${name}`)).to.equal(`257 "/dir ${name.replace(/"/g, '""')}" created`);
      c.close();
    }
    // lftp reads a leading dash as an option, so its script says ./-name (the server gets the
    // name as is from curl below).
    const quoted = (n: string) => `"./${n.replace(/"/g, '\\"')}"`;
    const script = names
      .map((n, i) => `put ${local(`n${i}`)} -o ${quoted(n)}; get ${quoted(n)} -o ${local(`back${i}`)}`)
      .join('; ');
    const r = await lftp(gw, 'explicit', 'alice', `${script}; cls -1`);
    expect(r.code, r.stderr).to.equal(0);
    for (const [i, name] of names.entries()) {
      expect(readFileSync(local(`back${i}`), 'utf8')).to.equal(`content ${i}`);
      expect((await readSiteFile(gw.core, `home/alice/${name}`)).toString()).to.equal(`content ${i}`);
      expect(r.stdout).to.include(name);
      const c = await curlFtp(gw, 'plain', 'alice', encodeURIComponent(name), ['-o', local(`curl${i}`)]);
      expect(c.code, c.stderr).to.equal(0);
      expect(readFileSync(local(`curl${i}`), 'utf8')).to.equal(`content ${i}`);
    }
  });

  it('keeps every path inside user_root (CWD ../../.., RETR ../../etc/passwd)', async () => {
    await writeSiteFile(gw.core, 'home/bob-secret.txt', 'not yours');
    const c = await RawControl.connect(gw.ports.ftp!);
    await c.login('alice');
    expect(await c.send('CWD ../../..')).to.match(/^250/);
    expect(await c.send('PWD')).to.equal('257 "/" is the current directory');
    expect(await c.send('SIZE ../bob-secret.txt')).to.match(/^550/);
    expect(await c.send('SIZE /../../home/bob-secret.txt')).to.match(/^550/);
    c.close();
    const r = await curlFtp(gw, 'plain', 'alice', '../../etc/passwd', ['-o', local('passwd')]);
    expect(r.code).to.not.equal(0);
    const b = await curlFtp(gw, 'plain', 'alice', '%2E%2E/bob-secret.txt', ['-o', local('secret')]);
    expect(b.code).to.not.equal(0);
  });
});
