/**
 * Requests take effect in the order the client sent them (protocols/sftp/order.ts), and a file open
 * for writing exists for its session as on a disk. Each test pipelines raw SFTP requests the way
 * sshfs does — several sent before any reply is read — and checks what a mount would see.
 */
import { expect } from 'chai';
import { Readable } from 'node:stream';
import { operatorPrincipal, type Core } from '../../../src/core/index.ts';
import { dbKind, startTestGateway, type TestGateway } from '../../helpers/gateway.ts';
import { captureLogs } from '../../helpers/logs.ts';
import { makeSftpUser, rawSftp, str, u32, u64, type RawSftp } from './clients.ts';

const PASSWORD = 'Sftp-order-3';
const FXP = {
  OPEN: 3,
  CLOSE: 4,
  READ: 5,
  WRITE: 6,
  LSTAT: 7,
  FSETSTAT: 10,
  OPENDIR: 11,
  READDIR: 12,
  REMOVE: 13,
  STAT: 17,
  RENAME: 18,
  EXTENDED: 200,
  STATUS: 101,
  HANDLE: 102,
  DATA: 103,
  NAME: 104,
  ATTRS: 105,
};
const F = { READ: 1, WRITE: 2, APPEND: 4, CREAT: 8, TRUNC: 0x10 };

/** Pipe sends requests without waiting and matches replies to them by id. */
class Pipe {
  private id = 1;
  private readonly replies = new Map<number, Buffer>();
  private constructor(private readonly s: RawSftp) {}

  static async open(port: number, username: string): Promise<Pipe> {
    const s = await rawSftp(port, username, PASSWORD);
    s.send(1, u32(3));
    await s.next();
    return new Pipe(s);
  }

  /** send writes one request now and returns its id. */
  send(type: number, ...fields: Buffer[]): number {
    const id = this.id++;
    this.s.send(type, Buffer.concat([u32(id), ...fields]));
    return id;
  }

  /** reply waits for the answer to request `id`. */
  async reply(id: number): Promise<Buffer> {
    while (!this.replies.has(id)) {
      const p = await this.s.next();
      this.replies.set(p.readUInt32BE(1), p);
    }
    const p = this.replies.get(id)!;
    this.replies.delete(id);
    return p;
  }

  async handle(id: number): Promise<Buffer> {
    const p = await this.reply(id);
    expect(p[0], `reply ${p.toString('latin1')}`).to.equal(FXP.HANDLE);
    return p.subarray(9, 9 + p.readUInt32BE(5));
  }

  async ok(id: number): Promise<void> {
    const p = await this.reply(id);
    expect([p[0], p.readUInt32BE(5)], p.toString('latin1')).to.deep.equal([FXP.STATUS, 0]);
  }

  /** size is the size in an ATTRS reply (the flags say size comes first). */
  async size(id: number): Promise<number> {
    const p = await this.reply(id);
    expect(p[0], p.toString('latin1')).to.equal(FXP.ATTRS);
    return Number(p.readBigUInt64BE(9));
  }

  close(): void {
    this.s.close();
  }
}

const open = (p: string, flags: number) => [str(p), u32(flags), u32(0)];
const write = (h: Buffer, offset: number, data: string) => [str(h), u64(offset), str(data)];

describe(`SFTP request order and open files (${dbKind})`, function () {
  this.timeout(60_000);
  let gw: TestGateway;
  let port: number;

  before(async () => {
    gw = await startTestGateway({ ports: { sftp: 0 } });
    port = gw.ports.sftp!;
  });
  after(async () => {
    await gw?.stop();
  });

  const makeUser = () => makeSftpUser(gw, PASSWORD);

  function files(core: Core) {
    return core.files.session({ ...operatorPrincipal(), interface: 'restapi' });
  }

  async function content(sitePath: string): Promise<string | null> {
    const f = files(gw.core);
    const found = await f.stat(sitePath).then(
      () => true,
      () => false,
    );
    if (!found) return null;
    const { stream } = await f.openRead(sitePath, { record: false });
    const chunks: Buffer[] = [];
    for await (const c of stream) chunks.push(c as Buffer);
    return Buffer.concat(chunks).toString();
  }

  it('answers an LSTAT sent right after OPEN(create) with the new empty file (sshfs `echo > f`)', async () => {
    const u = await makeUser();
    const c = await Pipe.open(port, u.username);
    try {
      for (let i = 0; i < 5; i++) {
        const name = `/new-${i}.txt`;
        const o = c.send(FXP.OPEN, ...open(name, F.WRITE | F.CREAT | F.TRUNC));
        const l = c.send(FXP.LSTAT, str(name));
        const h = await c.handle(o);
        expect(await c.size(l), 'LSTAT of the file just opened').to.equal(0);
        const w = c.send(FXP.WRITE, ...write(h, 0, `hi ${i}\n`));
        const s = c.send(FXP.STAT, str(name));
        const cl = c.send(FXP.CLOSE, str(h));
        await c.ok(w);
        expect(await c.size(s), 'STAT after WRITE, before CLOSE').to.equal(5);
        await c.ok(cl);
        expect(await content(`${u.root}/new-${i}.txt`)).to.equal(`hi ${i}\n`);
      }
    } finally {
      c.close();
    }
  });

  it('keeps both writes of `printf hello > f; echo more >> f` sent back to back, five times', async () => {
    const u = await makeUser();
    await files(gw.core).write(`${u.root}/f.txt`, Readable.from([Buffer.from('old content\n')]));
    const c = await Pipe.open(port, u.username);
    try {
      for (let i = 0; i < 5; i++) {
        const h1 = await c.handle(c.send(FXP.OPEN, ...open('/f.txt', F.WRITE | F.CREAT | F.TRUNC)));
        // WRITE, CLOSE and the append's OPEN leave before any reply is read.
        const w1 = c.send(FXP.WRITE, ...write(h1, 0, `hello ${i}\n`));
        const c1 = c.send(FXP.CLOSE, str(h1));
        const o2 = c.send(FXP.OPEN, ...open('/f.txt', F.WRITE | F.APPEND));
        await c.ok(w1);
        await c.ok(c1);
        const h2 = await c.handle(o2);
        const w2 = c.send(FXP.WRITE, ...write(h2, 8, 'more\n'));
        const c2 = c.send(FXP.CLOSE, str(h2));
        // A read sent right after the CLOSE sees what the CLOSE committed.
        const o3 = c.send(FXP.OPEN, ...open('/f.txt', F.READ));
        await c.ok(w2);
        await c.ok(c2);
        const h3 = await c.handle(o3);
        const data = await c.reply(c.send(FXP.READ, str(h3), u64(0), u32(1000)));
        expect(data[0]).to.equal(FXP.DATA);
        expect(data.subarray(9).toString()).to.equal(`hello ${i}\nmore\n`);
        await c.ok(c.send(FXP.CLOSE, str(h3)));
        expect(await content(`${u.root}/f.txt`)).to.equal(`hello ${i}\nmore\n`);
      }
    } finally {
      c.close();
    }
  });

  it('keeps both writes when the append opens before the first CLOSE (sshfs with a lagging release)', async () => {
    const u = await makeUser();
    await files(gw.core).write(`${u.root}/g.txt`, Readable.from([Buffer.from('old content\n')]));
    const c = await Pipe.open(port, u.username);
    try {
      for (let i = 0; i < 3; i++) {
        const h1 = await c.handle(c.send(FXP.OPEN, ...open('/g.txt', F.WRITE | F.CREAT | F.TRUNC)));
        await c.ok(c.send(FXP.WRITE, ...write(h1, 0, `hello ${i}\n`)));
        const h2 = await c.handle(c.send(FXP.OPEN, ...open('/g.txt', F.WRITE | F.APPEND)));
        await c.ok(c.send(FXP.WRITE, ...write(h2, 8, 'more\n')));
        await c.ok(c.send(FXP.CLOSE, str(h1)));
        // Still open through h2: the session sees both writes, nobody else sees a half file yet.
        expect(await c.size(c.send(FXP.STAT, str('/g.txt')))).to.equal(13);
        await c.ok(c.send(FXP.CLOSE, str(h2)));
        expect(await content(`${u.root}/g.txt`)).to.equal(`hello ${i}\nmore\n`);
      }
    } finally {
      c.close();
    }
  });

  it('lists a file created and not yet closed, and reads back what a read-write handle wrote', async () => {
    const u = await makeUser();
    const c = await Pipe.open(port, u.username);
    try {
      const h = await c.handle(c.send(FXP.OPEN, ...open('/db.sqlite', F.READ | F.WRITE | F.CREAT)));
      await c.ok(c.send(FXP.WRITE, ...write(h, 0, 'page one|page two')));
      const back = await c.reply(c.send(FXP.READ, str(h), u64(5), u32(3)));
      expect(back.subarray(9).toString()).to.equal('one');
      const d = await c.handle(c.send(FXP.OPENDIR, str('/')));
      const names = await c.reply(c.send(FXP.READDIR, str(d)));
      expect(names[0]).to.equal(FXP.NAME);
      expect(names.toString('latin1')).to.include('db.sqlite');
      const end = await c.reply(c.send(FXP.READDIR, str(d)));
      expect([end[0], end.readUInt32BE(5)]).to.deep.equal([FXP.STATUS, 1]);
      // Nobody else sees it before the CLOSE: the namespace has no half-written file.
      expect(await content(`${u.root}/db.sqlite`)).to.equal(null);
      await c.ok(c.send(FXP.CLOSE, str(h)));
      expect(await content(`${u.root}/db.sqlite`)).to.equal('page one|page two');
    } finally {
      c.close();
    }
  });

  it('answers 64 writes of 255 KiB sent at once, last first, then 64 reads of them sent at once', async () => {
    // OpenSSH's sftp pipelines 64 requests of our limits@openssh.com size: 16 MiB, four times
    // what the session lets run at once. The rest wait their turn; none is lost or reordered.
    const u = await makeUser();
    const c = await Pipe.open(port, u.username);
    const BLOCK = 255 * 1024;
    const blocks = Array.from({ length: 64 }, (_, i) => Buffer.alloc(BLOCK, i + 1));
    try {
      const h = await c.handle(c.send(FXP.OPEN, ...open('/big.bin', F.READ | F.WRITE | F.CREAT)));
      const writes = blocks
        .map((_, i) => 63 - i)
        .map((i) => c.send(FXP.WRITE, str(h), u64(i * BLOCK), str(blocks[i]!)));
      const reads = blocks.map((_, i) => c.send(FXP.READ, str(h), u64(i * BLOCK), u32(BLOCK)));
      for (const id of writes) await c.ok(id);
      for (const [i, id] of reads.entries()) {
        const p = await c.reply(id);
        expect(p[0], `read ${i}: ${p.subarray(0, 40).toString('latin1')}`).to.equal(FXP.DATA);
        expect(p.subarray(9).equals(blocks[i]!), `read ${i} gives block ${i}`).to.equal(true);
      }
      await c.ok(c.send(FXP.CLOSE, str(h)));
      // The blocks' bytes (1 to 64) are ASCII, so the stored file compares as text.
      expect(await content(`${u.root}/big.bin`)).to.equal(Buffer.concat(blocks).toString());
    } finally {
      c.close();
    }
  });

  it('renames an open new file (save to a temporary name, rename over) and drops a removed one', async () => {
    const u = await makeUser();
    await files(gw.core).write(`${u.root}/doc.txt`, Readable.from([Buffer.from('version 1')]));
    const c = await Pipe.open(port, u.username);
    try {
      const h = await c.handle(c.send(FXP.OPEN, ...open('/.doc.txt.tmp', F.WRITE | F.CREAT | F.TRUNC)));
      const w = c.send(FXP.WRITE, ...write(h, 0, 'version 2'));
      // posix-rename over the old file while the temporary file is still open, then CLOSE.
      const r = c.send(FXP.EXTENDED, str('posix-rename@openssh.com'), str('/.doc.txt.tmp'), str('/doc.txt'));
      const s = c.send(FXP.STAT, str('/doc.txt'));
      const cl = c.send(FXP.CLOSE, str(h));
      await c.ok(w);
      await c.ok(r);
      expect(await c.size(s)).to.equal(9);
      await c.ok(cl);
      expect(await content(`${u.root}/doc.txt`)).to.equal('version 2');
      expect(await content(`${u.root}/.doc.txt.tmp`)).to.equal(null);

      const h2 = await c.handle(c.send(FXP.OPEN, ...open('/scratch', F.WRITE | F.CREAT | F.TRUNC)));
      await c.ok(c.send(FXP.WRITE, ...write(h2, 0, 'temporary')));
      await c.ok(c.send(FXP.REMOVE, str('/scratch')));
      await c.ok(c.send(FXP.CLOSE, str(h2)));
      expect(await content(`${u.root}/scratch`)).to.equal(null);
    } finally {
      c.close();
    }
  });

  it('logs a refused request at info with user, path and status, and not a missing name', async () => {
    const u = await makeUser();
    await gw.core.users.create(operatorPrincipal(), {
      username: `${u.username}ro`,
      password: PASSWORD,
      user_root: `${u.root}/`,
      grant_permission: 'read',
    });
    const capture = captureLogs(gw.core);
    const c = await Pipe.open(port, `${u.username}ro`);
    try {
      const denied = await c.reply(c.send(FXP.OPEN, ...open('/nope.txt', F.WRITE | F.CREAT)));
      expect([denied[0], denied.readUInt32BE(5)]).to.deep.equal([FXP.STATUS, 3]);
      const missing = await c.reply(c.send(FXP.STAT, str('/missing.txt')));
      expect(missing.readUInt32BE(5)).to.equal(2);
    } finally {
      c.close();
      capture.stop();
    }
    const refused = capture.lines.filter((l) => l.message === 'sftp request refused');
    expect(refused.map((l) => [l.level, l.user, l.request, l.path, l.status])).to.deep.equal([
      ['info', `${u.username}ro`, 'open', '/nope.txt', 'PERMISSION_DENIED'],
    ]);
  });

  it('keeps a time set on a file opened for writing and closed unwritten (GNU touch -d over sshfs)', async () => {
    const u = await makeUser();
    await files(gw.core).write(`${u.root}/t.txt`, Readable.from([Buffer.from('kept')]));
    const c = await Pipe.open(port, u.username);
    try {
      const h = await c.handle(c.send(FXP.OPEN, ...open('/t.txt', F.WRITE)));
      const when = Date.UTC(2019, 0, 1) / 1000;
      // FSETSTAT with ACMODTIME (0x8): atime, mtime.
      await c.ok(c.send(FXP.FSETSTAT, str(h), u32(8), u32(when), u32(when)));
      await c.ok(c.send(FXP.CLOSE, str(h)));
    } finally {
      c.close();
    }
    const e = await files(gw.core).stat(`${u.root}/t.txt`);
    expect(e.mtime.toISOString()).to.equal('2019-01-01T00:00:00.000Z');
    expect(await content(`${u.root}/t.txt`)).to.equal('kept');
  });

  it('answers hardlink@openssh.com with "operation unsupported"', async () => {
    const u = await makeUser();
    await files(gw.core).write(`${u.root}/a`, Readable.from([Buffer.from('a')]));
    const c = await Pipe.open(port, u.username);
    try {
      const p = await c.reply(c.send(FXP.EXTENDED, str('hardlink@openssh.com'), str('/a'), str('/b')));
      expect([p[0], p.readUInt32BE(5)]).to.deep.equal([FXP.STATUS, 8]);
      expect(p.toString('latin1')).to.include('Hard links are not supported');
    } finally {
      c.close();
    }
  });
});
