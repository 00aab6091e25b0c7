/**
 * The BlobStore contract (src/core/files/blobstore.ts), run against every implementation:
 * local.test.ts and s3.test.ts call runBlobStoreContract (STYLE.md §4). Large blobs are generated
 * on the fly from a seeded keystream and compared by md5, so no test holds them in memory, and any
 * range of them can be recomputed.
 */
import { expect } from 'chai';
import { createCipheriv, createHash, randomBytes, randomUUID } from 'node:crypto';
import http from 'node:http';
import https from 'node:https';
import { Readable } from 'node:stream';
import {
  BlobNotFound,
  isMultipartStore,
  type BlobStore,
  type MultipartBlobStore,
} from '../../../src/core/files/blobstore.ts';
import { collectGarbage } from '../../helpers/gc.ts';

const MiB = 1024 * 1024;
const CHUNK = 64 * 1024;
const KEYSTREAM_KEY = Buffer.alloc(16, 0x5a);

/** StoreUnderTest is what a contract run needs from one implementation. */
export interface StoreUnderTest {
  store: BlobStore;
  cleanup(): Promise<void>;
  /** leftovers names what failed or aborted writes left behind (temp files, open uploads); optional. */
  leftovers?(): Promise<string[]>;
}

/** bytesAt returns `length` bytes at `offset` of the pseudo-random stream `seed` (AES-128-CTR keystream). */
export function bytesAt(seed: number, offset: number, length: number): Buffer {
  const iv = Buffer.alloc(16);
  iv.writeUInt32BE(seed, 0);
  iv.writeBigUInt64BE(BigInt(Math.floor(offset / 16)), 8);
  const skip = offset % 16;
  return createCipheriv('aes-128-ctr', KEYSTREAM_KEY, iv)
    .update(Buffer.alloc(skip + length))
    .subarray(skip);
}

/**
 * generated streams `size` bytes of keystream `seed`, made as they are read. `failAfter` makes it
 * fail like a dropped client once that many bytes were read; `onRead` sees the count so far.
 */
export function generated(
  seed: number,
  size: number,
  opts: { failAfter?: number; onRead?: (offset: number) => void } = {},
): Readable {
  let offset = 0;
  return new Readable({
    highWaterMark: CHUNK,
    read() {
      if (opts.failAfter !== undefined && offset >= opts.failAfter) {
        this.destroy(new Error('the client went away'));
        return;
      }
      if (offset >= size) {
        this.push(null);
        return;
      }
      const n = Math.min(CHUNK, size - offset);
      const chunk = bytesAt(seed, offset, n);
      offset += n;
      opts.onRead?.(offset);
      this.push(chunk);
    },
  });
}

/** generatedMd5 is the md5 of the first `size` bytes of keystream `seed`. */
function generatedMd5(seed: number, size: number): string {
  const hash = createHash('md5');
  for (let offset = 0; offset < size; offset += MiB)
    hash.update(bytesAt(seed, offset, Math.min(MiB, size - offset)));
  return hash.digest('hex');
}

async function md5Of(stream: Readable): Promise<{ md5: string; size: number }> {
  const hash = createHash('md5');
  let size = 0;
  for await (const chunk of stream) {
    hash.update(chunk as Buffer);
    size += (chunk as Buffer).length;
  }
  return { md5: hash.digest('hex'), size };
}

async function readAll(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

/** rejection resolves with the error `promise` rejects with, and fails the test if it resolves. */
async function rejection(promise: Promise<unknown>): Promise<Error & { code?: string }> {
  try {
    await promise;
  } catch (err) {
    return err as Error & { code?: string };
  }
  throw new Error('expected a rejection');
}

/** httpPut sends `body` to a presigned URL the way a client of the REST API would. */
function httpPut(
  url: string,
  body: Buffer,
): Promise<{ status: number; etag: string | undefined; text: string }> {
  const target = new URL(url);
  const client = target.protocol === 'https:' ? https : http;
  return new Promise((resolve, reject) => {
    const req = client.request(
      target,
      { method: 'PUT', headers: { 'content-length': body.length } },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('error', reject);
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            etag: res.headers.etag,
            text: Buffer.concat(chunks).toString('utf8'),
          }),
        );
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

/**
 * runBlobStoreContract declares the contract's tests for one BlobStore implementation;
 * `multipart` says whether it takes parts from clients (MultipartBlobStore), which is checked too.
 */
export function runBlobStoreContract(
  name: string,
  make: () => Promise<StoreUnderTest>,
  opts: { multipart: boolean },
): void {
  describe(`blob store contract: ${name}`, function () {
    this.timeout(60_000);
    let sut: StoreUnderTest;
    let store: BlobStore;
    const newId = (): string => randomUUID();

    before(async () => {
      sut = await make();
      store = sut.store;
    });
    after(async () => {
      await sut?.cleanup();
    });

    async function expectNothingLeft(id: string): Promise<void> {
      expect(await store.size(id)).to.equal(null);
      expect((await rejection(store.get(id))).code).to.equal('ENOENT');
      if (sut.leftovers) expect(await sut.leftovers()).to.deep.equal([]);
    }

    describe('put then get returns identical bytes', () => {
      for (const size of [0, 1, 3 * MiB]) {
        it(`${size} bytes`, async () => {
          const id = newId();
          const data = randomBytes(size);
          expect(await store.put(id, Readable.from(size ? [data] : []))).to.deep.equal({ size });
          expect((await readAll(await store.get(id))).equals(data)).to.equal(true);
          expect(await store.size(id)).to.equal(size);
        });
      }

      it('20 MiB generated on the fly, compared by md5', async () => {
        const id = newId();
        const size = 20 * MiB + 7;
        expect(await store.put(id, generated(1, size))).to.deep.equal({ size });
        expect(await md5Of(await store.get(id))).to.deep.equal({ md5: generatedMd5(1, size), size });
        expect(await store.size(id)).to.equal(size);
      });
    });

    describe('range reads return exactly the bytes asked for', () => {
      const size = 20 * MiB;
      const seed = 2;
      let id: string;
      before(async () => {
        id = newId();
        await store.put(id, generated(seed, size));
      });

      const cases: [string, number, number | undefined][] = [
        ['start only', size - MiB - 12_345, undefined],
        ['start and end', 100, 199],
        ['the first byte', 0, 0],
        ['the last byte', size - 1, size - 1],
        ['the middle, across 8 MiB', 8 * MiB - 1000, 8 * MiB + 65_536],
        ['the middle, 1 MiB at 10 MiB + 3', 10 * MiB + 3, 11 * MiB + 2],
      ];
      for (const [title, start, end] of cases) {
        it(title, async () => {
          const range = end === undefined ? { start } : { start, end };
          const got = await readAll(await store.get(id, { range }));
          const last = end ?? size - 1;
          expect(got.length).to.equal(last - start + 1);
          expect(got.equals(bytesAt(seed, start, last - start + 1))).to.equal(true);
        });
      }

      it('an AbortSignal ends a read midway with an AbortError', async () => {
        const controller = new AbortController();
        const stream = await store.get(id, { signal: controller.signal });
        let read = 0;
        const err = await rejection(
          (async () => {
            for await (const chunk of stream) {
              read += (chunk as Buffer).length;
              if (!controller.signal.aborted) controller.abort();
            }
          })(),
        );
        expect(err.name).to.equal('AbortError');
        expect(read).to.be.below(size);
      });

      it('a range starting at the end reads as empty', async () => {
        expect((await readAll(await store.get(id, { range: { start: size } }))).length).to.equal(0);
      });

      it('a range ending before its start is refused', async () => {
        await rejection(store.get(id, { range: { start: 10, end: 5 } }));
      });

      it('{ start: 0 } of an empty blob reads as empty', async () => {
        const empty = newId();
        await store.put(empty, Readable.from([]));
        expect((await readAll(await store.get(empty, { range: { start: 0 } }))).length).to.equal(0);
      });
    });

    describe('missing blobs and delete', () => {
      it('get of a missing blob rejects with BlobNotFound, code ENOENT', async () => {
        const err = await rejection(store.get(newId()));
        expect(err).to.be.instanceOf(BlobNotFound);
        expect(err.code).to.equal('ENOENT');
        expect((await rejection(store.get(newId(), { range: { start: 1, end: 2 } }))).code).to.equal(
          'ENOENT',
        );
      });

      it('size of a missing blob is null', async () => {
        expect(await store.size(newId())).to.equal(null);
      });

      it('delete removes the blob: get rejects, size is null', async () => {
        const id = newId();
        await store.put(id, Readable.from([Buffer.from('to be deleted')]));
        await store.delete(id);
        await expectNothingLeft(id);
      });

      it('delete of a missing blob is fine, twice', async () => {
        const id = newId();
        await store.delete(id);
        await store.delete(id);
      });
    });

    it('freeBytes, where the store offers it, is a whole number of bytes or null', async () => {
      if (!store.freeBytes) return;
      const free = await store.freeBytes();
      if (free !== null) expect(Number.isSafeInteger(free) && free >= 0, String(free)).to.equal(true);
    });

    describe('failed and aborted puts leave nothing behind', () => {
      for (const failAfter of [1000, 12 * MiB]) {
        it(`a stream that errors after ${failAfter} bytes`, async () => {
          const id = newId();
          const err = await rejection(store.put(id, generated(3, 20 * MiB, { failAfter })));
          expect(err.message).to.equal('the client went away');
          await expectNothingLeft(id);
        });
      }

      it('an AbortSignal fired midway (after 12 MiB were read)', async () => {
        const id = newId();
        const controller = new AbortController();
        const body = generated(4, Number.MAX_SAFE_INTEGER, {
          onRead: (offset) => {
            if (offset >= 12 * MiB && !controller.signal.aborted) controller.abort();
          },
        });
        const err = await rejection(store.put(id, body, { signal: controller.signal }));
        expect(err.name).to.equal('AbortError');
        await expectNothingLeft(id);
      });

      it('an AbortSignal fired once the last byte was read', async () => {
        const id = newId();
        const controller = new AbortController();
        const body = Readable.from([randomBytes(1000)]);
        body.once('end', () => controller.abort());
        const err = await rejection(store.put(id, body, { signal: controller.signal }));
        expect(err.name).to.equal('AbortError');
        await expectNothingLeft(id);
      });

      it('an AbortSignal fired before the put', async () => {
        const id = newId();
        const err = await rejection(store.put(id, generated(5, 1000), { signal: AbortSignal.abort() }));
        expect(err.name).to.equal('AbortError');
        await expectNothingLeft(id);
      });
    });

    it('two concurrent puts of different ids do not interfere', async () => {
      const [a, b] = [newId(), newId()];
      const size = 9 * MiB + 1;
      await Promise.all([store.put(a, generated(6, size)), store.put(b, generated(7, size))]);
      expect((await md5Of(await store.get(a))).md5).to.equal(generatedMd5(6, size));
      expect((await md5Of(await store.get(b))).md5).to.equal(generatedMd5(7, size));
    });

    it('put holds a bounded part of the stream in memory (192 MiB through, < 112 MiB held)', async function () {
      // Measured as live Buffer memory (process.memoryUsage().arrayBuffers right after a forced GC)
      // each time the store has read another 32 MiB. Not RSS: RSS also counts garbage not yet
      // collected and memory the allocator keeps; it grew by 43 to 87 MiB for one 64 MiB S3 put, so
      // a 48 MiB RSS bound was flaky. The S3 store itself holds up to about 75 MiB (4 parts of
      // 8 MiB in flight, the part being filled, and finished parts that lib-storage's idle
      // uploaders and the HTTP agent's sockets still reference), whatever the blob's size; hence a
      // stream far larger than the limit, which a store that buffers it whole cannot pass.
      // Enabled at run time when node did not start with --expose-gc; never skipped.
      const gc = collectGarbage();
      const size = 192 * MiB;
      const every = 32 * MiB;
      gc();
      const before = process.memoryUsage().arrayBuffers;
      let peak = 0;
      let next = every;
      const body = generated(8, size, {
        onRead: (offset) => {
          if (offset < next) return;
          next += every;
          gc();
          peak = Math.max(peak, process.memoryUsage().arrayBuffers - before);
        },
      });
      expect(await store.put(newId(), body)).to.deep.equal({ size });
      expect(peak / MiB, 'MiB of buffers alive at the peak').to.be.below(112);
    });

    if (!opts.multipart) {
      it('takes no parts from clients (the gateway joins uploaded parts itself)', () => {
        expect(isMultipartStore(store)).to.equal(false);
      });
      return;
    }

    describe('multipart uploads (stores that take parts from clients)', function () {
      let mp: MultipartBlobStore;
      before(function () {
        expect(isMultipartStore(store), `${name} is a MultipartBlobStore`).to.equal(true);
        mp = store as MultipartBlobStore;
      });

      it('two parts PUT to presigned URLs, listed, then completed into one blob', async () => {
        const id = newId();
        const uploadId = await mp.createUpload(id);
        const part1 = randomBytes(5 * MiB + 3);
        const part2 = randomBytes(1000);
        const sent = [];
        for (const [n, body] of [part1, part2].entries()) {
          const res = await httpPut(await mp.partUrl(id, uploadId, n + 1, 300), body);
          expect(res.status, res.text).to.equal(200);
          expect(res.etag).to.be.a('string');
          sent.push({ partNumber: n + 1, size: body.length, etag: res.etag! });
        }
        const listed = await mp.listParts(id, uploadId);
        expect(listed.map(({ partNumber, size }) => ({ partNumber, size }))).to.deep.equal([
          { partNumber: 1, size: part1.length },
          { partNumber: 2, size: part2.length },
        ]);
        expect(listed.map((p) => p.etag.replace(/"/g, ''))).to.deep.equal(
          sent.map((p) => p.etag.replace(/"/g, '')),
        );
        expect(await store.size(id), 'nothing is visible before complete').to.equal(null);
        expect(await mp.complete(id, uploadId, listed)).to.deep.equal({ size: part1.length + part2.length });
        expect((await readAll(await store.get(id))).equals(Buffer.concat([part1, part2]))).to.equal(true);
      });

      it('copyPart takes a byte range of an existing blob (a restart keeps the old bytes)', async () => {
        const source = newId();
        const old = randomBytes(6 * MiB);
        await store.put(source, Readable.from([old]));
        const id = newId();
        const uploadId = await mp.createUpload(id);
        const kept = { start: 0, end: 5 * MiB + 9 };
        await mp.copyPart(id, uploadId, 1, source, kept);
        const tail = randomBytes(777);
        expect((await httpPut(await mp.partUrl(id, uploadId, 2, 300), tail)).status).to.equal(200);
        const parts = await mp.listParts(id, uploadId);
        expect(parts.map((p) => p.size)).to.deep.equal([5 * MiB + 10, 777]);
        await mp.complete(id, uploadId, parts);
        const expected = Buffer.concat([old.subarray(kept.start, kept.end + 1), tail]);
        expect((await readAll(await store.get(id))).equals(expected)).to.equal(true);
        expect(await store.size(source), 'the source is untouched').to.equal(old.length);
        const other = newId();
        const otherUpload = await mp.createUpload(other);
        const missing = await rejection(mp.copyPart(other, otherUpload, 1, newId(), kept));
        expect(missing, 'copy from a missing blob').to.be.instanceOf(BlobNotFound);
        await mp.abortUpload(other, otherUpload);
      });

      it('putPart sends a part from a stream of known size (the gateway carrying a small restart)', async () => {
        const id = newId();
        const uploadId = await mp.createUpload(id);
        const head = randomBytes(3 * MiB);
        const rest = randomBytes(2 * MiB + 5);
        // Two chunks, as kept bytes followed by a client's part arrive.
        const first = await mp.putPart(id, uploadId, 1, Readable.from([head, rest]), {
          size: head.length + rest.length,
        });
        expect(first).to.include({ partNumber: 1, size: head.length + rest.length });
        const tail = randomBytes(10);
        expect((await httpPut(await mp.partUrl(id, uploadId, 2, 300), tail)).status).to.equal(200);
        const parts = await mp.listParts(id, uploadId);
        expect(parts.map((p) => p.size)).to.deep.equal([5 * MiB + 5, 10]);
        await mp.complete(id, uploadId, parts);
        expect((await readAll(await store.get(id))).equals(Buffer.concat([head, rest, tail]))).to.equal(true);
      });

      it('abortUpload drops the upload and its parts, and may be repeated', async () => {
        const id = newId();
        const uploadId = await mp.createUpload(id);
        expect((await httpPut(await mp.partUrl(id, uploadId, 1, 300), randomBytes(1000))).status).to.equal(
          200,
        );
        await mp.abortUpload(id, uploadId);
        await mp.abortUpload(id, uploadId);
        await rejection(mp.listParts(id, uploadId));
        await expectNothingLeft(id);
      });
    });
  });
}
