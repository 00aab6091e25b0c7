/**
 * Staged writes: an upload whose bytes arrive at arbitrary offsets, pipelined and out of order
 * (SFTP WRITE), cannot stream straight into a blob. It is kept in a local temporary file under
 * <data_dir>/staging until the client closes it, then committed through its write handle
 * (write.ts: new blob, one tree change), so readers never see a half-written file and an aborted
 * upload leaves the old content. Adapters see only writeAt/truncate/commit/abort.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { closeSync, createReadStream, fdatasync, fsync, ftruncate, read, writev, writevSync } from 'node:fs';
import { mkdir, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { promisify } from 'node:util';
import { classifyStorageError, GatewayError, isStorageFull } from '../errors.ts';
import { Checksum, type Digest } from './checksum.ts';
import { Folders } from './folders.ts';
import { SpareFiles } from './spares.ts';
import type { Entry } from './namespace.ts';
import type { WriteHandle } from './write.ts';
import { WriteBehind } from './writebehind.ts';

/**
 * STALE_STAGING_MS is how long a temporary file of unknown writer (named before writers were
 * recorded) may go unmodified before the sweep deletes it. Files of a known writer go as soon as
 * that writer is known to be dead (see TempOwners).
 */
export const STALE_STAGING_MS = 6 * 3600 * 1000;

/**
 * OWNER names this process in the temporary files it writes (staging `<owner>.<uuid>.part`, a
 * local store's `<id>.<owner>.partial`) and in the blob leases it holds, so a sweep can tell the
 * files of a live writer from those a crash abandoned without waiting hours (issue 12).
 */
export const OWNER = `p${process.pid}-${randomBytes(4).toString('hex')}`;
const OWNER_PATTERN = /^p(\d+)-[0-9a-f]{8}$/;

/** HEARTBEAT_MS is how often a live process touches its owner file; 3 missed beats mean dead. */
export const HEARTBEAT_MS = 60_000;

/**
 * TempOwners keeps this process's owner file `<data_dir>/owners/<OWNER>` (its host, touched every
 * minute) and judges other writers: dead when their owner file is gone or stale, or when it names
 * this host and its pid no longer runs (kill -9, then a restart: found dead at once). Instances on
 * other hosts sharing the data dir are judged by the beat alone.
 */
export class TempOwners {
  private timer: NodeJS.Timeout | null = null;

  constructor(private readonly dir: string) {}

  private fileOf(owner: string): string {
    return path.join(this.dir, owner);
  }

  /** start writes this process's owner file and touches it every HEARTBEAT_MS until stop. */
  async start(): Promise<void> {
    await this.beat();
    this.timer ??= setInterval(() => void this.beat().catch(() => undefined), HEARTBEAT_MS);
    this.timer.unref();
  }

  private async beat(): Promise<void> {
    await mkdir(this.dir, { recursive: true });
    await writeFile(this.fileOf(OWNER), JSON.stringify({ host: os.hostname(), pid: process.pid }));
  }

  /** stop ends the beat and removes the owner file (a clean stop leaves no temporary file). */
  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await rm(this.fileOf(OWNER), { force: true });
  }

  /**
   * dead tells whether `owner` is known to have stopped. `missing` is the answer when it has no
   * owner file: true for temporary files (every writer beats before it writes one), false for
   * leases (they may come from an instance with its own data dir; they expire anyway).
   */
  async dead(owner: string, missing: boolean): Promise<boolean> {
    if (owner === OWNER) return false;
    const m = OWNER_PATTERN.exec(owner);
    if (!m) return false;
    let beat: { host?: string; pid?: number };
    let beatAt: number;
    try {
      const file = this.fileOf(owner);
      beatAt = (await stat(file)).mtimeMs;
      beat = JSON.parse(await readFile(file, 'utf8')) as typeof beat;
    } catch {
      return missing;
    }
    if (Date.now() - beatAt > 3 * HEARTBEAT_MS) return true;
    return beat.host === os.hostname() && !running(Number(m[1]));
  }

  /** forget removes the owner files of the dead `owners`, once their leftovers are gone. */
  async forget(owners: Iterable<string>): Promise<void> {
    for (const owner of owners) if (owner !== OWNER) await rm(this.fileOf(owner), { force: true });
  }
}

/** running tells whether a process with this pid runs on this host (EPERM: it does, not ours). */
function running(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as { code?: string }).code === 'EPERM';
  }
}

/**
 * Abandoned judges a temporary file by its writer (null: a name from before writers were
 * recorded) and its modification time.
 */
export type Abandoned = (owner: string | null, mtimeMs: number) => Promise<boolean>;

/**
 * abandonedBy judges temporary files: a known writer's when it is dead, an unknown writer's once
 * nothing has written it for `olderThanMs`. It also collects the dead owners it saw.
 */
export function abandonedBy(owners: TempOwners, olderThanMs: number, seen: Set<string>): Abandoned {
  const verdicts = new Map<string, Promise<boolean>>();
  return async (owner, mtimeMs) => {
    if (owner === null) return mtimeMs < Date.now() - olderThanMs;
    let verdict = verdicts.get(owner);
    if (!verdict) verdicts.set(owner, (verdict = owners.dead(owner, true)));
    const dead = await verdict;
    if (dead) seen.add(owner);
    return dead;
  };
}

/**
 * stagingSpares makes the staged writes' files in `dir` ahead of need (spares.ts), named as a
 * staged file is: with this process's OWNER, which the crash sweep reads.
 */
export function stagingSpares(dir: string): SpareFiles {
  return new SpareFiles(dir, () => `${OWNER}.${randomUUID()}.part`);
}

/** sweepStaging deletes the temporary files in `dir` that `abandoned` judges left by a crash. */
export function sweepStaging(dir: string, abandoned: Abandoned): Promise<number> {
  return sweepStale(dir, '.part', (name) => /^(p\d+-[0-9a-f]{8})\./.exec(name)?.[1] ?? null, abandoned);
}

/**
 * sweepStale deletes the files named `*<suffix>` in `dir` and its subfolders that `abandoned`
 * judges left behind (`ownerOf` reads the writer from the file name), and returns how many it
 * deleted (a missing `dir` has none).
 */
export async function sweepStale(
  dir: string,
  suffix: string,
  ownerOf: (name: string) => string | null,
  abandoned: Abandoned,
): Promise<number> {
  let names: string[];
  try {
    names = await readdir(dir, { recursive: true });
  } catch (err) {
    if ((err as { code?: string }).code === 'ENOENT') return 0;
    throw err;
  }
  let deleted = 0;
  for (const name of names) {
    if (!name.endsWith(suffix)) continue;
    const file = path.join(dir, name);
    const info = await stat(file).catch(() => null);
    if (!info?.isFile() || !(await abandoned(ownerOf(path.basename(name)), info.mtimeMs))) continue;
    await rm(file, { force: true });
    deleted++;
  }
  return deleted;
}

/** SMALL_STAGED is the size up to which a staged file is written with plain system calls. */
const SMALL_STAGED = 64 * 1024;

/** unwritten is what is left of `pieces` after their first `skip` bytes (a short write's rest). */
function unwritten(pieces: readonly Uint8Array[], skip: number): Uint8Array[] {
  if (skip === 0) return pieces as Uint8Array[];
  const out: Uint8Array[] = [];
  for (const p of pieces) {
    if (skip >= p.length) skip -= p.length;
    else {
      out.push(skip > 0 ? p.subarray(skip) : p);
      skip = 0;
    }
  }
  return out;
}

const writevAt = promisify(writev);
const readAt = promisify(read);
const truncateFd = promisify(ftruncate);
const syncFd = promisify(fsync);
const datasyncFd = promisify(fdatasync);

/**
 * StagingFile is a staging file's descriptor. The file is made ahead (spares.ts) and closed on the
 * event loop, as a small file's writes are made (writeAt): OpenSSH's `put -r` waits for each
 * file's OPEN and CLOSE, and a trip through the thread pool costs more than a close or a small
 * write on a local disk. Larger writes, reads, truncation and sync go through the pool. As a
 * FileHandle does, close waits for the calls in the pool (a session cut mid-transfer has WRITEs in
 * flight), and the descriptor is closed once: a number closed early could be reused by another
 * file, which they would write.
 */
class StagingFile {
  private inFlight = 0;
  private readonly idle: (() => void)[] = [];
  private closing = false;
  private closed = false;

  private constructor(private readonly fd: number) {}

  /** of takes over `fd`, an open file's descriptor (a spare: spares.ts). */
  static of(fd: number): StagingFile {
    return new StagingFile(fd);
  }

  writevSync(pieces: Uint8Array[], position: number): number {
    this.usable();
    return writevSync(this.fd, pieces, position);
  }

  async writev(pieces: Uint8Array[], position: number): Promise<number> {
    return (await this.pooled(() => writevAt(this.fd, pieces, position))).bytesWritten;
  }

  async read(buf: Buffer, offset: number, length: number, position: number): Promise<number> {
    return (await this.pooled(() => readAt(this.fd, buf, offset, length, position))).bytesRead;
  }

  truncate(size: number): Promise<void> {
    return this.pooled(() => truncateFd(this.fd, size));
  }

  sync(): Promise<void> {
    return this.pooled(() => syncFd(this.fd));
  }

  datasync(): Promise<void> {
    return this.pooled(() => datasyncFd(this.fd));
  }

  /** close closes the descriptor once the calls in the pool are done; it rejects with close(2)'s error. */
  async close(): Promise<void> {
    this.closing = true;
    while (this.inFlight > 0) await new Promise<void>((resolve) => this.idle.push(resolve));
    if (this.closed) return;
    this.closed = true;
    closeSync(this.fd);
  }

  private async pooled<T>(call: () => Promise<T>): Promise<T> {
    this.usable();
    this.inFlight++;
    try {
      return await call();
    } finally {
      if (--this.inFlight === 0) for (const resolve of this.idle.splice(0)) resolve();
    }
  }

  private usable(): void {
    if (this.closing) throw new Error('the staging file is closed');
  }
}

/** stagingFolders are the staging folders this process has made (StagedWrite.open). */
const stagingFolders = new Folders();

/** StagedWrite is one open upload held in a temporary file until commit or abort. */
export class StagedWrite {
  private done = false;
  private dirty = false;
  private mtime: Date | undefined;
  // md5 and crc32 of the bytes written so far, kept while every write lands at the end (how
  // OpenSSH, WinSCP and rclone upload): the commit then needs no second pass over the file.
  private checksum: Checksum | null = new Checksum();
  private hashedUpTo = 0;
  // Set once the staging disk refused a write for want of space: every later write and the commit
  // fail with this same error at once, so a client's pipelined WRITEs after the first make no
  // more I/O and the front end can tell it is one failed upload, not many (issue 12).
  private full: GatewayError | null = null;
  // How far the content is written without a hole (`prefix`), and the completed writes beyond it
  // (start -> end): pipelined WRITEs complete out of order, and a cut keeps only the bytes up to
  // the first hole, so a client resuming at the pending size never leaves zeros in the file.
  private prefix = 0;
  private readonly ahead = new Map<number, number>();
  // The bytes of the user's pending version this write started from, while nothing changed them:
  // object storage then keeps them as parts and only what follows is uploaded at the commit.
  private pendingKept = 0;
  // When the store will sync the staged file as it adopts it (local, `fsync`), the disk writes
  // start while the bytes arrive (writebehind.ts).
  private behind: WriteBehind | null = null;

  private constructor(
    private readonly handle: WriteHandle,
    private readonly file: string,
    private readonly fh: StagingFile,
    /** the current size of the staged content */
    public size: number,
  ) {}

  /**
   * open starts a staged write in a file of `spares` (the staging folder) for an open write
   * handle: empty, or holding `current` (the file's content, when the client opened it without
   * truncating) so writes can patch it (OpenSSH `reput`, WRITE without TRUNC).
   */
  static async open(
    handle: WriteHandle,
    spares: SpareFiles,
    current: Readable | null,
    truncate: boolean,
  ): Promise<StagedWrite> {
    let file: string;
    let fd: number;
    let fh: StagingFile;
    try {
      // OpenSSH's `put -r` waits for every file's OPEN: the folder is made once per process, and
      // the file was made ahead.
      ({ file, fd } = await stagingFolders.within(spares.dir, () => spares.create()));
      fh = StagingFile.of(fd);
    } catch (err) {
      current?.destroy();
      throw handle.noteFull(classifyStorageError(err));
    }
    const staged = new StagedWrite(handle, file, fh, 0);
    if (handle.adoptSyncs) staged.behind = new WriteBehind(() => fh.datasync());
    try {
      if (current)
        for await (const chunk of current as AsyncIterable<Buffer>) await staged.writeAt(staged.size, chunk);
    } catch (err) {
      current?.destroy();
      await staged.abort();
      throw err;
    }
    // A new file, or a truncated one, exists from the moment it is opened (as on a disk), but
    // only as an empty commit at close: nothing is written to the namespace before then.
    staged.dirty = truncate || !handle.existing;
    if (!truncate && handle.pending) staged.pendingKept = staged.size;
    return staged;
  }

  /**
   * writeAt writes `data` at `offset`, growing the content as needed (holes read as zeros). The
   * data may come in pieces, written in order with one system call and never joined: an SFTP
   * WRITE of 256 KiB arrives in eight SSH packets.
   */
  async writeAt(offset: number, data: Uint8Array | readonly Uint8Array[]): Promise<void> {
    this.live();
    if (this.full) throw this.full;
    const pieces = data instanceof Uint8Array ? [data] : data;
    let length = 0;
    for (const p of pieces) length += p.length;
    if (offset < this.pendingKept) this.pendingKept = 0;
    // Hashed before the await, so pipelined writes are hashed in the order they were issued.
    let hashing: Promise<void> | undefined;
    if (this.checksum && offset === this.hashedUpTo) {
      for (const p of pieces) hashing = this.checksum.update(p) ?? hashing;
      this.hashedUpTo += length;
    } else {
      this.dropChecksum();
    }
    let at = 0;
    try {
      // A small file's writes go straight to the page cache on the event loop, as a small blob's
      // do (blobstores/local.ts): a sequential client (OpenSSH `put -r`) waits for each reply, and
      // a trip through the thread pool costs more than the write. Past SMALL_STAGED, the pool.
      if (offset + length <= SMALL_STAGED)
        while (at < length) at += this.fh.writevSync(unwritten(pieces, at), offset + at);
      while (at < length) at += await this.fh.writev(unwritten(pieces, at), offset + at);
    } catch (err) {
      throw this.classify(err);
    }
    this.size = Math.max(this.size, offset + length);
    this.behind?.written(this.size);
    this.dirty = true;
    this.written(offset, offset + length);
    // The hashing worker lagging holds the writer back, as the disk does.
    if (hashing) await hashing;
  }

  /** dropChecksum gives up the running checksum: the content is no longer written in order. */
  private dropChecksum(): void {
    this.checksum?.discard();
    this.checksum = null;
  }

  /** takeChecksum ends the running checksum and gives its digest. */
  private takeChecksum(): Promise<Digest> {
    const checksum = this.checksum!;
    this.checksum = null;
    return checksum.digest();
  }

  /** written notes that [start, end) holds what the client sent, and moves the hole-free prefix. */
  private written(start: number, end: number): void {
    if (start > this.prefix) {
      this.ahead.set(start, Math.max(end, this.ahead.get(start) ?? 0));
      return;
    }
    this.prefix = Math.max(this.prefix, end);
    for (let moved = true; moved;) {
      moved = false;
      for (const [s, e] of this.ahead)
        if (s <= this.prefix) {
          this.ahead.delete(s);
          this.prefix = Math.max(this.prefix, e);
          moved = true;
        }
    }
  }

  /**
   * readAt reads up to `length` bytes of the staged content at `offset` (a file opened read-write:
   * SQLite reads back what it wrote before the close); empty at or past the end.
   */
  async readAt(offset: number, length: number): Promise<Buffer> {
    this.live();
    const n = Math.max(0, Math.min(length, this.size - offset));
    if (n === 0) return Buffer.alloc(0);
    const buf = Buffer.allocUnsafe(n);
    let got = 0;
    while (got < n) {
      const bytesRead = await this.fh.read(buf, got, n - got, offset + got);
      if (bytesRead === 0) break;
      got += bytesRead;
    }
    return got === n ? buf : buf.subarray(0, got);
  }

  /**
   * retarget makes the commit write `filePath` instead (the open file was renamed, as on a disk
   * where an open file follows its rename); write permission and parent are checked for it.
   */
  async retarget(filePath: string): Promise<void> {
    this.live();
    await this.handle.retarget(filePath);
  }

  /** isOpen tells whether the write still takes bytes (neither committed nor aborted). */
  get isOpen(): boolean {
    return !this.done;
  }

  /** isNew tells whether the file did not exist when this write was opened (not even as the user's pending version). */
  get isNew(): boolean {
    return this.handle.existing === null && this.handle.pending === null;
  }

  /** truncate sets the content's size (SFTP SETSTAT size; `scp` truncates after writing). */
  async truncate(size: number): Promise<void> {
    this.live();
    if (size !== this.hashedUpTo) this.dropChecksum();
    if (size < this.pendingKept) this.pendingKept = 0;
    await this.fh.truncate(size).catch((err: unknown) => {
      throw this.classify(err);
    });
    this.size = size;
    this.prefix = Math.min(this.prefix, size);
    for (const [s, e] of this.ahead)
      if (s >= size) this.ahead.delete(s);
      else this.ahead.set(s, Math.min(e, size));
    this.dirty = true;
  }

  /** setMtime makes the commit keep this modification time (SFTP FSETSTAT before CLOSE). */
  setMtime(mtime: Date): void {
    this.mtime = mtime;
  }

  /** mtimeSet is the modification time setMtime asked for, if any. */
  get mtimeSet(): Date | undefined {
    return this.mtime;
  }

  /** changed tells whether anything was written or truncated since open. */
  get changed(): boolean {
    return this.dirty;
  }

  /** flush makes the staged bytes durable on local disk (fsync@openssh.com). */
  async flush(): Promise<void> {
    this.live();
    await this.fh.sync().catch((err: unknown) => {
      throw this.classify(err);
    });
  }

  /**
   * commit streams the staged content into a new blob and points the file at it (a `create` or
   * `update` Action), then deletes the temporary file. On failure nothing changes.
   */
  async commit(opts: { signal?: AbortSignal } = {}): Promise<Entry> {
    this.live();
    if (this.full) {
      // Some bytes never reached the staging file: committing would store a file with holes.
      const full = this.full;
      await this.abort();
      throw full;
    }
    this.done = true;
    // Whether the staged file became the blob (renamed into the store): nothing is left to delete.
    let moved = false;
    try {
      await this.behind?.settle().catch((err: unknown) => {
        throw this.classify(err);
      });
      await this.fh.close();
      const mtime = this.mtime ? { mtime: this.mtime } : {};
      // A resume that only added bytes after the pending version's: on object storage those are
      // the only ones uploaded.
      const kept = this.pendingKept;
      const resumed =
        kept > 0 && (await this.handle.putOnPending(() => createReadStream(this.file, { start: kept })));
      // Written in order: the hashes are known and the staged file itself can become the blob.
      moved =
        !resumed &&
        !!this.checksum &&
        this.hashedUpTo === this.size &&
        (await this.handle.putFile(this.file, await this.takeChecksum()));
      this.dropChecksum();
      if (!resumed && !moved)
        await this.handle.put(createReadStream(this.file), opts.signal ? { signal: opts.signal } : {});
      return await this.handle.commit(mtime);
    } catch (err) {
      await this.handle.abort();
      throw err;
    } finally {
      if (!moved) await rm(this.file, { force: true });
    }
  }

  /**
   * suspend ends a write whose client went away without CLOSE: the content up to the first hole
   * becomes the user's pending version of the path (write.ts suspend, pending.ts), which OpenSSH's
   * `reput` or WinSCP's resume continue; the file keeps its old content. Nothing written, or a
   * full staging disk: abort. Safe to call twice. A stopping gateway waits for it (Blobs.finishing).
   */
  suspend(): Promise<boolean> {
    return this.handle.finishing(() => this.keepPending());
  }

  private async keepPending(): Promise<boolean> {
    if (this.done) return false;
    if (!this.dirty || this.full || this.prefix === 0) {
      await this.abort();
      return false;
    }
    this.done = true;
    this.dropChecksum();
    try {
      await this.fh.truncate(this.prefix);
      await this.fh.close();
      const kept = this.prefix >= this.pendingKept ? this.pendingKept : 0;
      const adopted =
        (kept > 0 && (await this.handle.putOnPending(() => createReadStream(this.file, { start: kept })))) ||
        (await this.handle.putFile(this.file, { md5: null, crc32: null }));
      if (!adopted) await this.handle.put(createReadStream(this.file));
      return await this.handle.suspend();
    } catch {
      await this.fh.close().catch(() => undefined);
      await this.handle.abort();
      return false;
    } finally {
      await rm(this.file, { force: true });
    }
  }

  /** abort discards the staged content; the file keeps its old content. Safe to call twice. */
  async abort(): Promise<void> {
    if (this.done) return;
    this.done = true;
    this.dropChecksum();
    await this.fh.close().catch(() => undefined);
    await rm(this.file, { force: true });
    await this.handle.abort();
  }

  private live(): void {
    if (this.done)
      throw new GatewayError('processing-failure/file-not-uploaded', 'This upload is already closed');
  }

  /** classify turns a full staging disk into insufficient-storage, remembered for what follows. */
  private classify(err: unknown): unknown {
    const classified = classifyStorageError(err);
    if (isStorageFull(classified) && !this.full) {
      this.full = classified as GatewayError;
      this.handle.noteFull(classified);
    }
    return this.full ?? classified;
  }
}
