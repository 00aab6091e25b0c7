/**
 * One SFTP v3 session on a raw `sftp` subsystem channel: the packet loop, flow control, and the
 * mapping of each request onto the core's FileSession. Ours rather than ssh2's SFTP module, which
 * cannot advertise extensions, send EXTENDED_REPLY or apply backpressure (research/libraries.md §2).
 *
 * Flow control: at most `maxInflight` requests run at once; beyond that, and while the client is
 * not reading our replies, the channel is paused, so SSH's window closes and the client waits.
 * Memory per session is then bounded by the window (2 MiB) plus the in-flight requests' data.
 */
import { randomUUID } from 'node:crypto';
import { setMaxListeners } from 'node:events';
import { statfs } from 'node:fs/promises';
import type { Duplex } from 'node:stream';
import { GatewayError, resolveChroot, type Entry, type FileSession } from '../../src/core/index.ts';
import type { Logger } from '../../src/log.ts';
import { sftpStatus } from './errors.ts';
import {
  HandleTable,
  openEntry,
  StreamCursor,
  type Handle,
  type ReadHandle,
  type WriteHandle,
} from './handles.ts';
import {
  BadMessage,
  FXP,
  MAX_DATA,
  MAX_PACKET,
  OpenFlags,
  PacketSplitter,
  Reader,
  Status,
  Writer,
  type Attrs,
  type StatusCode,
} from './packets.ts';

/** EXTENSIONS are advertised in VERSION; each is implemented below, and nothing else is advertised. */
const EXTENSIONS: [string, string][] = [
  ['posix-rename@openssh.com', '1'],
  ['statvfs@openssh.com', '2'],
  ['fstatvfs@openssh.com', '2'],
  ['fsync@openssh.com', '1'],
  ['limits@openssh.com', '1'],
  ['expand-path@openssh.com', '1'],
  // OpenSSH's copy-data (sftp >= 9.0 `cp`): the whole-file case is a core copy sharing the blob.
  ['copy-data', '1'],
  // WinSCP's checksum (draft-ietf-secsh-filexfer-extensions-00 §3): md5 of a whole file, stored.
  ['check-file-name', 'md5'],
  ['check-file-handle', 'md5'],
];
const LIST_PAGE = 100;
/** A READ that skips ahead less than this reads through the open stream rather than reopening it. */
const SKIP_LIMIT = 1024 * 1024;

/** SftpSessionOptions are the limits and hooks of one session. */
export interface SftpSessionOptions {
  maxHandles: number;
  maxInflight: number;
  /** where statvfs reports space for (the data dir) */
  dataDir: string;
  username: string;
  log: Logger;
  /** called on every request, for the connection's idle timer */
  touch: () => void;
}

/** SftpSession serves SFTP v3 on one channel for one logged-in principal. */
export class SftpSession {
  private readonly splitter = new PacketSplitter();
  private readonly handles: HandleTable;
  private readonly backlog: Buffer[] = [];
  private readonly abort = new AbortController();
  private inflight = 0;
  private writeBlocked = false;
  private ending = false;
  private closed = false;

  constructor(
    private readonly channel: Duplex & { exit?: (code: number) => void },
    private readonly files: FileSession,
    private readonly opts: SftpSessionOptions,
  ) {
    this.handles = new HandleTable(opts.maxHandles);
    // Every open stream listens on the session's signal; the handle cap bounds how many.
    setMaxListeners(opts.maxHandles + opts.maxInflight + 16, this.abort.signal);
    channel.on('data', (chunk: Buffer) => this.onData(chunk));
    channel.on('end', () => {
      this.ending = true;
      this.maybeFinish();
    });
    channel.on('close', () => void this.release());
    channel.on('error', (err: Error) => opts.log.debug('sftp channel error', { error: err.message }));
  }

  /** busy tells whether requests are running (an upload being committed is not idle). */
  get busy(): boolean {
    return this.inflight > 0;
  }

  private onData(chunk: Buffer): void {
    if (this.closed) return;
    try {
      for (const p of this.splitter.push(chunk)) this.backlog.push(p);
    } catch (err) {
      // A packet over the limit cannot be skipped reliably: end the session as OpenSSH does.
      this.opts.log.warn('sftp: malformed stream, closing', { error: (err as Error).message });
      this.channel.destroy();
      return;
    }
    this.pump();
  }

  private pump(): void {
    while (this.backlog.length && this.inflight < this.opts.maxInflight && !this.writeBlocked && !this.closed)
      this.dispatch(this.backlog.shift()!);
    if (this.backlog.length || this.writeBlocked) this.channel.pause();
    else if (!this.closed) this.channel.resume();
    this.maybeFinish();
  }

  private send(packet: Buffer): void {
    if (this.closed || this.channel.destroyed) return;
    if (!this.channel.write(packet) && !this.writeBlocked) {
      // The client is not reading replies (or its window is shut): stop taking requests.
      this.writeBlocked = true;
      this.channel.once('drain', () => {
        this.writeBlocked = false;
        this.pump();
      });
    }
  }

  /** maybeFinish ends the channel once the client sent EOF and every request was answered. */
  private maybeFinish(): void {
    if (!this.ending || this.closed || this.inflight > 0 || this.backlog.length) return;
    this.closed = true;
    // OpenSSH's sftp -b and scp wait for exit-status and the channel close (research §2, 2 and 3).
    this.channel.exit?.(0);
    this.channel.end();
    void this.release();
  }

  private async release(): Promise<void> {
    this.closed = true;
    this.abort.abort();
    this.backlog.length = 0;
    await this.handles.releaseAll();
  }

  private dispatch(payload: Buffer): void {
    this.opts.touch();
    const type = payload[0]!;
    const r = new Reader(payload.subarray(1));
    if (type === FXP.INIT) {
      const w = new Writer(FXP.VERSION).u32(3);
      for (const [name, data] of EXTENSIONS) w.string(name).string(data);
      this.send(w.done());
      return;
    }
    let id: number;
    try {
      id = r.u32();
    } catch {
      this.channel.destroy();
      return;
    }
    this.inflight++;
    this.request(type, id, r)
      .catch((err: unknown) => this.fail(id, err))
      .finally(() => {
        this.inflight--;
        this.opts.touch();
        this.pump();
      });
  }

  private status(id: number, code: StatusCode, message = ''): void {
    this.send(new Writer(FXP.STATUS, id).u32(code).string(message).string('en').done());
  }

  private fail(id: number, err: unknown): void {
    if (err instanceof GatewayError) {
      const { code, message } = sftpStatus(err);
      this.status(id, code, message);
    } else if (err instanceof BadMessage) {
      this.status(id, Status.BAD_MESSAGE, err.message);
    } else if (this.abort.signal.aborted) {
      // The session is gone; there is nobody to answer.
    } else {
      const instance = randomUUID();
      this.opts.log.error('sftp request failed', { instance, error: String((err as Error)?.stack ?? err) });
      this.status(id, Status.FAILURE, `Internal error (instance ${instance})`);
    }
  }

  /** path resolves a client path like a chroot: relative to the root (the home), `..` stops there. */
  private path(p: string): string {
    return resolveChroot('', p);
  }

  private handle(r: Reader): Handle {
    const h = this.handles.get(r.bytes());
    if (!h) throw new GatewayError('bad-request/request-params-invalid', 'Invalid handle');
    return h;
  }

  /** onHandle runs `fn` after every earlier request on the same handle. */
  private onHandle<T>(h: Handle, fn: () => Promise<T>): Promise<T> {
    const p = h.queue.then(fn);
    h.queue = p.catch(() => undefined);
    return p;
  }

  /** onHandles runs `fn` after every earlier request on each of `hs`, and before any later one. */
  private onHandles<T>(hs: Handle[], fn: () => Promise<T>): Promise<T> {
    const p = Promise.all(hs.map((h) => h.queue)).then(fn);
    for (const h of hs) h.queue = p.catch(() => undefined);
    return p;
  }

  private attrs(e: Entry): Attrs {
    const mtime = Math.floor(e.mtime.getTime() / 1000);
    return {
      size: e.size ?? 0,
      permissions: e.type === 'directory' ? 0o40755 : 0o100644,
      atime: mtime,
      mtime,
    };
  }

  private async request(type: number, id: number, r: Reader): Promise<void> {
    const f = this.files;
    switch (type) {
      case FXP.OPEN:
        return this.open(id, r);
      case FXP.CLOSE: {
        const raw = r.bytes();
        const h = this.handles.get(raw);
        if (!h) throw new GatewayError('bad-request/request-params-invalid', 'Invalid handle');
        return this.onHandle(h, async () => {
          this.handles.delete(raw);
          if (h.kind === 'read') h.cursor?.close();
          // The upload becomes visible here, and its failure is reported here.
          if (h.kind === 'write') await this.commit(h);
          this.status(id, Status.OK);
        });
      }
      case FXP.READ: {
        const h = this.handle(r);
        const offset = r.u64();
        const len = Math.min(r.u32(), MAX_DATA);
        return this.onHandle(h, async () => {
          if (h.kind !== 'read')
            throw new GatewayError(
              'bad-request/request-params-invalid',
              'This handle is not open for reading',
            );
          if (offset >= (h.entry.size ?? 0) || len === 0) return this.status(id, Status.EOF, 'End of file');
          const c = h.cursor;
          if (c && offset > c.pos && offset - c.pos <= SKIP_LIMIT) await c.take(offset - c.pos);
          if (!h.cursor || h.cursor.pos !== offset) {
            h.cursor?.close();
            const dl = await f.openRead(h.path, {
              range: { start: offset },
              record: false,
              signal: this.abort.signal,
            });
            h.cursor = new StreamCursor(dl.stream, offset);
          }
          const data = await h.cursor.take(len);
          if (data.length === 0) return this.status(id, Status.EOF, 'End of file');
          this.send(new Writer(FXP.DATA, id).bytes(data).done());
        });
      }
      case FXP.WRITE: {
        const h = this.handle(r);
        const offset = r.u64();
        const data = r.bytes();
        return this.onHandle(h, async () => {
          if (h.kind !== 'write')
            throw new GatewayError(
              'bad-request/request-params-invalid',
              'This handle is not open for writing',
            );
          await this.materialize(h);
          await h.staged.writeAt(h.append ? h.staged.size : offset, data);
          this.status(id, Status.OK);
        });
      }
      case FXP.FSTAT: {
        const h = this.handle(r);
        return this.onHandle(h, async () => {
          this.send(new Writer(FXP.ATTRS, id).attrs(this.attrs(await openEntry(f, h))).done());
        });
      }
      case FXP.STAT:
      case FXP.LSTAT: {
        const e = await f.stat(this.path(r.string()));
        return this.send(new Writer(FXP.ATTRS, id).attrs(this.attrs(e)).done());
      }
      case FXP.SETSTAT: {
        const p = this.path(r.string());
        const a = r.attrs();
        if (a.size !== undefined) {
          const staged = await f.stage(p, { truncate: a.size === 0, signal: this.abort.signal });
          try {
            await staged.truncate(a.size);
            if (a.mtime !== undefined) staged.setMtime(new Date(a.mtime * 1000));
            await staged.commit({ signal: this.abort.signal });
          } finally {
            await staged.abort();
          }
        } else if (a.mtime !== undefined) {
          await f.setMtime(p, new Date(a.mtime * 1000));
        }
        // uid, gid and permissions are accepted and ignored: the gateway has no owners or modes.
        return this.status(id, Status.OK);
      }
      case FXP.FSETSTAT: {
        const h = this.handle(r);
        const a = r.attrs();
        return this.onHandle(h, async () => {
          if (h.kind === 'write') {
            if (a.size !== undefined) {
              await this.materialize(h);
              await h.staged.truncate(a.size);
            }
            if (a.mtime !== undefined) {
              h.mtime = new Date(a.mtime * 1000);
              h.staged.setMtime(h.mtime);
            }
          } else if (a.mtime !== undefined) {
            await f.setMtime(h.path, new Date(a.mtime * 1000));
          }
          this.status(id, Status.OK);
        });
      }
      case FXP.OPENDIR: {
        const p = this.path(r.string());
        const release = this.handles.reserve();
        // Listing one entry checks that it is a folder the principal may list.
        await f.list(p, { sort: 'path', direction: 'asc', offset: 0, limit: 1 }).finally(release);
        const handle = this.handles.add({ kind: 'dir', path: p, offset: 0, done: false });
        return this.send(new Writer(FXP.HANDLE, id).bytes(handle).done());
      }
      case FXP.READDIR: {
        const h = this.handle(r);
        return this.onHandle(h, async () => {
          if (h.kind !== 'dir')
            throw new GatewayError('bad-request/request-params-invalid', 'This handle is not a folder');
          if (h.done) return this.status(id, Status.EOF, 'End of folder');
          const page = await f.list(h.path, {
            sort: 'path',
            direction: 'asc',
            offset: h.offset,
            limit: LIST_PAGE,
          });
          h.offset += page.length;
          if (page.length === 0) {
            h.done = true;
            return this.status(id, Status.EOF, 'End of folder');
          }
          const w = new Writer(FXP.NAME, id).u32(page.length);
          for (const e of page) {
            const name = e.path.slice(e.path.lastIndexOf('/') + 1);
            w.string(name)
              .string(longname(e, name, this.opts.username))
              .attrs(this.attrs(e));
          }
          this.send(w.done());
        });
      }
      case FXP.REMOVE: {
        const p = this.path(r.string());
        const e = await f.stat(p);
        if (e.type === 'directory')
          throw new GatewayError('bad-request/request-params-invalid', `/${p} is a folder; use rmdir`);
        await f.remove(p);
        return this.status(id, Status.OK);
      }
      case FXP.RMDIR: {
        const p = this.path(r.string());
        const e = await f.stat(p);
        if (e.type !== 'directory')
          throw new GatewayError('bad-request/folder-must-not-be-a-file', `/${p} is not a folder`);
        await f.remove(p);
        return this.status(id, Status.OK);
      }
      case FXP.MKDIR: {
        const p = this.path(r.string());
        r.attrs();
        await f.mkdir(p);
        return this.status(id, Status.OK);
      }
      case FXP.REALPATH: {
        const p = `/${this.path(r.string())}`;
        return this.send(new Writer(FXP.NAME, id).u32(1).string(p).string(p).attrs({}).done());
      }
      case FXP.RENAME: {
        // SFTP v3 RENAME fails when the target exists; posix-rename@openssh.com replaces it.
        await f.move(this.path(r.string()), this.path(r.string()));
        return this.status(id, Status.OK);
      }
      case FXP.READLINK:
      case FXP.SYMLINK:
        return this.status(id, Status.OP_UNSUPPORTED, 'Symbolic links are not supported');
      case FXP.EXTENDED:
        return this.extended(id, r);
      default:
        return this.status(id, Status.OP_UNSUPPORTED, `Unsupported request type ${type}`);
    }
  }

  private async open(id: number, r: Reader): Promise<void> {
    const p = this.path(r.string());
    const flags = r.u32();
    r.attrs();
    const release = this.handles.reserve();
    try {
      await this.openFile(id, p, flags);
    } finally {
      release();
    }
  }

  private async openFile(id: number, p: string, flags: number): Promise<void> {
    if (flags & (OpenFlags.WRITE | OpenFlags.APPEND)) {
      if (flags & OpenFlags.EXCL || !(flags & OpenFlags.CREAT)) {
        const exists = await this.files.stat(p).then(
          () => true,
          (err: unknown) => {
            if (err instanceof GatewayError && err.family === 'not-found') return false;
            throw err;
          },
        );
        if (exists && flags & OpenFlags.EXCL)
          throw new GatewayError('processing-failure/destination-exists', `/${p} already exists`);
        if (!exists && !(flags & OpenFlags.CREAT))
          throw new GatewayError('not-found/file-not-found', `/${p} does not exist`);
      }
      const staged = await this.files.stage(p, {
        truncate: (flags & OpenFlags.TRUNC) !== 0,
        signal: this.abort.signal,
      });
      if (this.closed) {
        await staged.abort();
        return;
      }
      const handle = this.handles.add({
        kind: 'write',
        path: p,
        staged,
        append: (flags & OpenFlags.APPEND) !== 0,
        pendingCopy: null,
        mtime: null,
      });
      return this.send(new Writer(FXP.HANDLE, id).bytes(handle).done());
    }
    const dl = await this.files.openRead(p, { signal: this.abort.signal });
    if (this.closed) {
      dl.stream.destroy();
      return;
    }
    const handle = this.handles.add({
      kind: 'read',
      path: p,
      entry: dl.entry,
      cursor: new StreamCursor(dl.stream, 0),
    });
    this.send(new Writer(FXP.HANDLE, id).bytes(handle).done());
  }

  private async extended(id: number, r: Reader): Promise<void> {
    const name = r.string();
    switch (name) {
      case 'posix-rename@openssh.com':
        await this.files.move(this.path(r.string()), this.path(r.string()), { overwrite: true });
        return this.status(id, Status.OK);
      case 'statvfs@openssh.com':
      case 'fstatvfs@openssh.com': {
        if (name === 'statvfs@openssh.com') await this.files.stat(this.path(r.string()));
        else this.handle(r);
        // The blob store's space is the site's space; for S3 this is the local data dir's.
        const s = await statfs(this.opts.dataDir);
        const w = new Writer(FXP.EXTENDED_REPLY, id);
        for (const v of [s.bsize, s.bsize, s.blocks, s.bfree, s.bavail, s.files, s.ffree, s.ffree, 0, 0, 255])
          w.u64(v);
        return this.send(w.done());
      }
      case 'fsync@openssh.com': {
        const h = this.handle(r);
        return this.onHandle(h, async () => {
          if (h.kind === 'write') await h.staged.flush();
          this.status(id, Status.OK);
        });
      }
      case 'limits@openssh.com': {
        const w = new Writer(FXP.EXTENDED_REPLY, id)
          .u64(MAX_PACKET)
          .u64(MAX_DATA)
          .u64(MAX_DATA)
          .u64(this.opts.maxHandles);
        return this.send(w.done());
      }
      case 'expand-path@openssh.com': {
        // `~` and `~/x` are the user's home, which is their root (`~other` is treated the same).
        const raw = r.string();
        const rel = raw.startsWith('~') ? raw.replace(/^~[^/]*/, '') : raw;
        const p = `/${this.path(rel)}`;
        return this.send(new Writer(FXP.NAME, id).u32(1).string(p).string(p).attrs({}).done());
      }
      case 'copy-data': {
        const from = this.handle(r);
        const readOffset = r.u64();
        const readLength = r.u64();
        const to = this.handle(r);
        const writeOffset = r.u64();
        if (from.kind !== 'read')
          throw new GatewayError(
            'bad-request/request-params-invalid',
            'The source handle is not open for reading',
          );
        if (to.kind !== 'write')
          throw new GatewayError(
            'bad-request/request-params-invalid',
            'The target handle is not open for writing',
          );
        return this.onHandles([from, to], async () => {
          await this.copyData(from, readOffset, readLength, to, writeOffset);
          this.status(id, Status.OK);
        });
      }
      case 'check-file-name':
      case 'check-file-handle': {
        let entry: Entry | Promise<Entry>;
        if (name === 'check-file-name') entry = this.files.stat(this.path(r.string()));
        else {
          const h = this.handle(r);
          if (h.kind !== 'read')
            throw new GatewayError(
              'bad-request/request-params-invalid',
              'This handle is not open for reading',
            );
          entry = h.entry;
        }
        const algorithms = r
          .string()
          .split(',')
          .map((a) => a.trim().toLowerCase());
        const start = r.u64();
        const length = r.u64();
        const blockSize = r.u32();
        return this.checkFile(id, await entry, algorithms, start, length, blockSize);
      }
      default:
        return this.status(id, Status.OP_UNSUPPORTED, `Unsupported extension ${name.slice(0, 64)}`);
    }
  }

  /**
   * copyData serves copy-data. The case `sftp cp` sends, the whole source (offset 0, length 0 =
   * to EOF) into an empty write handle at offset 0, is recorded on the handle and done at CLOSE by
   * one core copy that shares the source's blob. Any other range is read from the source and
   * written into the staged file, as WRITEs would be.
   */
  private async copyData(
    from: ReadHandle,
    readOffset: number,
    readLength: number,
    to: WriteHandle,
    writeOffset: number,
  ): Promise<void> {
    if (
      readOffset === 0 &&
      readLength === 0 &&
      writeOffset === 0 &&
      to.staged.size === 0 &&
      !to.pendingCopy
    ) {
      to.pendingCopy = { path: from.path, size: from.entry.size ?? 0 };
      return;
    }
    await this.materialize(to);
    const size = from.entry.size ?? 0;
    // Like OpenSSH: a range starting at or past the end copies nothing.
    if (readOffset >= size) return;
    const end = readLength === 0 ? size : Math.min(size, readOffset + readLength);
    await this.copyInto(to, from.path, readOffset, end, to.append ? to.staged.size : writeOffset);
  }

  /** copyInto writes bytes [start, end) of the file at `source` into the staged file at `at`. */
  private async copyInto(
    to: WriteHandle,
    source: string,
    start: number,
    end: number,
    at: number,
  ): Promise<void> {
    if (end <= start) return;
    const dl = await this.files.openRead(source, {
      range: { start, end: end - 1 },
      record: false,
      signal: this.abort.signal,
    });
    try {
      for await (const chunk of dl.stream as AsyncIterable<Buffer>) {
        await to.staged.writeAt(at, chunk);
        at += chunk.length;
      }
    } finally {
      dl.stream.destroy();
    }
  }

  /** materialize turns a pending whole-file copy into staged bytes, before the handle changes further. */
  private async materialize(h: WriteHandle): Promise<void> {
    const pending = h.pendingCopy;
    if (!pending) return;
    h.pendingCopy = null;
    await this.copyInto(h, pending.path, 0, pending.size, 0);
  }

  /** commit finishes a write handle at CLOSE: a pending copy, the staged bytes, or nothing. */
  private async commit(h: WriteHandle): Promise<void> {
    if (h.pendingCopy) {
      try {
        await this.files.copy(h.pendingCopy.path, h.path, { overwrite: true, filesOnly: true });
        if (h.mtime) await this.files.setMtime(h.path, h.mtime);
        await h.staged.abort();
        return;
      } catch (err) {
        // Replacing a file by copy needs more than writing it (the core asks for delete on the
        // old one); the same bytes written through the staged file need only what OPEN checked.
        if (!(err instanceof GatewayError && err.family === 'not-authorized')) {
          await h.staged.abort();
          throw err;
        }
        await this.materialize(h);
      }
    }
    if (h.staged.changed) await h.staged.commit({ signal: this.abort.signal });
    else await h.staged.abort();
  }

  /**
   * checkFile answers check-file-name/-handle with the md5 the core stored while the file was
   * written: only md5, only for the whole file as one block (anything else would mean reading
   * the file, which this extension is meant to save).
   */
  private checkFile(
    id: number,
    entry: Entry,
    algorithms: string[],
    start: number,
    length: number,
    blockSize: number,
  ): void {
    if (!algorithms.includes('md5')) return this.status(id, Status.OP_UNSUPPORTED, 'Only md5 is available');
    if (entry.type === 'directory')
      throw new GatewayError('bad-request/cannot-download-directory', `/${entry.path} is a folder`);
    const size = entry.size ?? 0;
    const whole = start === 0 && (length === 0 || length >= size) && (blockSize === 0 || blockSize >= size);
    if (!whole) return this.status(id, Status.OP_UNSUPPORTED, 'Only the md5 of the whole file is available');
    if (!entry.md5) return this.status(id, Status.FAILURE, 'No md5 is stored for this file');
    this.send(new Writer(FXP.EXTENDED_REPLY, id).string('md5').raw(Buffer.from(entry.md5, 'hex')).done());
  }
}

const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];

/** longname is the `ls -l` line OpenSSH's sftp-server sends (FileZilla and WinSCP display it). */
export function longname(e: Entry, name: string, owner: string): string {
  const mode = e.type === 'directory' ? 'drwxr-xr-x' : '-rw-r--r--';
  const d = e.mtime;
  const recent = Math.abs(Date.now() - d.getTime()) < 182 * 24 * 3600 * 1000;
  const day = String(d.getUTCDate()).padStart(2);
  const when = recent
    ? `${MONTHS[d.getUTCMonth()]} ${day} ${String(d.getUTCHours()).padStart(2, '0')}:${String(d.getUTCMinutes()).padStart(2, '0')}`
    : `${MONTHS[d.getUTCMonth()]} ${day}  ${d.getUTCFullYear()}`;
  const who = owner.padEnd(8);
  return `${mode}    1 ${who} ${who} ${String(e.size ?? 0).padStart(8)} ${when} ${name}`;
}
