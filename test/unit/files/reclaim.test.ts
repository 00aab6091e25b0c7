import { expect } from 'chai';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, readdirSync, readlinkSync } from 'node:fs';
import { mkdir, readdir, stat, utimes, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { Readable } from 'node:stream';
import { createCore, operatorPrincipal, type Core } from '../../../src/core/index.ts';
import { LEASE_TTL_MS } from '../../../src/core/files/blobs.ts';
import { BlobGarbageEntity, BlobLeaseEntity, FileEntity } from '../../../src/db/entities.ts';
import { createLogger } from '../../../src/log.ts';
import { dbKind, openTestCore, type TestCore } from '../../helpers/gateway.ts';
import { startS3, type S3TestServer } from '../../helpers/s3.ts';
import { dbOf, filesOf } from '../../helpers/internals.ts';

const md5 = (b: Buffer) => createHash('md5').update(b).digest('hex');
const KiB = 1024;

/** duBlobs sums the sizes of the local store's blob files (what `du` of <data_dir>/blobs counts). */
async function duBlobs(dataDir: string): Promise<number> {
  const root = path.join(dataDir, 'blobs');
  const names = await readdir(root, { recursive: true }).catch(() => [] as string[]);
  let total = 0;
  for (const name of names) {
    const info = await stat(path.join(root, name));
    if (info.isFile()) total += info.size;
  }
  return total;
}

/**
 * heldOpen counts this process's open descriptors on blob `blobId`'s file, even deleted: how the
 * local store holds what a reader opened (the kernel frees the space at the last close).
 */
function heldOpen(blobId: string): number {
  let n = 0;
  for (const fd of readdirSync('/proc/self/fd')) {
    try {
      if (readlinkSync(`/proc/self/fd/${fd}`).includes(blobId)) n++;
    } catch {
      // closed since the listing
    }
  }
  return n;
}

for (const store of ['local', 's3'] as const) {
  describe(`blob reclaim: space comes back as soon as no reader holds a blob (${dbKind}, ${store})`, function () {
    this.timeout(60_000);
    let t: TestCore;
    let s3: S3TestServer | null = null;
    const saved: Record<string, string | undefined> = {};

    before(async () => {
      let overrides: Record<string, unknown> = {};
      if (store === 's3') {
        s3 = await startS3();
        for (const k of ['AWS_ACCESS_KEY_ID', 'AWS_SECRET_ACCESS_KEY']) saved[k] = process.env[k];
        process.env.AWS_ACCESS_KEY_ID = s3.accessKeyId;
        process.env.AWS_SECRET_ACCESS_KEY = s3.secretAccessKey;
        process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED = 'true';
        overrides = {
          storage: {
            kind: 's3',
            s3: { bucket: s3.bucket, endpoint: s3.endpoint, region: 'us-east-1', force_path_style: true },
          },
        };
      }
      t = await openTestCore(overrides);
    });
    after(async () => {
      await t?.close();
      await s3?.stop();
      for (const [k, v] of Object.entries(saved)) {
        if (v === undefined) delete process.env[k];
        else process.env[k] = v;
      }
    });

    const session = () => t.core.files.session(operatorPrincipal());
    const blobs = () => filesOf(t.core).blobs;
    const exists = async (blobId: string) => (await filesOf(t.core).store.size(blobId)) !== null;
    const put = (p: string, data: Buffer) => session().write(p, Readable.from([data]));
    const blobOf = async (p: string) =>
      (await dbOf(t.core).read((em) => em.findOneByOrFail(FileEntity, { path: p }))).blob_id!;
    const count = (entity: typeof BlobGarbageEntity | typeof BlobLeaseEntity) =>
      dbOf(t.core).read((em) => em.count(entity));
    const closed = (s: Readable) =>
      new Promise<void>((resolve) => (s.closed ? resolve() : s.once('close', resolve)));

    it('deleting a file frees its bytes right away, without a collection', async () => {
      await put('del.bin', randomBytes(300 * KiB));
      const blob = await blobOf('del.bin');
      const before = store === 'local' ? await duBlobs(t.config.data_dir) : 0;
      await session().remove('del.bin');
      await blobs().idle();
      expect(await exists(blob)).to.equal(false);
      if (store === 'local') {
        expect(existsSync(path.join(t.config.data_dir, 'blobs', blob.slice(0, 2), blob))).to.equal(false);
        expect(before - (await duBlobs(t.config.data_dir))).to.equal(300 * KiB);
      }
      expect(await count(BlobGarbageEntity)).to.equal(0);
    });

    it('overwriting a file frees the old bytes right away; a committed write leaves no mark or lease', async () => {
      await put('over.bin', randomBytes(200 * KiB));
      const old = await blobOf('over.bin');
      await put('over.bin', Buffer.from('new'));
      await blobs().idle();
      expect(await exists(old)).to.equal(false);
      expect(await exists(await blobOf('over.bin'))).to.equal(true);
      expect(await count(BlobGarbageEntity)).to.equal(0);
      expect(await count(BlobLeaseEntity)).to.equal(0);
    });

    it('a blob half read survives the delete of its file until the stream ends, then is reclaimed', async () => {
      const data = randomBytes(2 * 1024 * KiB);
      await put('reading.bin', data);
      const blob = await blobOf('reading.bin');
      const d = await session().openRead('reading.bin', { record: false });
      const chunks: Buffer[] = [];
      const it = d.stream[Symbol.asyncIterator]();
      let got = 0;
      while (got < data.length / 2) {
        const { value } = (await it.next()) as { value: Buffer };
        chunks.push(value);
        got += value.length;
      }
      await session().remove('reading.bin');
      await blobs().idle();
      await filesOf(t.core).collectGarbage();
      if (store === 'local') {
        // The file's name goes at once; the reader's open descriptor holds the bytes, no lease row.
        expect(await exists(blob), 'the name of the blob being read').to.equal(false);
        expect(heldOpen(blob), 'descriptors on the deleted blob').to.equal(1);
        expect(await count(BlobLeaseEntity)).to.equal(0);
      } else {
        expect(await exists(blob), 'the blob being read').to.equal(true);
        expect(await count(BlobLeaseEntity)).to.equal(1);
      }
      for (let r = await it.next(); !r.done; r = await it.next()) chunks.push(r.value as Buffer);
      expect(md5(Buffer.concat(chunks))).to.equal(md5(data));
      await closed(d.stream);
      await blobs().idle();
      expect(await exists(blob), 'reclaimed at the release').to.equal(false);
      if (store === 'local') expect(heldOpen(blob), 'descriptors after the reader ended').to.equal(0);
      expect(await count(BlobLeaseEntity)).to.equal(0);
      expect(await count(BlobGarbageEntity)).to.equal(0);
    });

    it('a download abandoned half way (stream destroyed) releases its blob too', async () => {
      await put('dropped.bin', randomBytes(1024 * KiB));
      const blob = await blobOf('dropped.bin');
      const d = await session().openRead('dropped.bin', { range: { start: 10 } });
      await put('dropped.bin', Buffer.from('v2'));
      await blobs().idle();
      if (store === 'local') expect(heldOpen(blob)).to.equal(1);
      else expect(await exists(blob)).to.equal(true);
      d.stream.destroy();
      await closed(d.stream);
      await blobs().idle();
      expect(await exists(blob)).to.equal(false);
      if (store === 'local') expect(heldOpen(blob)).to.equal(0);
    });

    it('a reader on another instance keeps its blob from this one, and reclaims it when it ends', async () => {
      const other: Core = await createCore(t.config, createLogger('error', { silent: true }), {
        background: false,
      });
      try {
        const data = randomBytes(512 * KiB);
        await put('shared.bin', data);
        const blob = await blobOf('shared.bin');
        const d = await other.files.session(operatorPrincipal()).openRead('shared.bin');
        expect(filesOf(other).blobs.instance).to.not.equal(blobs().instance);
        await session().remove('shared.bin');
        await blobs().idle();
        await filesOf(t.core).collectGarbage();
        // Both cores are in this process: on the local store, the other core's descriptor holds it.
        if (store === 'local') expect(heldOpen(blob)).to.equal(1);
        else expect(await exists(blob)).to.equal(true);
        const chunks: Buffer[] = [];
        for await (const c of d.stream) chunks.push(c as Buffer);
        expect(md5(Buffer.concat(chunks))).to.equal(md5(data));
        await closed(d.stream);
        await filesOf(other).blobs.idle();
        expect(await exists(blob)).to.equal(false);
      } finally {
        await other.close();
      }
    });

    it('the lease of an instance that died holds its blob only until it expires', async () => {
      await put('orphan.bin', randomBytes(100 * KiB));
      const blob = await blobOf('orphan.bin');
      // A reader on an instance that was killed: its lease row stays, nobody renews it.
      await dbOf(t.core).work((em) =>
        em.insert(BlobLeaseEntity, {
          id: 'dead'.padEnd(32, '0'),
          blob_id: blob,
          instance: 'dead-instance',
          expires_at: new Date(Date.now() + LEASE_TTL_MS),
        }),
      );
      await session().remove('orphan.bin');
      await blobs().idle();
      await filesOf(t.core).collectGarbage();
      expect(await exists(blob), 'held while the lease is live').to.equal(true);
      await dbOf(t.core).work((em) =>
        em.update(BlobLeaseEntity, { instance: 'dead-instance' }, { expires_at: new Date(Date.now() - 1) }),
      );
      expect(await filesOf(t.core).collectGarbage()).to.equal(1);
      expect(await exists(blob)).to.equal(false);
      expect(await count(BlobLeaseEntity)).to.equal(0);
    });

    it('a blob written but never committed (the writer died between put and commit) is collected', async () => {
      const pending = await blobs().create();
      await filesOf(t.core).store.put(pending.blobId, Readable.from([randomBytes(64 * KiB)]));
      // While its writer lives the blob is safe from every collection.
      await filesOf(t.core).collectGarbage();
      expect(await exists(pending.blobId)).to.equal(true);
      // The writer's process dies: its lease is no longer renewed and expires.
      await dbOf(t.core).work((em) =>
        em.update(BlobLeaseEntity, { id: pending.id }, { expires_at: new Date(Date.now() - 1) }),
      );
      expect(await filesOf(t.core).collectGarbage()).to.equal(1);
      expect(await exists(pending.blobId)).to.equal(false);
      expect(await count(BlobGarbageEntity)).to.equal(0);
    });

    it('an upload that fails mid-stream leaves no blob, mark or lease', async () => {
      const body = new Readable({
        read() {
          this.push(randomBytes(64 * KiB));
          setImmediate(() => this.destroy(new Error('the client went away')));
        },
      });
      let failed = false;
      await session()
        .write('failed.bin', body)
        .catch(() => (failed = true));
      expect(failed).to.equal(true);
      await blobs().idle();
      expect(await count(BlobGarbageEntity)).to.equal(0);
      expect(await count(BlobLeaseEntity)).to.equal(0);
      if (store === 'local') expect(await duBlobs(t.config.data_dir)).to.equal(await liveBytes(t));
    });

    if (store === 'local') {
      it('partial files a kill -9 left are swept once old enough, at start and by the background job', async () => {
        const dir = path.join(t.config.data_dir, 'blobs', 'ab');
        await mkdir(dir, { recursive: true });
        const stale = path.join(dir, `ab${'1'.repeat(30)}.partial`);
        const fresh = path.join(dir, `ab${'2'.repeat(30)}.partial`);
        await writeFile(stale, randomBytes(1000));
        await writeFile(fresh, randomBytes(1000));
        const hourAgo = new Date(Date.now() - 2 * 3600 * 1000);
        await utimes(stale, hourAgo, hourAgo);
        expect(await filesOf(t.core).sweepPartials()).to.equal(1);
        expect(existsSync(stale)).to.equal(false);
        expect(existsSync(fresh), 'a put that may still be running').to.equal(true);
        // At start: a new instance on this data dir sweeps before it serves.
        await writeFile(stale, 'x');
        await utimes(stale, hourAgo, hourAgo);
        const restarted = await createCore(t.config, createLogger('error', { silent: true }));
        await restarted.close();
        expect(existsSync(stale)).to.equal(false);
        expect(existsSync(fresh)).to.equal(true);
      });
    }
  });
}

/** liveBytes sums the sizes of the files the namespace holds (each blob once). */
async function liveBytes(t: TestCore): Promise<number> {
  const rows = await dbOf(t.core).read((em) => em.find(FileEntity, { where: { type: 'file' } }));
  const seen = new Map(rows.map((r) => [r.blob_id, r.size ?? 0]));
  return [...seen.values()].reduce((a, b) => a + b, 0);
}
