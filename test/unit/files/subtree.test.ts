/**
 * A folder's move, copy and delete take exactly what is inside it (neighbours whose names sort
 * right beside `a/` stay put: `a0`, `a.txt`, `a-b/…`, `ab/…`), with its dead properties, and find
 * it through the path indexes: a byte range, never a read of every row of files, dav_properties
 * or dav_locks (a substr test read the whole files table for every folder moved).
 */
import { Readable } from 'node:stream';
import { expect } from 'chai';
import { operatorPrincipal } from '../../../src/core/index.ts';
import { FileEntity } from '../../../src/db/entities.ts';
import { dbKind, openTestCore, type TestCore } from '../../helpers/gateway.ts';
import { dbOf } from '../../helpers/internals.ts';
import { queriesDuring, wholeReads, type Statement } from '../../helpers/plans.ts';

const TABLES = ['files', 'dav_properties', 'dav_locks'];

describe(`folder move, copy and delete (${dbKind})`, function () {
  this.timeout(30_000);
  let t: TestCore;
  const session = () => t.core.files.session(operatorPrincipal());
  const put = (p: string) => session().write(p, Readable.from([Buffer.from(p)]));
  /** paths lists every file and folder path of the site, sorted. */
  const paths = async () => {
    const out: string[] = [];
    const walk = async (folder: string): Promise<void> => {
      for await (const page of session().listAll(folder))
        for (const e of page) {
          out.push(e.path);
          if (e.type === 'directory') await walk(e.path);
        }
    };
    await walk('');
    return out.sort();
  };

  before(async () => {
    t = await openTestCore();
    for (const f of ['a/sub', 'a-b', 'ab']) await session().mkdir(f, { parents: true });
    for (const f of ['a/one.txt', 'a/sub/twö 🎉.txt', 'a0', 'a.txt', 'a-b/c.txt', 'ab/c.txt']) await put(f);
    await t.core.dav.properties.patch(session(), 'a/sub', [
      { op: 'set', namespace: 'urn:x', name: 'color', value: 'red' },
    ]);
    await t.core.dav.properties.patch(session(), 'a', [
      { op: 'set', namespace: 'urn:x', name: 'kind', value: 'top' },
    ]);
  });
  after(async () => t.close());

  it('moves, copies and deletes only what is inside the folder, through indexes', async () => {
    const statements: Statement[] = [];
    const keep = async (run: () => Promise<unknown>) =>
      statements.push(...(await queriesDuring(t.core, run)));
    await keep(() => session().move('a', 'moved'));
    const neighbours = ['a-b', 'a-b/c.txt', 'a.txt', 'a0', 'ab', 'ab/c.txt'];
    const moved = ['moved', 'moved/one.txt', 'moved/sub', 'moved/sub/twö 🎉.txt'];
    expect(await paths()).to.deep.equal([...neighbours, ...moved].sort());
    /** props are the dead properties of `folder` and of its subfolder `sub`. */
    const props = async (folder: string) => {
      const got = await t.core.dav.properties.getMany(session(), [folder, `${folder}/sub`]);
      return [got.get(folder), got.get(`${folder}/sub`)];
    };
    const both = [
      [{ namespace: 'urn:x', name: 'kind', value: 'top' }],
      [{ namespace: 'urn:x', name: 'color', value: 'red' }],
    ];
    expect(await props('moved')).to.deep.equal(both);

    await keep(() => session().copy('moved', 'copied'));
    const copied = moved.map((p) => p.replace(/^moved/, 'copied'));
    expect(await paths()).to.deep.equal([...neighbours, ...moved, ...copied].sort());
    expect(await props('copied')).to.deep.equal(both);
    // A copy is a file of its own: same bytes (the blob is shared), its own row.
    const read = async (p: string) => {
      const chunks: Buffer[] = [];
      for await (const c of (await session().openRead(p)).stream) chunks.push(c as Buffer);
      return Buffer.concat(chunks).toString();
    };
    expect(await read('copied/sub/twö 🎉.txt')).to.equal('a/sub/twö 🎉.txt');
    expect((await session().stat('copied/sub/twö 🎉.txt')).size).to.equal(
      Buffer.byteLength('a/sub/twö 🎉.txt'),
    );

    await keep(() => session().remove('moved', { recursive: true }));
    expect(await paths()).to.deep.equal([...neighbours, ...copied].sort());
    expect(await props('copied')).to.deep.equal(both);
    expect(await read('copied/one.txt')).to.equal('a/one.txt');

    expect(
      statements.filter((s) => /\b(files|dav_properties|dav_locks)\b/.test(s.query)).length,
    ).to.be.greaterThan(3);
    const whole = await wholeReads(t.core, statements, TABLES);
    expect(whole, whole.join('\n')).to.deep.equal([]);
  });

  it('deletes a folder of 20,000 files at once and marks their blobs as garbage', async () => {
    // PostgreSQL took an advisory lock per blob and ran out of its lock table ("out of shared
    // memory"): nothing was deleted. The rows are made directly (their blobs need not exist).
    const n = 20_000;
    await session().mkdir('many');
    await dbOf(t.core).work(async (em) => {
      for (let i = 0; i < n; i += 500)
        await em.insert(
          FileEntity,
          Array.from({ length: 500 }, (_, k) => ({
            path: `many/f${i + k}`,
            parent: 'many',
            name: `f${i + k}`,
            type: 'file' as const,
            size: 1,
            mtime: new Date(),
            md5: null,
            crc32: null,
            blob_id: `${String(i + k).padStart(8, '0')}${'b'.repeat(24)}`,
          })),
        );
    });
    await session().remove('many', { recursive: true });
    const count = async (text: string) =>
      Number(((await dbOf(t.core).read((em) => em.query(text))) as { n: number | string }[])[0]!.n);
    expect(await count("SELECT COUNT(*) AS n FROM files WHERE path LIKE 'many%'")).to.equal(0);
    // Reclaimed in the background a batch of 500 at a time: nearly all are still marked.
    expect(
      await count("SELECT COUNT(*) AS n FROM blob_garbage WHERE blob_id LIKE '%bbbbbbbbbbbbbbbbbbbbbbbb'"),
    )
      .to.be.at.least(n - 1000)
      .and.at.most(n);
  });
});
