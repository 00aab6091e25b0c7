/**
 * The write pipeline every front end's uploads go through (STYLE.md §4): bytes stream into a new
 * blob through a hashing pass-through (md5 and crc32 computed on the way), and only when the blob
 * is complete does one short unit of work point the row at it. On error or abort the new blob is
 * deleted and the old content stays: a reader never sees a half-written file.
 */
import { createHash, randomUUID } from 'node:crypto';
import { Readable, Transform, type TransformCallback } from 'node:stream';
import { crc32 } from 'node:zlib';
import type { BlobId } from './blobstore.ts';

/** newBlobId makes a fresh, never reused blob id. */
export function newBlobId(): BlobId {
  return randomUUID().replace(/-/g, '');
}

/** Hasher passes bytes through unchanged and knows their md5, crc32 and count at the end. */
export class Hasher extends Transform {
  private readonly md5 = createHash('md5');
  private crc = 0;
  bytes = 0;

  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback): void {
    this.update(chunk);
    done(null, chunk);
  }

  /** update hashes bytes that do not pass through (kept bytes stored elsewhere already). */
  update(chunk: Buffer): void {
    this.md5.update(chunk);
    this.crc = crc32(chunk, this.crc);
    this.bytes += chunk.length;
  }

  /** digest gives the hex md5 and crc32 (8 hex digits) once the stream has ended. */
  digest(): { md5: string; crc32: string } {
    return { md5: this.md5.digest('hex'), crc32: (this.crc >>> 0).toString(16).padStart(8, '0') };
  }
}

/**
 * concat reads the streams one after another as one stream, opening each only when the previous
 * one is done (so a restart's old bytes are not fetched before they are needed), with backpressure.
 */
export function concat(sources: (() => Promise<Readable> | Readable)[]): Readable {
  let current: Readable | null = null;
  const out = Readable.from(
    (async function* () {
      for (const open of sources) {
        current = await open();
        for await (const chunk of current) yield chunk as Buffer;
      }
    })(),
    { objectMode: false },
  );
  out.once('close', () => {
    (current as Readable | null)?.destroy();
  });
  return out;
}
