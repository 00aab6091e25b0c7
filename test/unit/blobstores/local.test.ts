import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import { mkdtemp, readdir, rm, stat, statfs, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { loadConfig } from '../../../src/config.ts';
import { createBlobStore } from '../../../src/core/files/blobstores/index.ts';
import { LocalBlobStore } from '../../../src/core/files/blobstores/local.ts';
import { generated, runBlobStoreContract } from './contract.ts';

/** partialFiles lists the temp files (`<id>.partial`) under a local store's root. */
async function partialFiles(root: string): Promise<string[]> {
  const entries = await readdir(root, { recursive: true }).catch(() => [] as string[]);
  return entries.filter((name) => name.endsWith('.partial'));
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
