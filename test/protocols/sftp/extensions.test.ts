/**
 * The SFTP extensions beyond the basics and the login paths GUI clients use: copy-data (OpenSSH
 * sftp's `cp`, and raw ranges), check-file-name/-handle (WinSCP's checksum) from the stored md5,
 * keyboard-interactive logins, and the sweep of staging files a crash left behind.
 */
import { expect } from 'chai';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import ssh2 from 'ssh2';
import { operatorPrincipal, type Core } from '../../../src/core/index.ts';
import { ActionEntity } from '../../../src/db/entities.ts';
import { dbKind, startTestGateway, type TestGateway } from '../../helpers/gateway.ts';
import { makeSftpUser, rawSftp, sftpBatch, str, u32, u64, type Login, type RawSftp } from './clients.ts';
import { dbOf } from '../../helpers/internals.ts';

const PASSWORD = 'Sftp-password-2';
const pw: Login = { password: PASSWORD };

const makeUser = (gw: TestGateway, fields: Record<string, unknown> = {}) =>
  makeSftpUser(gw, PASSWORD, fields);

function site(core: Core) {
  return core.files.session({ ...operatorPrincipal(), interface: 'restapi' });
}

async function put(core: Core, sitePath: string, data: Buffer | string) {
  await site(core).write(sitePath, Readable.from([Buffer.from(data)]));
}

async function read(core: Core, sitePath: string): Promise<Buffer> {
  const { stream } = await site(core).openRead(sitePath, { record: false });
  const chunks: Buffer[] = [];
  for await (const c of stream) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}

function actionsOf(core: Core, username: string) {
  return dbOf(core).read((em) => em.find(ActionEntity, { where: { username }, order: { id: 'ASC' } }));
}

/** Raw is a raw SFTP session with request helpers (ids counted here). */
class Raw {
  private id = 1;
  constructor(readonly s: RawSftp) {}

  static async open(port: number, username: string): Promise<{ raw: Raw; version: Buffer }> {
    const s = await rawSftp(port, username, PASSWORD);
    s.send(1, u32(3));
    return { raw: new Raw(s), version: await s.next() };
  }

  async request(type: number, ...fields: Buffer[]): Promise<Buffer> {
    this.s.send(type, Buffer.concat([u32(this.id++), ...fields]));
    return this.s.next();
  }

  async handle(p: string, flags: number): Promise<Buffer> {
    const reply = await this.request(3, str(p), u32(flags), u32(0));
    expect(reply[0], `OPEN ${p}: ${reply.toString('latin1')}`).to.equal(102);
    return reply.subarray(9, 9 + reply.readUInt32BE(5));
  }

  /** status is the status code of a STATUS reply. */
  static status(reply: Buffer): number {
    expect(reply[0]).to.equal(101);
    return reply.readUInt32BE(5);
  }

  close(): void {
    this.s.close();
  }
}

const READ = 1;
const WRITE_NEW = 2 | 8 | 0x10; // WRITE | CREAT | TRUNC

describe(`SFTP extensions and logins (${dbKind})`, function () {
  this.timeout(60_000);
  let gw: TestGateway;
  let port: number;
  let dir: string;

  before(async () => {
    gw = await startTestGateway({ ports: { sftp: 0 } });
    port = gw.ports.sftp!;
    dir = mkdtempSync(path.join(os.tmpdir(), 'svc-sftpx-'));
  });
  after(async () => {
    await gw?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('advertises copy-data and check-file-name/-handle', async () => {
    const u = await makeUser(gw);
    const { raw, version } = await Raw.open(port, u.username);
    raw.close();
    const text = version.toString('latin1');
    for (const name of ['copy-data', 'check-file-name', 'check-file-handle']) expect(text).to.include(name);
  });

  it('copies with OpenSSH sftp `cp` (copy-data) as one core copy: same bytes, a copy Action', async () => {
    const u = await makeUser(gw);
    const data = Buffer.alloc(700_000, 9);
    await put(gw.core, `${u.root}/src.bin`, data);
    await put(gw.core, `${u.root}/old.bin`, 'to be replaced');
    const r = await sftpBatch(port, u.username, pw, ['cp src.bin copy.bin', 'cp src.bin old.bin']);
    expect(r.code, r.stderr).to.equal(0);
    expect(r.stderr).to.not.match(/does not support/);
    for (const name of ['copy.bin', 'old.bin'])
      expect((await read(gw.core, `${u.root}/${name}`)).equals(data), name).to.equal(true);
    const acts = await actionsOf(gw.core, u.username);
    const copies = acts.filter((a) => a.action === 'copy');
    expect(copies.map((a) => [a.path, a.source, a.interface])).to.deep.equal([
      [`${u.root}/copy.bin`, `${u.root}/src.bin`, 'sftp'],
      [`${u.root}/old.bin`, `${u.root}/src.bin`, 'sftp'],
    ]);
    // No byte went through a staged upload: a copy, not a create or update.
    expect(
      acts.some((a) => (a.action === 'create' || a.action === 'update') && a.path.endsWith('.bin')),
    ).to.equal(false);
  });

  it('copies by writing when replacing needs more than write permission (read+write, no delete)', async () => {
    const u = await makeUser(gw, { grant_permission: 'read+write' });
    await put(gw.core, `${u.root}/a.txt`, 'new content');
    await put(gw.core, `${u.root}/b.txt`, 'old');
    const r = await sftpBatch(port, u.username, pw, ['cp a.txt b.txt']);
    expect(r.code, r.stderr).to.equal(0);
    expect((await read(gw.core, `${u.root}/b.txt`)).toString()).to.equal('new content');
    const acts = await actionsOf(gw.core, u.username);
    expect(acts.map((a) => [a.action, a.path])).to.deep.include(['update', `${u.root}/b.txt`]);
  });

  it('copy-data of a range goes through the staging file; later writes keep the copied bytes', async () => {
    const u = await makeUser(gw);
    await put(gw.core, `${u.root}/digits.txt`, '0123456789');
    const { raw } = await Raw.open(port, u.username);
    try {
      const src = await raw.handle('/digits.txt', READ);
      // A range: bytes 2..4 at offset 3 of a new file (the hole before it reads as zeros).
      const part = await raw.handle('/part.txt', WRITE_NEW);
      const copied = await raw.request(200, str('copy-data'), str(src), u64(2), u64(3), str(part), u64(3));
      expect(Raw.status(copied)).to.equal(0);
      expect(Raw.status(await raw.request(4, str(part)))).to.equal(0);
      // The whole file, then a WRITE on top: the copy is read into staging first.
      const whole = await raw.handle('/whole.txt', WRITE_NEW);
      expect(
        Raw.status(await raw.request(200, str('copy-data'), str(src), u64(0), u64(0), str(whole), u64(0))),
      ).to.equal(0);
      const fstat = await raw.request(8, str(whole));
      expect(fstat[0]).to.equal(105);
      expect(Number(fstat.readBigUInt64BE(9))).to.equal(10);
      expect(Raw.status(await raw.request(6, str(whole), u64(8), str('AB')))).to.equal(0);
      expect(Raw.status(await raw.request(4, str(whole)))).to.equal(0);
      // A read handle as the target is refused.
      const refused = await raw.request(200, str('copy-data'), str(src), u64(0), u64(0), str(src), u64(0));
      expect(Raw.status(refused)).to.equal(4);
      expect(Raw.status(await raw.request(4, str(src)))).to.equal(0);
    } finally {
      raw.close();
    }
    expect((await read(gw.core, `${u.root}/part.txt`)).toString('latin1')).to.equal('\x00\x00\x00234');
    expect((await read(gw.core, `${u.root}/whole.txt`)).toString()).to.equal('01234567AB');
  });

  it('answers check-file-name and check-file-handle with the stored md5 of the whole file', async () => {
    const u = await makeUser(gw);
    const data = Buffer.from('checksum me, WinSCP');
    const md5 = createHash('md5').update(data).digest();
    await put(gw.core, `${u.root}/sum.txt`, data);
    const { raw } = await Raw.open(port, u.username);
    try {
      const byName = await raw.request(
        200,
        str('check-file-name'),
        str('/sum.txt'),
        str('sha1,md5'),
        u64(0),
        u64(0),
        u32(0),
      );
      expect(byName[0], byName.toString('latin1')).to.equal(201);
      expect(byName.readUInt32BE(1), 'request id').to.equal(1);
      expect(byName.subarray(5).toString('latin1')).to.equal(
        `${str('md5').toString('latin1')}${md5.toString('latin1')}`,
      );
      const h = await raw.handle('/sum.txt', READ);
      const byHandle = await raw.request(
        200,
        str('check-file-handle'),
        str(h),
        str('md5'),
        u64(0),
        u64(0),
        u32(0),
      );
      expect(byHandle[0]).to.equal(201);
      expect(byHandle.subarray(byHandle.length - 16).equals(md5)).to.equal(true);
      // What the stored md5 cannot answer is unsupported, not computed: a range, another algorithm.
      const range = await raw.request(
        200,
        str('check-file-name'),
        str('/sum.txt'),
        str('md5'),
        u64(1),
        u64(0),
        u32(0),
      );
      expect(Raw.status(range)).to.equal(8);
      const sha = await raw.request(
        200,
        str('check-file-name'),
        str('/sum.txt'),
        str('sha256'),
        u64(0),
        u64(0),
        u32(0),
      );
      expect(Raw.status(sha)).to.equal(8);
      const missing = await raw.request(
        200,
        str('check-file-name'),
        str('/nope'),
        str('md5'),
        u64(0),
        u64(0),
        u32(0),
      );
      expect(Raw.status(missing)).to.equal(2);
    } finally {
      raw.close();
    }
  });

  it('logs in by keyboard-interactive, and records a failed one as failedlogin', async () => {
    const u = await makeUser(gw);
    const attempt = (answer: string) =>
      new Promise<{ ok: boolean; prompts: string[] }>((resolve) => {
        const client = new ssh2.Client();
        const prompts: string[] = [];
        client.on('keyboard-interactive', (_name, _instructions, _lang, asked, finish) => {
          prompts.push(...asked.map((p) => p.prompt));
          finish(asked.map(() => answer));
        });
        client.on('ready', () => {
          client.end();
          resolve({ ok: true, prompts });
        });
        client.on('error', () => resolve({ ok: false, prompts }));
        // No password and no key: ssh2 offers only keyboard-interactive (after `none`).
        client.connect({ host: '127.0.0.1', port, username: u.username, tryKeyboard: true });
      });
    const good = await attempt(PASSWORD);
    expect(good).to.deep.equal({ ok: true, prompts: ['Password: '] });
    const bad = await attempt('wrong-password');
    expect(bad.ok).to.equal(false);
    const acts = await actionsOf(gw.core, u.username);
    expect(acts.map((a) => [a.action, a.failure_type || null, a.interface])).to.deep.equal([
      ['login', null, 'sftp'],
      ['failedlogin', 'password_mismatch', 'sftp'],
    ]);
  });
});

describe(`staging sweep at start (${dbKind})`, function () {
  this.timeout(30_000);

  it('deletes temporary files a crash left in <data_dir>/staging, and keeps recent ones', async () => {
    const dataDir = mkdtempSync(path.join(os.tmpdir(), 'svc-sweep-'));
    const staging = path.join(dataDir, 'staging');
    mkdirSync(staging, { recursive: true });
    const stale = path.join(staging, 'crashed-upload.part');
    const recent = path.join(staging, 'live-upload.part');
    writeFileSync(stale, Buffer.alloc(1024, 1));
    writeFileSync(recent, Buffer.alloc(1024, 2));
    const dayAgo = new Date(Date.now() - 24 * 3600 * 1000);
    utimesSync(stale, dayAgo, dayAgo);
    const gw = await startTestGateway({ data_dir: dataDir });
    try {
      expect(existsSync(stale), 'the stale file').to.equal(false);
      // Another instance sharing the data dir may be writing this one.
      expect(existsSync(recent), 'the recent file').to.equal(true);
    } finally {
      await gw.stop();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
