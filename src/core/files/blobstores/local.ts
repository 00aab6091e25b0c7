/**
 * LocalBlobStore keeps blobs as files under <data_dir>/blobs/<first two characters>/<id>. A blob
 * is written to a temporary name and renamed into place once whole, so a crash or an abort never
 * leaves a partial blob under a real id; under `fsync` put resolves once the bytes and the name
 * are on disk. A small blob's file is one made ahead in <data_dir>/blobs/spare (spares.ts).
 */
import {
  closeSync,
  constants,
  createReadStream,
  createWriteStream,
  fdatasync,
  fsync,
  close as closeCb,
  open as openCb,
  write as writeCb,
  openSync,
  readSync,
  renameSync,
  statSync,
  writeSync,
} from 'node:fs';
import { randomUUID } from 'node:crypto';
import { access, rename, rm, stat, statfs, unlink } from 'node:fs/promises';
import path from 'node:path';
import { Readable } from 'node:stream';
import { promisify } from 'node:util';
import { pipeline } from 'node:stream/promises';
import { classifyStorageError } from '../../errors.ts';
import {
  BlobNotFound,
  isBlobId,
  withBytes,
  type BlobId,
  type BlobStore,
  type ByteRange,
} from '../blobstore.ts';
import { Folders } from '../folders.ts';
import { BlobFileStream } from './blobfile.ts';
import { SpareFiles } from '../spares.ts';
import { WriteBehind } from '../writebehind.ts';
import { OWNER, sweepStale, type Abandoned } from '../staging.ts';

/**
 * Durability is storage.durability: `fsync` makes a blob's bytes and its name durable before put
 * resolves; `os` leaves both to the page cache, as vsftpd, OpenSSH and nginx do.
 */
export type Durability = 'fsync' | 'os';

/** LocalBlobStore stores blobs on the local disk. */
export class LocalBlobStore implements BlobStore {
  readonly kind = 'local' as const;

  /** the blob folders this process has made */
  private readonly folders = new Folders();
  /**
   * empty files made ahead for small blobs, named as a put's partial file (`<uuid>.<owner>.partial`)
   * so that the crash sweep removes what a killed process left
   */
  private readonly spares: SpareFiles;

  constructor(
    private readonly root: string,
    private readonly durability: Durability = 'fsync',
  ) {
    this.spares = new SpareFiles(path.join(root, 'spare'), () => `${randomUUID()}.${OWNER}.partial`);
  }

  /**
   * durable makes a blob's file and the name its folder holds for it durable, after the rename into
   * place (nothing under `os`): both fsyncs at once, so the file system can put them in one journal
   * commit. Renaming before the file's own fsync is safe: nothing names the blob before the
   * upload's commit, which waits for both, and a crash in between leaves a blob that its garbage
   * mark reclaims. Descriptors are opened and closed on the event loop (a cached inode: a trip
   * through the thread pool costs more); only the fsyncs go to the pool.
   */
  private async durable(final: string): Promise<void> {
    if (this.durability === 'os') return;
    const fd = openSync(final, 'r');
    let dirFd: number | undefined;
    try {
      dirFd = openSync(path.dirname(final), 'r');
      await Promise.all([fsyncFd(fd), fsyncFd(dirFd)]);
    } finally {
      closeSync(fd);
      if (dirFd !== undefined) closeSync(dirFd);
    }
  }

  get adoptSyncs(): boolean {
    return this.durability === 'fsync';
  }

  private file(id: BlobId): string {
    if (!isBlobId(id)) throw new Error(`invalid blob id ${id}`);
    return path.join(this.root, id.slice(0, 2), id);
  }

  async put(id: BlobId, body: Readable, opts: { signal?: AbortSignal } = {}): Promise<{ size: number }> {
    const final = this.file(id);
    // Named with its writer, so a sweep can tell a crashed put's file from a live one (staging.ts).
    const partial = `${final}.${OWNER}.partial`;
    let size = 0;
    const dir = path.dirname(final);
    // A body that fails between gather and the pipeline (it keeps reading ahead while paused) is
    // reported by the pipeline, which sees the destroyed stream, not thrown as an unhandled event.
    const early = () => undefined;
    body.on('error', early);
    // At `fsync`, a big blob's disk writes start while its bytes arrive (writebehind.ts).
    const behind = this.durability === 'fsync' ? syncBehind(partial) : null;
    try {
      // A small file (most of a mirror of small files) is gathered and written in one call, not
      // streamed: a stream's setup costs more than the write (issue 13, per-file cost).
      const head = await gather(body, SMALL, opts.signal);
      if (head.ended) {
        size = head.size;
        await this.writeSmall(final, head.chunks);
        return { size };
      } else {
        await this.folders.make(dir, true);
        // 1 MiB of buffer (not the default 16 KiB): the source keeps flowing while a write is in
        // flight and queued chunks go out in one writev; 30-50% faster uploads (files.bench.ts).
        const out = createWriteStream(partial, { flags: 'wx', highWaterMark: 1024 * 1024 });
        for (const chunk of head.chunks) out.write(chunk);
        const piped = pipeline(body, out, opts.signal ? { signal: opts.signal } : {});
        // After the pipe's own listener: a 'data' listener added before it would take chunks from it.
        if (behind) body.on('data', () => behind.written(out.bytesWritten));
        await piped;
        size = out.bytesWritten;
        await behind?.close();
      }
      await rename(partial, final);
      await this.durable(final);
      return { size };
    } catch (err) {
      body.destroy();
      await behind?.close().catch(() => undefined);
      await rm(partial, { force: true });
      // A full disk (ENOSPC, EDQUOT) is the core's insufficient-storage, not a bug.
      throw classifyStorageError(err);
    } finally {
      body.off('error', early);
    }
  }

  /**
   * join writes blob `id` from `sources` in order (REST `action=end`: the kept bytes, then the
   * parts), handing each piece to `observe` (the hashing, which copies it) before writing it with
   * a descriptor of its own. A local blob's pieces come through two reused buffers
   * (BlobFileStream.each): a 1 GiB join through a stream took a new 256 KiB buffer per read, and
   * V8's collections of them cost about a third of the join's time. Durable as put.
   */
  async join(
    id: BlobId,
    sources: (() => Promise<Readable>)[],
    observe: (chunk: Buffer) => Promise<void> | undefined,
    opts: { signal?: AbortSignal } = {},
  ): Promise<{ size: number }> {
    const final = this.file(id);
    const partial = `${final}.${OWNER}.partial`;
    const behind = this.durability === 'fsync' ? syncBehind(partial) : null;
    let fd: number | null = null;
    let size = 0;
    const write = async (chunk: Buffer) => {
      await observe(chunk);
      for (let at = 0; at < chunk.length;)
        at += (await writeFd(fd!, chunk, at, chunk.length - at, size + at)).bytesWritten;
      size += chunk.length;
      behind?.written(size);
      opts.signal?.throwIfAborted();
    };
    try {
      await this.folders.make(path.dirname(final), true);
      fd = await openFd(partial, 'wx');
      for (const open of sources) {
        const source = await open();
        try {
          if (source instanceof BlobFileStream) await source.each(write);
          else for await (const chunk of source) await write(chunk as Buffer);
        } finally {
          source.destroy();
        }
      }
      await closeFd(fd);
      fd = null;
      await behind?.close();
      await rename(partial, final);
      await this.durable(final);
      return { size };
    } catch (err) {
      if (fd !== null) await closeFd(fd).catch(() => undefined);
      await behind?.close().catch(() => undefined);
      await rm(partial, { force: true });
      throw classifyStorageError(err);
    }
  }

  /**
   * writeSmall writes a gathered file into a spare (made ahead in the thread pool: creating the
   * file was the dearest call of a small upload, 0.6-1 ms on this machine's ext4 when creations
   * are not back to back) and renames it into place, with plain system calls on the event loop,
   * handing only the fsyncs (under `fsync`) to the thread pool. For a file this small the
   * page-cache write takes microseconds, while each trip through the thread pool wakes a worker
   * thread: 4 such trips (8 under `fsync`) were a fifth of a small upload's time on 2 busy cores.
   * The file and its folder are synced together after the rename (durable).
   */
  private async writeSmall(final: string, chunks: Buffer[]): Promise<void> {
    const data = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
    const spare = await this.folders.within(this.spares.dir, () => this.spares.create());
    try {
      try {
        for (let at = 0; at < data.length;) at += writeSync(spare.fd, data, at);
      } finally {
        closeSync(spare.fd);
      }
      await this.folders.within(path.dirname(final), () => renameSync(spare.file, final));
    } catch (err) {
      await rm(spare.file, { force: true });
      throw err;
    }
    await this.durable(final);
  }

  async freeBytes(): Promise<number | null> {
    const fsStats = await this.statfs();
    // bavail, not bfree: the blocks an unprivileged process may still use.
    return fsStats ? fsStats.bavail * fsStats.bsize : null;
  }

  async space(): Promise<{ free: number; total: number } | null> {
    // One statfs for both figures (reclaim asks after every upload that leaves garbage).
    const fsStats = await this.statfs();
    return fsStats ? { free: fsStats.bavail * fsStats.bsize, total: fsStats.blocks * fsStats.bsize } : null;
  }

  /**
   * statfs describes the file system of the root, or null when none can be found. Before the first
   * blob the root may not exist yet: its nearest existing folder is on the file system it will be
   * made on.
   */
  private async statfs(): Promise<{ bavail: number; bsize: number; blocks: number } | null> {
    for (let dir = this.root; ; dir = path.dirname(dir)) {
      try {
        return await statfs(dir);
      } catch (err) {
        if ((err as { code?: string }).code !== 'ENOENT' || dir === path.dirname(dir)) return null;
      }
    }
  }

  async adopt(id: BlobId, file: string): Promise<{ size: number }> {
    try {
      return await this.adoptFile(id, file);
    } catch (err) {
      throw classifyStorageError(err);
    }
  }

  private async adoptFile(id: BlobId, file: string): Promise<{ size: number }> {
    const final = this.file(id);
    try {
      // A rename within one file system is a change of names only: on the event loop, as
      // writeSmall's (the caller waits for it either way, and the thread pool's trip costs more).
      await this.folders.within(path.dirname(final), () => renameSync(file, final));
    } catch (err) {
      // Another filesystem (blobs elsewhere than the staging dir): copy instead.
      if ((err as { code?: string }).code !== 'EXDEV') throw err;
      const size = await this.put(id, createReadStream(file));
      await rm(file, { force: true });
      return size;
    }
    await this.durable(final);
    return { size: statSync(final).size };
  }

  // The data folder is a local file system (POSIX unlink semantics); several instances sharing
  // blobs across hosts use S3 (DESIGN.md "Scale-out").
  readonly heldOnOpen = true;

  async get(id: BlobId, opts: { range?: ByteRange; signal?: AbortSignal } = {}): Promise<Readable> {
    const { range } = opts;
    const length = range?.end !== undefined ? range.end - range.start + 1 : Infinity;
    if (range && length <= SMALL) return readSmall(this.file(id), id, range.start, length);
    // Opened now, not when the stream first reads: the descriptor is what holds the bytes.
    let fd;
    try {
      fd = await openFd(this.file(id), 'r');
    } catch {
      throw new BlobNotFound(id);
    }
    return new BlobFileStream(fd, range?.start ?? 0, range?.end ?? Infinity, opts.signal);
  }

  async probe(): Promise<void> {
    // Before the first blob the root may not exist yet: then its nearest existing folder counts.
    for (let dir = this.root; ; dir = path.dirname(dir)) {
      try {
        if (!(await stat(dir)).isDirectory())
          throw Object.assign(new Error(`${dir} is not a folder`), { code: 'ENOTDIR' });
        await access(dir, constants.W_OK);
        return;
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'ENOENT' || dir === path.dirname(dir)) throw err;
      }
    }
  }

  async size(id: BlobId): Promise<number | null> {
    try {
      return (await stat(this.file(id))).size;
    } catch {
      return null;
    }
  }

  /** sweep deletes the `<id>.<owner>.partial` files a crash left (put removes its own on any error). */
  sweep(abandoned: Abandoned): Promise<number> {
    return sweepStale(
      this.root,
      '.partial',
      (name) => /^[^.]+\.([^.]+)\.partial$/.exec(name)?.[1] ?? null,
      abandoned,
    );
  }

  async delete(id: BlobId): Promise<void> {
    // One unlink, gone already is fine: rm would lstat the file first and go through its
    // recursive removal's steps, about 0.15 ms of the event loop for each blob an overwrite frees.
    try {
      await unlink(this.file(id));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    }
  }

  async close(): Promise<void> {
    await this.spares.close();
  }
}

/** SMALL is the size up to which a blob is gathered in memory and written in one call, and read so. */
const SMALL = 64 * 1024;

const fsyncFd = promisify(fsync);
// A bare descriptor, not a FileHandle: the stream closes it (a FileHandle would close it again when collected).
const openFd = promisify(openCb);
const closeFd = promisify(closeCb);
const writeFd = promisify(writeCb);
const fdatasyncFd = promisify(fdatasync);

/**
 * syncBehind is the WriteBehind of a big blob's partial file: its syncs go through a descriptor of
 * their own, opened at the first, so the write stream's close never races one; `close` waits for
 * them, closes it, and rejects with a failed sync's error (again when called again).
 */
function syncBehind(file: string): { written: (upto: number) => void; close: () => Promise<void> } {
  let fd: number | null = null;
  const behind = new WriteBehind(async () => fdatasyncFd((fd ??= openSync(file, 'r'))));
  return {
    written: (upto) => behind.written(upto),
    close: async () => {
      try {
        await behind.settle();
      } finally {
        if (fd !== null) closeSync(fd);
        fd = null;
      }
    },
  };
}

/**
 * readSmall reads `length` bytes (at most SMALL) of a blob at `start` with plain system calls on
 * the event loop, as writeSmall writes them: one read of a page-cached file costs less than the
 * thread pool's three trips (open, read, close). The bytes are read before the stream is handed
 * out, so the blob may be reclaimed at once.
 */
function readSmall(file: string, id: BlobId, start: number, length: number): Readable {
  let fd;
  try {
    fd = openSync(file, 'r');
  } catch {
    throw new BlobNotFound(id);
  }
  try {
    const buf = Buffer.allocUnsafe(length);
    let got = 0;
    while (got < length) {
      const n = readSync(fd, buf, got, length - got, start + got);
      if (n === 0) break;
      got += n;
    }
    const bytes = got === length ? buf : buf.subarray(0, got);
    return withBytes(Readable.from(got === 0 ? [] : [bytes], { objectMode: false }), bytes);
  } finally {
    closeSync(fd);
  }
}

/**
 * gather reads `body` until it ends or `limit` bytes have come, whichever is first, and leaves the
 * rest unread (paused) for a pipeline to take on.
 */
function gather(
  body: Readable,
  limit: number,
  signal?: AbortSignal,
): Promise<{ chunks: Buffer[]; size: number; ended: boolean }> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const stop = () => {
      body.off('data', onData);
      body.off('end', onEnd);
      body.off('error', onError);
      signal?.removeEventListener('abort', onAbort);
    };
    const onData = (chunk: Buffer) => {
      chunks.push(chunk);
      size += chunk.length;
      if (size >= limit) {
        body.pause();
        stop();
        resolve({ chunks, size, ended: false });
      }
    };
    const onEnd = () => {
      stop();
      resolve({ chunks, size, ended: true });
    };
    const onError = (err: Error) => {
      stop();
      reject(err);
    };
    const onAbort = () => {
      stop();
      reject(signal!.reason instanceof Error ? signal!.reason : new Error('aborted'));
    };
    if (signal?.aborted) return onAbort();
    body.on('data', onData);
    body.once('end', onEnd);
    body.once('error', onError);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
