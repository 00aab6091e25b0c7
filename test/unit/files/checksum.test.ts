/**
 * Checksum (issue 13): md5 and crc32 computed in a worker thread must equal node's own over the
 * same bytes, whatever the sizes of the pieces and wherever the 1 MiB batches split them.
 */
import { createHash, randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { Writable } from 'node:stream';
import { crc32 } from 'node:zlib';
import { expect } from 'chai';
import { Checksum, Hasher } from '../../../src/core/files/checksum.ts';

const MiB = 1024 * 1024;

function expected(data: Buffer): { md5: string; crc32: string } {
  return {
    md5: createHash('md5').update(data).digest('hex'),
    crc32: (crc32(data) >>> 0).toString(16).padStart(8, '0'),
  };
}

/** pieces cuts data into pieces of random sizes up to `max`. */
function pieces(data: Buffer, max: number): Buffer[] {
  const out: Buffer[] = [];
  for (let at = 0; at < data.length;) {
    const n = Math.min(data.length - at, 1 + Math.floor(Math.random() * max));
    out.push(data.subarray(at, at + n));
    at += n;
  }
  return out;
}

describe('checksum off the event loop', () => {
  for (const size of [0, 1, 4096, MiB - 1, MiB, MiB + 1, 9 * MiB + 12345]) {
    it(`${size} bytes in random pieces: md5 and crc32 as node's own`, async () => {
      const data = randomBytes(size);
      const sum = new Checksum();
      for (const piece of pieces(data, 300_000)) await sum.update(piece);
      expect(sum.bytes).to.equal(size);
      expect(await sum.digest()).to.deep.equal(expected(data));
    });
  }

  it('a caller reusing its buffer after update does not change the result', async () => {
    const data = randomBytes(3 * MiB);
    const sum = new Checksum();
    const scratch = Buffer.alloc(64 * 1024);
    for (let at = 0; at < data.length; at += scratch.length) {
      data.copy(scratch, 0, at, at + scratch.length);
      await sum.update(scratch);
      scratch.fill(0xff);
    }
    expect(await sum.digest()).to.deep.equal(expected(data));
  });

  it('many checksums at once keep their bytes apart', async () => {
    const datas = Array.from({ length: 8 }, (_, i) => randomBytes(2 * MiB + i * 1000));
    const results = await Promise.all(
      datas.map(async (data) => {
        const sum = new Checksum();
        for (const piece of pieces(data, 200_000)) await sum.update(piece);
        return sum.digest();
      }),
    );
    results.forEach((r, i) => expect(r).to.deep.equal(expected(datas[i]!)));
  });

  it('a discarded checksum can be given up mid-way and a later one still works', async () => {
    const sum = new Checksum();
    await sum.update(randomBytes(5 * MiB));
    sum.discard();
    const data = randomBytes(2 * MiB);
    const next = new Checksum();
    await next.update(data);
    expect(await next.digest()).to.deep.equal(expected(data));
  });

  it('small files, hashed inline, reuse their batch memory and stay correct', async () => {
    // Before: each small file left its 1 MiB batch to the collector (1 GiB a thousand files,
    // counted by V8 as external memory, starting full collections every few dozen files).
    const made = Buffer.allocUnsafeSlow;
    let allocations = 0;
    Buffer.allocUnsafeSlow = (size: number) => {
      allocations++;
      return made(size);
    };
    try {
      for (let i = 0; i < 200; i++) {
        const data = randomBytes(1 + Math.floor(Math.random() * 64 * 1024));
        const sum = new Checksum();
        for (const piece of pieces(data, 16 * 1024)) await sum.update(piece);
        if (i % 10 === 9) sum.discard();
        else expect(await sum.digest()).to.deep.equal(expected(data));
      }
    } finally {
      Buffer.allocUnsafeSlow = made;
    }
    expect(allocations, '1 MiB batches allocated for 200 small files').to.be.at.most(1);
  });

  it('Hasher passes every byte through in order and digests them', async () => {
    const data = randomBytes(6 * MiB + 7);
    const hasher = new Hasher();
    const out: Buffer[] = [];
    await pipeline(
      Readable.from(pieces(data, 100_000)),
      hasher,
      new Writable({
        write(chunk: Buffer, _enc, done) {
          out.push(chunk);
          done();
        },
      }),
    );
    expect(Buffer.concat(out).equals(data)).to.equal(true);
    expect(hasher.bytes).to.equal(data.length);
    expect(await hasher.digest()).to.deep.equal(expected(data));
  });
});
