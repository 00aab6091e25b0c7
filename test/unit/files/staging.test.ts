import { createHash } from 'node:crypto';
import { mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import { operatorPrincipal } from '../../../src/core/index.ts';
import { SPARES } from '../../../src/core/files/spares.ts';
import { dbKind, openTestCore, type TestCore } from '../../helpers/gateway.ts';

const md5 = (b: Buffer) => createHash('md5').update(b).digest('hex');

/** filesIn lists the files (not folders) in `dir` and its subfolders, by path relative to it. */
function filesIn(dir: string): string[] {
  try {
    return (readdirSync(dir, { recursive: true }) as string[]).filter((f) =>
      statSync(path.join(dir, f)).isFile(),
    );
  } catch {
    return [];
  }
}

describe(`staged writes (${dbKind})`, () => {
  let t: TestCore;
  before(async () => {
    t = await openTestCore();
  });
  after(async () => t.close());

  const session = () => t.core.files.session(operatorPrincipal());
  const allStagingFiles = () => filesIn(path.join(t.config.data_dir, 'staging'));
  // The staging folder also holds up to SPARES empty files made ahead for the next uploads
  // (spares.ts): an upload's own file has bytes.
  const stagingFiles = () =>
    allStagingFiles().filter((f) => statSync(path.join(t.config.data_dir, 'staging', f)).size > 0);
  const download = async (p: string) => {
    const d = await session().openRead(p, { record: false });
    const chunks: Buffer[] = [];
    for await (const c of d.stream) chunks.push(c as Buffer);
    return { entry: d.entry, bytes: Buffer.concat(chunks) };
  };

  it('in-order writes commit with their md5 and crc32 and leave no staging file', async () => {
    const data = Buffer.from('0123456789'.repeat(10_000));
    const staged = await session().stage('inorder.bin', { truncate: true });
    for (let at = 0; at < data.length; at += 32 * 1024)
      await staged.writeAt(at, data.subarray(at, at + 32 * 1024));
    const entry = await staged.commit();
    expect(entry.md5).to.equal(md5(data));
    expect(entry.crc32).to.match(/^[0-9a-f]{8}$/);
    expect(stagingFiles()).to.deep.equal([]);
    const got = await download('inorder.bin');
    expect(md5(got.bytes)).to.equal(md5(data));
    expect(got.entry.crc32).to.equal(entry.crc32);
  });

  it('an upload after the staging and blob folders were removed behind its back makes them again', async () => {
    const first = await session().stage('folders-1.bin', { truncate: true });
    await first.writeAt(0, Buffer.from('first'));
    await first.commit();
    // Both folders are made once per process; an operator's cleanup may remove them meanwhile.
    rmSync(path.join(t.config.data_dir, 'staging'), { recursive: true, force: true });
    rmSync(path.join(t.config.data_dir, 'blobs'), { recursive: true, force: true });
    const data = Buffer.from('second upload');
    const second = await session().stage('folders-2.bin', { truncate: true });
    await second.writeAt(0, data);
    const entry = await second.commit();
    expect(entry.md5).to.equal(md5(data));
    expect((await download('folders-2.bin')).bytes.toString()).to.equal('second upload');
    expect(stagingFiles()).to.deep.equal([]);
  });

  it('takes the files made ahead, keeps SPARES of them, and removes them when the core stops', async () => {
    // A data dir of the test's own, so it can be looked at after the core stopped.
    const dataDir = mkdtempSync(path.join(os.tmpdir(), 'svc-spares-'));
    const staging = path.join(dataDir, 'staging');
    const files = () => filesIn(staging).sort();
    const made = async (n: number) => {
      for (let i = 0; i < 100 && files().length < n; i++) await new Promise((r) => setTimeout(r, 20));
      return files();
    };
    const own = await openTestCore({ data_dir: dataDir });
    try {
      const ownSession = () => own.core.files.session(operatorPrincipal());
      const first = await ownSession().stage('ahead-1.bin', { truncate: true });
      await first.writeAt(0, Buffer.from('first'));
      await first.commit();
      // The first upload made its file on the spot; the next ones are made in the thread pool.
      const ahead = await made(SPARES);
      expect(ahead).to.have.length(SPARES);
      for (const f of ahead) expect(statSync(path.join(staging, f)).size).to.equal(0);
      const second = await ownSession().stage('ahead-2.bin', { truncate: true });
      await second.writeAt(0, Buffer.from('second'));
      const written = ahead.filter((f) => statSync(path.join(staging, f)).size > 0);
      expect(written, 'made-ahead files the second upload writes').to.have.length(1);
      // Opened for reading too: SQLite on an sshfs mount reads back what it wrote before the close.
      expect((await second.readAt(0, 6)).toString()).to.equal('second');
      const entry = await second.commit();
      expect(entry.md5).to.equal(md5(Buffer.from('second')));
      const read = await ownSession().openRead('ahead-2.bin', { record: false });
      expect(Buffer.concat((await read.stream.toArray()) as Buffer[]).toString()).to.equal('second');
      expect(await made(SPARES)).to.have.length(SPARES);
    } finally {
      await own.close();
    }
    try {
      expect(files(), 'the staging folder after the core stopped').to.deep.equal([]);
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });

  it('out-of-order and overlapping writes still commit the right bytes and hashes', async () => {
    const data = Buffer.from('abcdefghij'.repeat(5_000));
    const staged = await session().stage('scrambled.bin', { truncate: true });
    const half = data.length / 2;
    await staged.writeAt(half, data.subarray(half));
    await staged.writeAt(0, data.subarray(0, half));
    await staged.writeAt(10, Buffer.from('klmnop'));
    const expected = Buffer.from(data);
    Buffer.from('klmnop').copy(expected, 10);
    const entry = await staged.commit();
    expect(entry.md5).to.equal(md5(expected));
    expect(md5((await download('scrambled.bin')).bytes)).to.equal(md5(expected));
  });

  it('an upload given up while a large write is in the thread pool closes its file after that write', async () => {
    // 1 MiB at once goes through the thread pool (only the first 64 KiB are written on the event
    // loop); abort closes the descriptor, which must wait for the write: a descriptor closed under
    // it fails the write (EBADF), or, its number reused meanwhile, writes into another file.
    const staged = await session().stage('given-up.bin', { truncate: true });
    const write = staged.writeAt(0, Buffer.alloc(1024 * 1024, 7));
    const abort = staged.abort();
    const [written, aborted] = await Promise.allSettled([write, abort]);
    expect(written.status, String((written as PromiseRejectedResult).reason)).to.equal('fulfilled');
    expect(aborted.status).to.equal('fulfilled');
    expect(stagingFiles()).to.deep.equal([]);
    const late = await staged.writeAt(0, Buffer.from('late')).catch((err: unknown) => err);
    expect(late).to.have.property('type', 'processing-failure/file-not-uploaded');
    const rows = await session().list('', { sort: 'path', direction: 'asc', offset: 0, limit: 1000 });
    expect(rows.map((e) => e.path)).to.not.include('given-up.bin');
  });

  it('a truncate below the written size falls back to hashing the staged file', async () => {
    const staged = await session().stage('cut.bin', { truncate: true });
    await staged.writeAt(0, Buffer.from('hello world'));
    await staged.truncate(5);
    const entry = await staged.commit();
    expect(entry.size).to.equal(5);
    expect(entry.md5).to.equal(md5(Buffer.from('hello')));
  });
});
