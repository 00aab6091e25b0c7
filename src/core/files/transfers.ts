/**
 * The write pipeline every front end's uploads go through (STYLE.md §4): bytes stream into a new
 * blob through a hashing pass-through (checksum.ts: md5 and crc32 computed on the way), and only when the blob
 * is complete does one short unit of work point the row at it. On error or abort the new blob is
 * deleted and the old content stays: a reader never sees a half-written file.
 */
import { randomUUID } from 'node:crypto';
import { Readable, Transform, type TransformCallback } from 'node:stream';
import type { BlobId } from './blobstore.ts';

/** newBlobId makes a fresh, never reused blob id. */
export function newBlobId(): BlobId {
  return randomUUID().replace(/-/g, '');
}

/** ByteCounter passes bytes through unchanged and counts them. */
export class ByteCounter extends Transform {
  bytes = 0;

  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback): void {
    this.bytes += chunk.length;
    done(null, chunk);
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
