/**
 * Pending versions (issue 20), the core's rules: a cut upload keeps what arrived for its uploader
 * only, a resume at its size completes the file atomically with the right checksums, an upload from
 * offset 0 drops it, two users keep their own, and expiry sweeps the bytes.
 */
import { createHash } from 'node:crypto';
import { PassThrough, Readable } from 'node:stream';
import { expect } from 'chai';
import { operatorPrincipal, type Principal } from '../../../src/core/index.ts';
import { FileEntity, PendingVersionEntity } from '../../../src/db/entities.ts';
import { dbKind, openTestCore, type TestCore } from '../../helpers/gateway.ts';
import { dbOf, filesOf } from '../../helpers/internals.ts';
import { expectError, principalFor, unique } from '../core/fixtures.ts';

const md5 = (b: Buffer) => createHash('md5').update(b).digest('hex');
const pattern = (n: number, seed = 7) => {
  const b = Buffer.alloc(n);
  for (let i = 0; i < n; i++) b[i] = (i * 31 + seed + (i >> 10)) & 0xff;
  return b;
};

describe(`pending versions of cut uploads (${dbKind})`, () => {
  let t: TestCore;
  let alice: Principal;
  let bob: Principal;
  before(async () => {
    t = await openTestCore();
    const op = operatorPrincipal();
    const make = async () =>
      (await t.core.users.create(op, { username: unique('p'), password: 'password-1', site_admin: true })).id;
    alice = await principalFor(t.core, await make(), 'ftp');
    bob = await principalFor(t.core, await make(), 'sftp');
    // Both see the site root (a site admin's user_root is empty).
  });
  after(async () => t.close());

  const as = (p: Principal) => t.core.files.session(p);
  const read = async (p: Principal, path: string) => {
    const d = await as(p).openRead(path, { record: false });
    const chunks: Buffer[] = [];
    for await (const c of d.stream) chunks.push(c as Buffer);
    return Buffer.concat(chunks);
  };
  const pendingRows = () => dbOf(t.core).read((em) => em.find(PendingVersionEntity));

  /** cut sends `data` then breaks the body, as a reset data connection does; resolves with the error. */
  const cut = async (p: Principal, path: string, data: Buffer, opts: { offset?: number } = {}) => {
    const body = new PassThrough();
    const done = as(p)
      .write(path, body, opts)
      .then(
        () => null,
        (err: unknown) => err,
      );
    body.write(data);
    await new Promise((r) => setTimeout(r, 50));
    body.destroy(new Error('ECONNRESET'));
    return done;
  };

  it('keeps a cut upload for its uploader only; a resume at its size completes it (the 12-byte case)', async () => {
    const path = unique('over12-') + '.bin';
    await as(bob).write(path, Readable.from([Buffer.from('old content!')]));
    const whole = pattern(300_000);
    const err = await cut(alice, path, whole.subarray(0, 100_000));
    expect(String(err)).to.match(/cut off/);
    // alice sees the pending size; bob, and the bytes, stay the old 12.
    expect((await as(alice).stat(path)).size).to.equal(100_000);
    expect((await as(bob).stat(path)).size).to.equal(12);
    expect((await read(bob, path)).toString()).to.equal('old content!');
    const listed = (
      await as(alice).list('', { sort: 'path', direction: 'asc', offset: 0, limit: 1000 })
    ).find((e) => e.path === path);
    expect(listed?.size).to.equal(100_000);
    // What lftp `put -c` does: SIZE, then REST 100000 + STOR of the rest.
    const entry = await as(alice).write(path, Readable.from([whole.subarray(100_000)]), { offset: 100_000 });
    expect(entry.size).to.equal(whole.length);
    expect(entry.md5).to.equal(md5(whole));
    expect(md5(await read(bob, path))).to.equal(md5(whole));
    expect((await pendingRows()).filter((r) => r.path === path)).to.deep.equal([]);
  });

  it('a cut of a new file is no file to others; APPE resumes it; a second cut moves the pending size on', async () => {
    const path = unique('new-') + '.bin';
    const whole = pattern(200_000, 3);
    await cut(alice, path, whole.subarray(0, 50_000));
    await expectError(as(bob).stat(path), 'not-found/file-not-found');
    await expectError(as(alice).openRead(path), 'not-found/file-not-found');
    await cut(alice, path, whole.subarray(50_000, 120_000), { offset: 50_000 });
    expect((await as(alice).stat(path)).size).to.equal(120_000);
    expect((await pendingRows()).filter((r) => r.path === path)).to.have.length(1);
    await as(alice).write(path, Readable.from([whole.subarray(120_000)]), { append: true });
    expect(md5(await read(bob, path))).to.equal(md5(whole));
  });

  it('pending versions of new files are listed once, after the rows, page by page', async () => {
    const folder = unique('paged-');
    await as(alice).mkdir(folder);
    for (const n of ['a', 'b', 'c']) await as(alice).write(`${folder}/${n}`, Readable.from([Buffer.from(n)]));
    for (const n of ['p1', 'p2']) await cut(alice, `${folder}/${n}`, pattern(100));
    const names: string[] = [];
    for (let offset = 0; offset < 20; offset += 2) {
      const page = await as(alice).list(folder, { sort: 'path', direction: 'asc', offset, limit: 2 });
      names.push(...page.map((e) => e.path.slice(folder.length + 1)));
    }
    expect(names).to.deep.equal(['a', 'b', 'c', 'p1', 'p2']);
    const bobs = await as(bob).list(folder, { sort: 'path', direction: 'asc', offset: 0, limit: 100 });
    expect(bobs.map((e) => e.path.slice(folder.length + 1))).to.deep.equal(['a', 'b', 'c']);
  });

  it('a new upload from offset 0 drops the pending version; two users keep their own', async () => {
    const path = unique('two-') + '.bin';
    await cut(alice, path, pattern(40_000));
    await cut(bob, path, pattern(70_000));
    expect((await as(alice).stat(path)).size).to.equal(40_000);
    expect((await as(bob).stat(path)).size).to.equal(70_000);
    const [alices] = (await pendingRows()).filter((r) => r.path === path && r.user_id === alice.user!.id);
    await as(alice).write(path, Readable.from([Buffer.from('fresh')]));
    expect((await as(alice).stat(path)).size).to.equal(5);
    // The bytes of the version dropped go with it (on PostgreSQL they once stayed on disk for good).
    await filesOf(t.core).blobs.idle();
    expect(await filesOf(t.core).store.size(alices!.blob_id)).to.equal(null);
    // bob's pending version stays until it completes or expires: he still sees his own size.
    expect((await as(bob).stat(path)).size).to.equal(70_000);
    const rest = pattern(10_000, 9);
    await as(bob).write(path, Readable.from([rest]), { offset: 70_000 });
    expect(md5(await read(alice, path))).to.equal(md5(Buffer.concat([pattern(70_000), rest])));
  });

  it('a resume must start at the pending size (WebDAV Content-Range) and a wrong one loses nothing', async () => {
    const path = unique('range-') + '.bin';
    await cut(alice, path, pattern(30_000));
    await expectError(
      as(alice).write(path, Readable.from([Buffer.from('x')]), { offset: 29_999, resume: true }),
      'processing-failure/invalid-range',
    );
    await expectError(
      as(bob).write(path, Readable.from([Buffer.from('x')]), { offset: 10, resume: true }),
      'processing-failure/invalid-range',
    );
    expect((await as(alice).stat(path)).size).to.equal(30_000);
  });

  it('an SFTP write cut with a hole keeps only the bytes before the hole; reput-style resume completes it', async () => {
    const path = unique('staged-') + '.bin';
    const whole = pattern(96 * 1024, 5);
    const staged = await as(alice).stage(path, { truncate: true });
    await staged.writeAt(0, whole.subarray(0, 32 * 1024));
    await staged.writeAt(64 * 1024, whole.subarray(64 * 1024)); // 32..64 KiB never arrived
    expect(await staged.suspend()).to.equal(true);
    expect((await as(alice).stat(path)).size).to.equal(32 * 1024);
    const again = await as(alice).stage(path, { truncate: false });
    expect(again.size).to.equal(32 * 1024);
    await again.writeAt(32 * 1024, whole.subarray(32 * 1024));
    const entry = await again.commit();
    expect(entry.md5).to.equal(md5(whole));
    expect(md5(await read(bob, path))).to.equal(md5(whole));
  });

  it('an SFTP write left open while the same file was sent again and completed is not kept (rclone)', async () => {
    const path = unique('stale-') + '.bin';
    const whole = pattern(6655, 9);
    // rclone's first attempt: a handle that gets some bytes, then is left open (never closed).
    const first = await as(alice).stage(path, { truncate: true });
    await first.writeAt(0, whole.subarray(0, 4096));
    // Its retry on a new handle completes the file.
    const retry = await as(alice).stage(path, { truncate: true });
    await retry.writeAt(0, whole);
    expect((await retry.commit()).md5).to.equal(md5(whole));
    // The session ends: the first handle is cut, but the file it would resume is newer.
    expect(await first.suspend()).to.equal(false);
    const seen = await as(alice).stat(path);
    expect([seen.size, seen.md5]).to.deep.equal([whole.length, md5(whole)]);
    expect((await pendingRows()).filter((r) => r.path === path)).to.deep.equal([]);
  });

  it('deleting the path gives up the pending version of the caller only', async () => {
    const path = unique('rm-') + '.bin';
    await cut(alice, path, pattern(1000));
    await cut(bob, path, pattern(2000));
    await as(alice).remove(path);
    await expectError(as(alice).stat(path), 'not-found/file-not-found');
    expect((await as(bob).stat(path)).size).to.equal(2000);
    await expectError(as(alice).remove(path), 'not-found/file-not-found');
  });

  it("a pending version counts in its uploader's quota figures (RFC 4331 used bytes), not in others'", async () => {
    const path = unique('quota-') + '.bin';
    const before = await t.core.dav.properties.quota(as(alice));
    const bobBefore = await t.core.dav.properties.quota(as(bob));
    await cut(alice, path, pattern(54_321));
    expect((await t.core.dav.properties.quota(as(alice))).used - before.used).to.equal(54_321);
    expect((await t.core.dav.properties.quota(as(bob))).used).to.equal(bobBefore.used);
  });

  it('site admins list pending versions; other users may not', async () => {
    const path = unique('listed-') + '.bin';
    await cut(alice, path, pattern(12_345));
    const listed = await t.core.files.pendingVersions(operatorPrincipal());
    const mine = listed.find((v) => v.path === path);
    expect(mine).to.include({ username: alice.user!.username, size: 12_345, interface: 'ftp' });
    const plain = await principalFor(
      t.core,
      (await t.core.users.create(operatorPrincipal(), { username: unique('plain'), password: 'password-1' }))
        .id,
    );
    await expectError(t.core.files.pendingVersions(plain), 'not-authorized/site-admin-required');
  });

  it('expiry sweeps a pending version and its bytes', async () => {
    const path = unique('old-') + '.bin';
    await cut(alice, path, pattern(20_000));
    const [row] = (await pendingRows()).filter((r) => r.path === path);
    expect(row).to.not.equal(undefined);
    await dbOf(t.core).work((em) =>
      em.update(PendingVersionEntity, { id: row!.id }, { expires_at: new Date(Date.now() - 1000) }),
    );
    // Expired: no longer seen, even before the sweep: not by stat, nor in a listing.
    await expectError(as(alice).stat(path), 'not-found/file-not-found');
    const listed = await as(alice).list('', { sort: 'path', direction: 'asc', offset: 0, limit: 1000 });
    expect(listed.map((e) => e.path)).to.not.include(path);
    const streamed: string[] = [];
    for await (const page of as(alice).listAll('', 500)) streamed.push(...page.map((e) => e.path));
    expect(streamed).to.not.include(path);
    await filesOf(t.core).collectGarbage();
    await filesOf(t.core).blobs.idle();
    expect((await pendingRows()).filter((r) => r.path === path)).to.deep.equal([]);
    expect(await filesOf(t.core).store.size(row!.blob_id)).to.equal(null);
  });

  it('listAll streams a big folder page by page as list shows it: pending sizes, new pending files last', async () => {
    const folder = unique('big-');
    const op = operatorPrincipal();
    await t.core.namespace.mkdir(op, folder);
    // 1,234 files in a shuffled creation order, so name order is not insertion order.
    const names = Array.from(
      { length: 1234 },
      (_, i) => `f${String((i * 7919) % 1234).padStart(5, '0')}.txt`,
    );
    await dbOf(t.core).work(async (em) => {
      for (const name of names)
        await em.insert(FileEntity, {
          path: `${folder}/${name}`,
          parent: folder,
          name,
          type: 'file',
          size: 1,
          mtime: new Date(),
          md5: null,
          crc32: null,
          blob_id: null,
        });
    });
    await as(alice).write(`${folder}/f00010.txt`, Readable.from([Buffer.from('x')]));
    await cut(alice, `${folder}/f00010.txt`, pattern(5000));
    await cut(alice, `${folder}/zz-new.bin`, pattern(7000));
    await cut(alice, `${folder}/aa-new.bin`, pattern(6000));
    const all: { path: string; size: number | null }[] = [];
    const sizes: number[] = [];
    for await (const page of as(alice).listAll(folder, 100)) {
      sizes.push(page.length);
      all.push(...page.map((e) => ({ path: e.path, size: e.size })));
    }
    const paged: { path: string; size: number | null }[] = [];
    for (let offset = 0; ; offset += 100) {
      const page = await as(alice).list(folder, { sort: 'path', direction: 'asc', offset, limit: 100 });
      paged.push(...page.map((e) => ({ path: e.path, size: e.size })));
      if (page.length < 100) break;
    }
    expect(all).to.deep.equal(paged);
    expect(all).to.have.length(1236);
    expect(sizes.every((n) => n <= 100)).to.equal(true);
    expect(all.find((e) => e.path === `${folder}/f00010.txt`)?.size).to.equal(5000);
    // New files' pending versions after the rows, in name order; bob sees neither.
    expect(all.slice(-2).map((e) => e.path)).to.deep.equal([`${folder}/aa-new.bin`, `${folder}/zz-new.bin`]);
    let bobs = 0;
    for await (const page of as(bob).listAll(folder, 100)) bobs += page.length;
    expect(bobs).to.equal(1234);
  });
});
