/**
 * The SFTP front end driven by OpenSSH's sftp (batch mode) and scp, and by a raw SFTP v3 client
 * for the hostile cases: logins by password and by key through the core's gate, transfers, the
 * extensions OpenSSH uses, the jail. The permission matrix, the login gate, locks and the Actions
 * of a file's lifecycle are the cross-protocol scenarios' (test/protocols/scenarios/).
 */
import { expect } from 'chai';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { operatorPrincipal, type Core } from '../../../src/core/index.ts';
import { ActionEntity } from '../../../src/db/entities.ts';
import { startTestGateway, type TestGateway } from '../../helpers/gateway.ts';
import { API, keyAuth, unique } from '../rest/client.ts';
import { exec, md5File, rawSftp, run, scp, sftpBatch, str, u32, u64, type Login } from './clients.ts';
import { dbOf } from '../../helpers/internals.ts';

const PASSWORD = 'Sftp-password-1';

async function makeUser(
  gw: TestGateway,
  fields: Record<string, unknown> = {},
): Promise<{ id: number; username: string; root: string }> {
  const username = unique('sftp');
  const root = `home/${username}`;
  const op = operatorPrincipal();
  await gw.core.namespace.mkdir(op, root);
  const user = await gw.core.users.create(op, {
    username,
    password: PASSWORD,
    user_root: `${root}/`,
    grant_permission: 'full',
    ...fields,
  });
  return { id: user.id, username, root };
}

function actionsOf(core: Core, username: string) {
  return dbOf(core).read((em) => em.find(ActionEntity, { where: { username }, order: { id: 'ASC' } }));
}

describe('SFTP front end', function () {
  this.timeout(120_000);
  let gw: TestGateway;
  let port: number;
  let dir: string;
  const pw: Login = { password: PASSWORD };

  before(async () => {
    gw = await startTestGateway({ ports: { sftp: 0 } });
    port = gw.ports.sftp!;
    dir = mkdtempSync(path.join(os.tmpdir(), 'svc-sftp-'));
  });
  after(async () => {
    await gw?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('logs in by password, lists (ls -l format), uploads, downloads, renames and removes', async () => {
    const u = await makeUser(gw);
    writeFileSync(path.join(dir, 'a.txt'), 'hello sftp\n');
    const r = await sftpBatch(
      port,
      u.username,
      pw,
      [
        'pwd',
        'mkdir docs',
        'put a.txt docs/a.txt',
        'ls -l docs',
        'get docs/a.txt back.txt',
        'rename docs/a.txt docs/b.txt',
        'ls docs',
        'rm docs/b.txt',
        'rmdir docs',
        'ls -l',
      ],
      { cwd: dir },
    );
    expect(r.code, r.stderr).to.equal(0);
    expect(r.stdout).to.include('Remote working directory: /');
    expect(r.stdout).to.match(/-rw-r--r-- +1 \S+ +\S+ +11 \w{3} [ \d]\d \d\d:\d\d a\.txt/);
    expect(readFileSync(path.join(dir, 'back.txt'), 'utf8')).to.equal('hello sftp\n');
  });

  it('logs in with a key registered through POST /public_keys', async () => {
    const u = await makeUser(gw);
    const key = path.join(dir, `id_${u.username}`);
    execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', 'test key', '-f', key]);
    const denied = await sftpBatch(port, u.username, { identity: key }, ['pwd']);
    expect(denied.code).to.not.equal(0);
    const res = await gw.request('POST', `${API}/public_keys`, {
      headers: keyAuth(gw.siteKey),
      body: { user_id: u.id, title: 'laptop', public_key: readFileSync(`${key}.pub`, 'utf8') },
    });
    expect(res.status, res.text).to.equal(201);
    const fp = execFileSync('ssh-keygen', ['-l', '-f', `${key}.pub`])
      .toString()
      .split(' ')[1];
    expect(res.json.fingerprint).to.equal(fp);
    const ok = await sftpBatch(port, u.username, { identity: key }, ['pwd']);
    expect(ok.code, ok.stderr).to.equal(0);
    const logins = (await actionsOf(gw.core, u.username)).filter((a) => a.action === 'login');
    expect(logins).to.have.length(1);
    expect(logins[0]!.interface).to.equal('sftp');
  });

  it('round-trips 50 MB intact (md5), with reget and reput', async () => {
    const u = await makeUser(gw);
    const big = path.join(dir, 'big.bin');
    execFileSync('sh', ['-c', `head -c ${50 * 1024 * 1024} /dev/urandom > ${big}`]);
    const sum = md5File(big);
    const r = await sftpBatch(port, u.username, pw, ['put big.bin', 'get big.bin big.back'], { cwd: dir });
    expect(r.code, r.stderr).to.equal(0);
    expect(md5File(path.join(dir, 'big.back'))).to.equal(sum);
    const stat = await gw.core.files.session({ ...(await principal(gw, u.id)) }).stat('big.bin');
    expect(stat.md5).to.equal(sum);
    // reget: a partial local copy is completed; reput: a partial remote copy is completed.
    const part = readFileSync(big).subarray(0, 7 * 1024 * 1024 + 123);
    writeFileSync(path.join(dir, 'part.bin'), part);
    const r2 = await sftpBatch(
      port,
      u.username,
      pw,
      [
        'put part.bin remote.bin',
        'reget big.bin part.bin',
        'reput big.bin remote.bin',
        'get remote.bin remote.back',
      ],
      { cwd: dir },
    );
    expect(r2.code, r2.stderr).to.equal(0);
    expect(md5File(path.join(dir, 'part.bin'))).to.equal(sum);
    expect(md5File(path.join(dir, 'remote.back'))).to.equal(sum);
  });

  it('renames onto an existing file (posix-rename), answers df, keeps mtime with put -p', async () => {
    const u = await makeUser(gw);
    writeFileSync(path.join(dir, 'one.txt'), 'one');
    writeFileSync(path.join(dir, 'two.txt'), 'two');
    utimesSync(path.join(dir, 'one.txt'), new Date('2020-01-02T03:04:05Z'), new Date('2020-01-02T03:04:05Z'));
    const r = await sftpBatch(
      port,
      u.username,
      pw,
      ['put -p one.txt', 'put two.txt', 'rename two.txt one.txt', 'df -h', 'put -p one.txt kept.txt'],
      { cwd: dir },
    );
    expect(r.code, r.stderr).to.equal(0);
    expect(r.stdout).to.match(/Size +Used +Avail/);
    const s = gw.core.files.session(await principal(gw, u.id));
    expect((await s.stat('kept.txt')).mtime.toISOString()).to.equal('2020-01-02T03:04:05.000Z');
    const got = await sftpBatch(port, u.username, pw, ['get one.txt check.txt'], { cwd: dir });
    expect(got.code).to.equal(0);
    expect(readFileSync(path.join(dir, 'check.txt'), 'utf8')).to.equal('two');
    await expectFails(sftpBatch(port, u.username, pw, ['ls two.txt']));
  });

  it('scp (SFTP mode) uploads and downloads with exit status 0', async () => {
    const u = await makeUser(gw);
    writeFileSync(path.join(dir, 'scp.txt'), 'by scp');
    const up = await scp(port, pw, ['scp.txt', `${u.username}@127.0.0.1:/scp-remote.txt`], { cwd: dir });
    expect(up.code, up.stderr).to.equal(0);
    const home = await scp(port, pw, ['scp.txt', `${u.username}@127.0.0.1:~/tilde.txt`], { cwd: dir });
    expect(home.code, home.stderr).to.equal(0);
    const down = await scp(port, pw, [`${u.username}@127.0.0.1:/tilde.txt`, 'scp-back.txt'], { cwd: dir });
    expect(down.code, down.stderr).to.equal(0);
    expect(readFileSync(path.join(dir, 'scp-back.txt'), 'utf8')).to.equal('by scp');
    const legacy = await scp(port, pw, ['-O', 'scp.txt', `${u.username}@127.0.0.1:/legacy.txt`], {
      cwd: dir,
    });
    expect(legacy.code).to.not.equal(0);
  });

  it('keeps the user inside user_root (jail)', async () => {
    const op = operatorPrincipal();
    const site = gw.core.files.session({ ...op, interface: 'restapi' });
    const { Readable } = await import('node:stream');
    await site.write('secret.txt', Readable.from([Buffer.from('top secret')]));
    const u = await makeUser(gw);
    const r = await sftpBatch(port, u.username, pw, ['cd ..', 'pwd', 'ls', 'mkdir ../../escaped'], {
      cwd: dir,
    });
    expect(r.code, r.stderr).to.equal(0);
    expect(r.stdout).to.include('Remote working directory: /');
    expect(r.stdout).to.not.include('secret.txt');
    await expectFails(sftpBatch(port, u.username, pw, ['get ../secret.txt stolen.txt'], { cwd: dir }));
    await expectFails(sftpBatch(port, u.username, pw, ['get /../../secret.txt stolen.txt'], { cwd: dir }));
    expect((await site.stat(`${u.root}/escaped`)).type).to.equal('directory');
  });

  it('answers md5sum from the stored md5, 127 for other commands, and refuses a shell', async () => {
    const u = await makeUser(gw);
    writeFileSync(path.join(dir, 'h.txt'), 'hash me');
    expect(
      (await sftpBatch(port, u.username, pw, ['put h.txt "with space.txt"'], { cwd: dir })).code,
    ).to.equal(0);
    const sum = md5File(path.join(dir, 'h.txt'));
    const r = await exec(port, u.username, PASSWORD, 'md5sum "/with space.txt"');
    expect(r).to.include({ code: 0, stdout: `${sum}  /with space.txt\n` });
    expect((await exec(port, u.username, PASSWORD, 'md5sum')).stdout).to.equal(
      'd41d8cd98f00b204e9800998ecf8427e  -\n',
    );
    expect((await exec(port, u.username, PASSWORD, 'md5sum /nope')).code).to.equal(1);
    expect((await exec(port, u.username, PASSWORD, 'sha1sum /with\\ space.txt')).code).to.equal(127);
    const shell = await run([
      'sshpass',
      '-p',
      PASSWORD,
      'ssh',
      '-T',
      '-o',
      'StrictHostKeyChecking=no',
      '-o',
      'UserKnownHostsFile=/dev/null',
      '-o',
      'PubkeyAuthentication=no',
      '-p',
      String(port),
      `${u.username}@127.0.0.1`,
    ]);
    expect(shell.code).to.equal(1);
    expect(shell.stderr).to.include('SFTP only');
  });

  it('serves rclone: copy, md5sum from the stored md5, check', async () => {
    const u = await makeUser(gw);
    const src = path.join(dir, 'rclone-src');
    mkdirSync(src);
    writeFileSync(path.join(src, 'a.txt'), 'rclone a');
    writeFileSync(path.join(src, 'b.bin'), Buffer.alloc(300_000, 3));
    const obscured = execFileSync('rclone', ['obscure', PASSWORD]).toString().trim();
    const conf = path.join(dir, 'rclone.conf');
    // The probe results preset: rclone 1.60 hashes before its own probe finishes on a first run.
    writeFileSync(
      conf,
      `[gw]\ntype = sftp\nhost = 127.0.0.1\nport = ${port}\nuser = ${u.username}\npass = ${obscured}\nshell_type = unix\nmd5sum_command = md5sum\nsha1sum_command = none\n`,
    );
    const rclone = (...args: string[]) => run(['rclone', '--config', conf, ...args]);
    const copy = await rclone('copy', src, 'gw:dest');
    expect(copy.code, copy.stderr).to.equal(0);
    const sums = await rclone('md5sum', 'gw:dest');
    expect(sums.code, sums.stderr).to.equal(0);
    expect(sums.stdout).to.include(`${md5File(path.join(src, 'b.bin'))}  b.bin`);
    const check = await rclone('check', src, 'gw:dest');
    expect(check.code, check.stderr).to.equal(0);
    expect(check.stderr).to.include('0 differences found');
  });

  it('survives hostile clients: 4 GiB READ, hundreds of OPEN without CLOSE, a WRITE flood', async () => {
    const u = await makeUser(gw);
    writeFileSync(path.join(dir, 'small.bin'), Buffer.alloc(600 * 1024, 7));
    expect((await sftpBatch(port, u.username, pw, ['put small.bin'], { cwd: dir })).code).to.equal(0);
    const raw = await rawSftp(port, u.username, PASSWORD);
    try {
      raw.send(1, u32(3));
      const version = await raw.next();
      expect(version[0]).to.equal(2);
      expect(version.toString('latin1')).to.include('posix-rename@openssh.com');
      raw.send(3, Buffer.concat([u32(1), str('/small.bin'), u32(1), u32(0)]));
      const opened = await raw.next();
      expect(opened[0]).to.equal(102);
      const handle = opened.subarray(9, 9 + opened.readUInt32BE(5));
      raw.send(5, Buffer.concat([u32(2), str(handle), u64(0), u32(0xffffffff)]));
      const data = await raw.next();
      expect(data[0]).to.equal(103);
      expect(data.readUInt32BE(5)).to.be.at.most(256 * 1024);
      const before = process.memoryUsage().rss;
      for (let i = 0; i < 400; i++)
        raw.send(3, Buffer.concat([u32(100 + i), str('/small.bin'), u32(1), u32(0)]));
      const replies = [];
      for (let i = 0; i < 400; i++) replies.push(await raw.next());
      const refused = replies.filter((p) => p[0] === 101);
      expect(refused.length).to.be.at.least(400 - 256);
      // A flood of WRITEs whose replies are never read: the server stops reading, nothing explodes.
      raw.channel.pause();
      const chunk = Buffer.alloc(32 * 1024, 1);
      for (let i = 0; i < 2000; i++)
        raw.send(6, Buffer.concat([u32(10_000 + i), str(handle), u64(i * chunk.length), str(chunk)]));
      await new Promise((r) => setTimeout(r, 1500));
      expect(process.memoryUsage().rss - before).to.be.below(400 * 1024 * 1024);
    } finally {
      raw.close();
    }
    // The server is still fine for everyone.
    expect((await sftpBatch(port, u.username, pw, ['ls'])).code).to.equal(0);
  });
});

async function principal(gw: TestGateway, id: number) {
  const { UserEntity } = await import('../../../src/db/entities.ts');
  const user = (await dbOf(gw.core).read((em) => em.findOneBy(UserEntity, { id })))!;
  return { user, apiKey: null, sessionDigest: null, interface: 'sftp' as const, ip: '127.0.0.1' };
}

async function expectFails(p: Promise<{ code: number | null; stderr: string }>, pattern?: RegExp) {
  const r = await p;
  expect(r.code, 'the client should have failed').to.not.equal(0);
  if (pattern) expect(r.stderr).to.match(pattern);
}
