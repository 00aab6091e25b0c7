import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdtemp, readdir, rm, stat, statfs, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { loadConfig } from '../../../src/config.ts';
import { createBlobStore } from '../../../src/core/files/blobstores/index.ts';
import { LocalBlobStore } from '../../../src/core/files/blobstores/local.ts';
import { SPARES } from '../../../src/core/files/spares.ts';
import { generated, runBlobStoreContract } from './contract.ts';

/**
 * partialFiles lists the temp files (`<id>.partial`) under a local store's root, but for the empty
 * files made ahead in spare/ (at most SPARES: more is a leak too).
 */
async function partialFiles(root: string): Promise<string[]> {
  const entries = await readdir(root, { recursive: true }).catch(() => [] as string[]);
  const partial = entries.filter((name) => name.endsWith('.partial'));
  const ahead = await spareFiles(root);
  return ahead.length <= SPARES ? partial.filter((name) => !ahead.includes(name)) : partial;
}

/** spareFiles lists the empty files made ahead for small blobs (in spare/'s subfolders), sorted. */
async function spareFiles(root: string): Promise<string[]> {
  const names = await readdir(path.join(root, 'spare'), { recursive: true }).catch(() => [] as string[]);
  const empty = [];
  for (const name of names.sort()) {
    const info = await stat(path.join(root, 'spare', name));
    if (info.isFile() && info.size === 0) empty.push(path.join('spare', name));
  }
  return empty;
}

runBlobStoreContract(
  'LocalBlobStore',
  async () => {
    const root = await mkdtemp(path.join(os.tmpdir(), 'svc-blobs-'));
    return {
      store: new LocalBlobStore(root),
      leftovers: () => partialFiles(root),
      cleanup: () => rm(root, { recursive: true, force: true }),
    };
  },
  { multipart: false },
);

describe('blob store: LocalBlobStore', () => {
  let root: string;
  beforeEach(async () => {
    root = await mkdtemp(path.join(os.tmpdir(), 'svc-blobs-'));
  });
  afterEach(async () => {
    await rm(root, { recursive: true, force: true });
  });

  it('leaves no .partial file after a failed put', async () => {
    const store = new LocalBlobStore(root);
    const id = randomUUID();
    let failed = false;
    try {
      await store.put(id, generated(1, 4 * 1024 * 1024, { failAfter: 1024 * 1024 }));
    } catch {
      failed = true;
    }
    expect(failed).to.equal(true);
    expect(await partialFiles(root)).to.deep.equal([]);
    expect(await store.size(id)).to.equal(null);
    // …and the check would see one (it is also the contract's leak check for this store).
    await writeFile(path.join(root, id.slice(0, 2), `${id}.partial`), 'x');
    expect(await partialFiles(root)).to.deep.equal([path.join(id.slice(0, 2), `${id}.partial`)]);
  });

  it('writes small blobs into files made ahead, keeps SPARES of them, and removes them at close', async () => {
    const store = new LocalBlobStore(root, 'os');
    const made = async (n: number) => {
      for (let i = 0; i < 100 && (await spareFiles(root)).length < n; i++)
        await new Promise((r) => setTimeout(r, 20));
      return spareFiles(root);
    };
    // The first small blob makes its file on the spot; the next ones are made in the thread pool,
    // in subfolders taken in turn (spares.ts SLOTS).
    await store.put(randomUUID(), Readable.from([Buffer.from('first')]));
    const ahead = await made(SPARES);
    expect(ahead).to.have.length(SPARES);
    expect(new Set(ahead.map((f) => path.dirname(f))).size, 'subfolders of the files made ahead').to.equal(
      SPARES,
    );
    const id = randomUUID();
    await store.put(id, Readable.from([Buffer.from('second')]));
    // One of them became the blob (renamed into place), and another was made to keep SPARES.
    const file = path.join(root, id.slice(0, 2), id);
    expect((await stat(file)).size).to.equal(6);
    expect(
      ahead.filter((f) => existsSync(path.join(root, f))),
      'made-ahead files left',
    ).to.have.length(SPARES - 1);
    expect(await made(SPARES)).to.have.length(SPARES);
    const read = await store.get(id);
    expect(Buffer.concat((await read.toArray()) as Buffer[]).toString()).to.equal('second');
    // An operator empties the folder: the made-ahead files are gone, the next blob still lands.
    await rm(path.join(root, 'spare'), { recursive: true });
    const third = randomUUID();
    await store.put(third, Readable.from([Buffer.from('third')]));
    expect((await stat(path.join(root, third.slice(0, 2), third))).size).to.equal(5);
    await made(SPARES);
    await store.close();
    expect(await spareFiles(root), 'made-ahead files after close').to.deep.equal([]);
    expect(await partialFiles(root)).to.deep.equal([]);
  });

  it('createBlobStore opens <data_dir>/blobs for storage.kind local', async () => {
    const store = await createBlobStore(loadConfig({}), root);
    expect(store).to.be.instanceOf(LocalBlobStore);
    const id = randomUUID();
    await store.put(id, Readable.from([Buffer.from('x')]));
    expect((await stat(path.join(root, 'blobs', id.slice(0, 2), id))).size).to.equal(1);
    await store.close();
  });
});

describe('blob store: LocalBlobStore free space', () => {
  it("freeBytes is its file system's space available to it (RFC 4331 quota-available-bytes)", async () => {
    const root = await mkdtemp(path.join(os.tmpdir(), 'svc-blobs-'));
    try {
      const disk = await statfs(root);
      const free = await new LocalBlobStore(root).freeBytes();
      expect(free).to.be.closeTo(disk.bavail * disk.bsize, 64 * 1024 * 1024);
      // A root not made yet answers for the file system it will be made on.
      const later = await new LocalBlobStore(path.join(root, 'not', 'yet')).freeBytes();
      expect(later).to.be.closeTo(disk.bavail * disk.bsize, 64 * 1024 * 1024);
    } finally {
      await rm(root, { recursive: true, force: true });
    }
  });
});
