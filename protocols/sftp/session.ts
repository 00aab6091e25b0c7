/**
 * One SFTP v3 session on a raw `sftp` subsystem channel: the packet loop, flow control, and the
 * mapping of each request onto the core's FileSession. Ours rather than ssh2's SFTP module, which
 * cannot advertise extensions, send EXTENDED_REPLY or apply backpressure (research/libraries.md §2).
 *
 * Flow control: at most `maxInflight` requests run at once, carrying or asking for at most
 * INFLIGHT_BYTES of file data; beyond that, and while the client is not reading our replies, the
 * channel is paused, so SSH's window closes and the client waits. Memory per session is then
 * bounded by the window (2 MiB) plus the in-flight requests' data.
 */
import { randomUUID } from 'node:crypto';
import { setMaxListeners } from 'node:events';
import { statfs } from 'node:fs/promises';
import type { Duplex } from 'node:stream';
import {
  GatewayError,
  resolveChroot,
  type Entry,
  type FileSession,
  type LiveConnection,
  type LiveTransfer,
  type StagedWrite,
} from '../../src/core/index.ts';
import { LogThrottle, type Logger } from '../../src/log.ts';
import { errorType, type RequestBatch, type Transfer } from '../shared/observe.ts';
import { liveTransfer } from '../shared/presence.ts';
import { sftpStatus } from './errors.ts';
import {
  HandleTable,
  openEntry,
  StreamCursor,
  writerEntry,
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
  dataHeader,
  type Packet,
  Reader,
  Status,
  STATUS_NAMES,
  Writer,
  type Attrs,
  type StatusCode,
} from './packets.ts';
import { RequestOrder, type Touch } from './order.ts';

// One throttle for every SFTP channel of the process: an outage hits them all at once.
const outages = new LogThrottle();

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
/** JOINED_REPLY is the largest READ reply sent as one packet (see sendData). */
const JOINED_REPLY = 64 * 1024;

/**
 * INFLIGHT_BYTES bounds the file data of the requests running at once (WRITE data, READ lengths).
 * OpenSSH's sftp sends 64 requests of up to 255 KiB each (our limits@openssh.com): without this,
 * 16 MiB of WRITE data per upload waited in memory, each piece holding the larger socket buffer it
 * arrived in, and the garbage collector ran a full collection about ten times a second on it.
 */
const INFLIGHT_BYTES = 4 * 1024 * 1024;

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
  /** where answered requests are counted and logged, a line per second of them (the listener kit) */
  batch: RequestBatch;
  /** transfer is told of each file transfer (a handle that read or wrote bytes) as its handle closes */
  transfer: (t: Transfer) => void;
  /** the session's row among the site's live connections, shown each transfer in progress */
  presence?: LiveConnection | null;
}

/** FXP_NAMES names request types in access lines: open, read, write, close, … */
const FXP_NAMES: Record<number, string> = Object.fromEntries(
  Object.entries(FXP).map(([name, type]) => [type, name.toLowerCase()]),
);

/** SftpSession serves SFTP v3 on one channel for one logged-in principal. */
export class SftpSession {
  private readonly splitter = new PacketSplitter();
  private readonly handles: HandleTable;
  private readonly backlog: Packet[] = [];
  private readonly abort = new AbortController();
  private readonly order = new RequestOrder();
  private inflight = 0;
  /** file data carried or asked for by the running requests (see INFLIGHT_BYTES) */
  private inflightBytes = 0;
  /** bytes read or written through each file handle, and since when: its transfer */
  private readonly meters = new WeakMap<
    Handle,
    { bytes: number; started: number; live: LiveTransfer | null }
  >();
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

  /** transferring tells whether a file is open here (being read or written) or a request runs. */
  get transferring(): boolean {
    if (this.inflight > 0) return true;
    for (const h of this.handles.all()) if (h.kind !== 'dir') return true;
    return false;
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
    while (
      this.backlog.length &&
      this.inflight < this.opts.maxInflight &&
      (this.inflightBytes < INFLIGHT_BYTES || this.inflight === 0) &&
      !this.writeBlocked &&
      !this.closed
    )
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
    // Files still open when the session ends were cut: their transfers failed.
    for (const h of this.handles.all()) this.transferred(h, false);
    this.closed = true;
    this.abort.abort();
    this.backlog.length = 0;
    this.opts.batch.flush();
    await this.handles.releaseAll();
  }

  /** metered counts `n` bytes moved through handle `h`. */
  private metered(h: Handle, n: number): void {
    const m = this.meters.get(h);
    if (m) m.bytes += n;
    else {
      const meter = { bytes: n, started: Date.now(), live: null as LiveTransfer | null };
      const presence = this.opts.presence;
      if (presence)
        meter.live = liveTransfer(
          presence,
          `/${h.path}`,
          h.kind === 'write' ? 'in' : 'out',
          () => meter.bytes,
        );
      this.meters.set(h, meter);
    }
  }

  /** transferred reports the transfer of handle `h` (if it moved bytes) as its handle closes. */
  private transferred(h: Handle, ok: boolean, error?: string): void {
    const m = this.meters.get(h);
    if (!m || h.kind === 'dir') return;
    this.meters.delete(h);
    m.live?.end();
    this.opts.transfer({
      direction: h.kind === 'write' ? 'in' : 'out',
      path: `/${h.path}`,
      bytes: m.bytes,
      started: m.started,
      ok,
      error,
    });
  }

  private dispatch(packet: Packet): void {
    this.opts.touch();
    const { payload } = packet;
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
    const bytes = dataBytes(packet);
    this.inflight++;
    this.inflightBytes += bytes;
    let failed: { error: string | undefined } | null = null;
    this.request(type, id, r, packet.data)
      .catch((err: unknown) => {
        failed = { error: errorType(err, (e) => e instanceof BadMessage || this.abort.signal.aborted) };
        this.fail(id, err);
      })
      .finally(() => {
        const f = failed as { error: string | undefined } | null;
        this.opts.batch.note(FXP_NAMES[type] ?? 'unknown', f !== null, f?.error);
        this.inflight--;
        this.inflightBytes -= bytes;
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

  /**
   * run is how every request that names a path or handle runs: it is admitted now, in arrival
   * order (order.ts), and `fn` starts once every earlier request it could disagree with, and every
   * earlier request on `handles`, has finished. A failure worth an operator's eye is logged.
   */
  private run(op: string, touch: Touch, fn: () => Promise<void>, handles: Handle[] = []): Promise<void> {
    const { ready, finish } = this.order.admit(
      handles.length === 1 ? { ...touch, owner: handles[0] } : touch,
    );
    let p: Promise<void>;
    if (handles.length === 0) p = ready.then(fn);
    else {
      const before = handles.length === 1 ? handles[0]!.queue : Promise.all(handles.map((h) => h.queue));
      p = before.then(() => ready).then(fn);
      for (const h of handles) h.queue = p.catch(() => undefined);
    }
    return p
      .catch((err: unknown) => {
        this.noteFailure(op, touch.paths, err);
        throw err;
      })
      .finally(finish);
  }

  /**
   * noteFailure logs, at info, a refusal that is not "no such file" (mounts probe for missing
   * names all the time), so an operator can see what a client hit; unexpected errors are logged
   * by fail() with their instance id.
   */
  private noteFailure(op: string, paths: string[], err: unknown): void {
    if (!(err instanceof GatewayError)) return;
    // A full storage is logged once per upload by the core (not once per pipelined WRITE).
    if (err.type === 'processing-failure/insufficient-storage') return;
    // An outage fails every request alike: a few lines per cause, not one per request.
    if (err.family === 'service-unavailable' && !outages.take(err.type)) return;
    const { code } = sftpStatus(err);
    if (code === Status.NO_SUCH_FILE) return;
    this.opts.log.info('sftp request refused', {
      user: this.opts.username,
      request: op,
      path: paths.map((p) => `/${p}`).join(' -> '),
      status: STATUS_NAMES[code] ?? code,
      error: err.type,
    });
  }

  /** writerAt is this session's newest handle writing `p`, if any: what the client sees there until CLOSE. */
  private writerAt(p: string): WriteHandle | undefined {
    let found: WriteHandle | undefined;
    for (const h of this.handles.all()) if (h.kind === 'write' && !h.detached && h.path === p) found = h;
    return found;
  }

  /** sharedWith tells whether another open handle of this session writes the same open file as `h`. */
  private sharedWith(h: WriteHandle): boolean {
    for (const o of this.handles.all())
      if (o !== h && o.kind === 'write' && o.staged === h.staged) return true;
    return false;
  }

  /** writersAt is every handle of this session writing `p`. */
  private writersAt(p: string): WriteHandle[] {
    const out: WriteHandle[] = [];
    for (const h of this.handles.all()) if (h.kind === 'write' && !h.detached && h.path === p) out.push(h);
    return out;
  }

  private async exists(p: string): Promise<boolean> {
    return this.files.stat(p).then(
      () => true,
      (err: unknown) => {
        if (err instanceof GatewayError && err.family === 'not-found') return false;
        throw err;
      },
    );
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

  /** request answers one request; `data` is a WRITE's data when it arrived in pieces (Packet). */
  private async request(type: number, id: number, r: Reader, data?: Buffer[]): Promise<void> {
    const f = this.files;
    // Every case reads its arguments and calls run() before its first await (arrival order).
    switch (type) {
      case FXP.OPEN: {
        const p = this.path(r.string());
        const flags = r.u32();
        r.attrs();
        const release = this.handles.reserve();
        const change = (flags & (OpenFlags.WRITE | OpenFlags.APPEND)) !== 0;
        return this.run('open', { paths: [p], change }, () => this.openFile(id, p, flags)).finally(release);
      }
      case FXP.CLOSE: {
        const raw = r.bytes();
        const h = this.handles.get(raw);
        if (!h) throw new GatewayError('bad-request/request-params-invalid', 'Invalid handle');
        const touch = { paths: h.kind === 'write' ? h.orderPaths : [], change: true };
        return this.run(
          'close',
          touch,
          async () => {
            this.handles.delete(raw);
            if (h.kind === 'read') h.cursor?.close();
            // The upload becomes visible here, and its failure is reported here — at the last CLOSE
            // of the file when this session opened it twice (see openFile).
            try {
              if (h.kind === 'write' && !this.sharedWith(h)) await this.commit(h);
            } catch (err) {
              this.transferred(
                h,
                false,
                errorType(err, () => false),
              );
              throw err;
            }
            this.transferred(h, true);
            this.status(id, Status.OK);
          },
          [h],
        );
      }
      case FXP.READ: {
        const h = this.handle(r);
        const offset = r.u64();
        const len = Math.min(r.u32(), MAX_DATA);
        return this.run('read', { paths: h.orderPaths, change: false }, () => this.read(id, h, offset, len), [
          h,
        ]);
      }
      case FXP.WRITE: {
        const h = this.handle(r);
        const offset = r.u64();
        const pieces = data ?? [r.bytes()];
        let length = 0;
        for (const p of pieces) length += p.length;
        return this.run(
          'write',
          { paths: h.orderPaths, change: true },
          async () => {
            if (h.kind !== 'write')
              throw new GatewayError(
                'bad-request/request-params-invalid',
                'This handle is not open for writing',
              );
            await this.materialize(h);
            await h.staged.writeAt(h.append ? h.staged.size : offset, pieces);
            this.metered(h, length);
            h.touched = new Date();
            this.status(id, Status.OK);
          },
          [h],
        );
      }
      case FXP.FSTAT: {
        const h = this.handle(r);
        return this.run(
          'fstat',
          { paths: h.orderPaths, change: false },
          async () => {
            this.send(new Writer(FXP.ATTRS, id).attrs(this.attrs(await openEntry(f, h))).done());
          },
          [h],
        );
      }
      case FXP.STAT:
      case FXP.LSTAT: {
        const p = this.path(r.string());
        return this.run('stat', { paths: [p], change: false }, async () => {
          // A file this session has open for writing is seen as it is now, as on a disk (sshfs
          // creates a file and asks its attributes before writing a byte).
          const w = this.writerAt(p);
          const e = w ? writerEntry(w) : await f.stat(p);
          this.send(new Writer(FXP.ATTRS, id).attrs(this.attrs(e)).done());
        });
      }
      case FXP.SETSTAT: {
        const p = this.path(r.string());
        const a = r.attrs();
        return this.run('setstat', { paths: [p], change: true }, async () => {
          const open = this.writersAt(p);
          if (open.length > 0) {
            // `truncate f` or `touch f` while f is open here: the open file changes, and CLOSE keeps it.
            for (const h of open) await this.setAttrs(h, a);
          } else if (a.size !== undefined) {
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
          this.status(id, Status.OK);
        });
      }
      case FXP.FSETSTAT: {
        const h = this.handle(r);
        const a = r.attrs();
        return this.run(
          'fsetstat',
          { paths: h.orderPaths, change: true },
          async () => {
            if (h.kind === 'write') await this.setAttrs(h, a);
            else if (a.mtime !== undefined) await f.setMtime(h.path, new Date(a.mtime * 1000));
            this.status(id, Status.OK);
          },
          [h],
        );
      }
      case FXP.OPENDIR: {
        const p = this.path(r.string());
        const release = this.handles.reserve();
        return this.run('opendir', { paths: [p], change: false }, async () => {
          // Listing one entry checks that it is a folder the principal may list.
          await f.list(p, { sort: 'path', direction: 'asc', offset: 0, limit: 1 });
          const handle = this.handles.add({ kind: 'dir', path: p, pages: null, done: false });
          this.send(new Writer(FXP.HANDLE, id).bytes(handle).done());
        }).finally(release);
      }
      case FXP.READDIR: {
        const h = this.handle(r);
        return this.run('readdir', { paths: h.orderPaths, change: false }, () => this.readdir(id, h), [h]);
      }
      case FXP.REMOVE: {
        const p = this.path(r.string());
        return this.run('remove', { paths: [p], change: true }, async () => {
          // As on a disk, removing a file that is open here drops what the open handles write.
          const open = this.writersAt(p);
          for (const h of open) h.detached = true;
          if (open.length > 0 && !(await this.exists(p))) return this.status(id, Status.OK);
          const e = await f.stat(p);
          if (e.type === 'directory')
            throw new GatewayError('bad-request/request-params-invalid', `/${p} is a folder; use rmdir`);
          await f.remove(p);
          this.status(id, Status.OK);
        });
      }
      case FXP.RMDIR: {
        const p = this.path(r.string());
        return this.run('rmdir', { paths: [p], change: true }, async () => {
          const e = await f.stat(p);
          if (e.type !== 'directory')
            throw new GatewayError('bad-request/folder-must-not-be-a-file', `/${p} is not a folder`);
          await f.remove(p);
          this.status(id, Status.OK);
        });
      }
      case FXP.MKDIR: {
        const p = this.path(r.string());
        r.attrs();
        return this.run('mkdir', { paths: [p], change: true }, async () => {
          await f.mkdir(p);
          this.status(id, Status.OK);
        });
      }
      case FXP.REALPATH: {
        const p = `/${this.path(r.string())}`;
        return this.send(new Writer(FXP.NAME, id).u32(1).string(p).string(p).attrs({}).done());
      }
      case FXP.RENAME:
        // SFTP v3 RENAME fails when the target exists; posix-rename@openssh.com replaces it.
        return this.rename(id, this.path(r.string()), this.path(r.string()), false);
      case FXP.READLINK:
      case FXP.SYMLINK:
        return this.status(id, Status.OP_UNSUPPORTED, 'Symbolic links are not supported');
      case FXP.EXTENDED:
        return this.extended(id, r);
      default:
        return this.status(id, Status.OP_UNSUPPORTED, `Unsupported request type ${type}`);
    }
  }

  /** read serves READ: a download's stream, or the staged bytes of a file open for writing here. */
  private async read(id: number, h: Handle, offset: number, len: number): Promise<void> {
    if (h.kind === 'write') {
      if (!h.readable)
        throw new GatewayError('bad-request/request-params-invalid', 'This handle is not open for reading');
      await this.materialize(h);
      return this.sendData(id, await h.staged.readAt(offset, len), h);
    }
    if (h.kind !== 'read')
      throw new GatewayError('bad-request/request-params-invalid', 'This handle is not open for reading');
    if (h.unrecorded) {
      h.unrecorded = false;
      await this.files.recordRead(h.path);
    }
    if (h.writer) {
      // Opened while this session was writing the file: its bytes until that CLOSE, then the file.
      if (h.writer.staged.isOpen && !h.writer.detached)
        return this.sendData(id, await h.writer.staged.readAt(offset, len), h);
      h.writer = null;
      h.cursor?.close();
      h.cursor = null;
      h.entry = await this.files.stat(h.path);
    }
    if (offset >= (h.entry.size ?? 0) || len === 0) return this.status(id, Status.EOF, 'End of file');
    const c = h.cursor;
    if (c && offset > c.pos && offset - c.pos <= SKIP_LIMIT) await c.take(offset - c.pos);
    if (!h.cursor || h.cursor.pos !== offset) {
      h.cursor?.close();
      const dl = await this.files.openRead(h.path, {
        range: { start: offset },
        record: false,
        signal: this.abort.signal,
      });
      h.entry = dl.entry;
      h.cursor = new StreamCursor(dl.stream, offset);
    }
    this.sendData(id, await h.cursor.take(len), h);
  }

  /**
   * sendData answers a READ with `data`. A large reply is sent as its header and then its pieces as
   * they are: one more SSH packet instead of a copy of every byte read (Packet, on WRITE's side).
   * A small one is joined: there the extra packet, and its write to the socket, cost more than
   * the copy (a small file's download is a few packets).
   */
  private sendData(id: number, data: Buffer | Buffer[], h: Handle): void {
    const pieces = Array.isArray(data) ? data : [data];
    let length = 0;
    for (const p of pieces) length += p.length;
    if (length === 0) return this.status(id, Status.EOF, 'End of file');
    this.metered(h, length);
    if (length <= JOINED_REPLY) return this.send(Buffer.concat([dataHeader(id, length), ...pieces]));
    this.send(dataHeader(id, length));
    for (const p of pieces) this.send(p);
  }

  /** setAttrs applies SETSTAT/FSETSTAT size and mtime to a file open for writing; CLOSE keeps them. */
  private async setAttrs(h: WriteHandle, a: Attrs): Promise<void> {
    if (a.size !== undefined) {
      await this.materialize(h);
      await h.staged.truncate(a.size);
      h.touched = new Date();
    }
    if (a.mtime !== undefined) {
      h.mtime = new Date(a.mtime * 1000);
      h.staged.setMtime(h.mtime);
    }
  }

  /**
   * readdir serves READDIR in pages; at the end it adds the files this session has created and
   * not yet closed (they exist for it, as on a disk), then EOF.
   */
  private async readdir(id: number, h: Handle): Promise<void> {
    if (h.kind !== 'dir')
      throw new GatewayError('bad-request/request-params-invalid', 'This handle is not a folder');
    if (h.done) return this.status(id, Status.EOF, 'End of folder');
    h.pages ??= this.files.listAll(h.path, LIST_PAGE);
    const next = await h.pages.next();
    let entries = next.done ? [] : next.value;
    if (entries.length === 0) {
      h.done = true;
      const prefix = h.path === '' ? '' : `${h.path}/`;
      entries = [];
      for (const w of this.handles.all())
        if (
          w.kind === 'write' &&
          w.staged.isNew &&
          !w.detached &&
          w.path.startsWith(prefix) &&
          !w.path.includes('/', prefix.length) &&
          !this.writerShadowed(w)
        )
          entries.push(writerEntry(w));
      if (entries.length === 0) return this.status(id, Status.EOF, 'End of folder');
    }
    const w = new Writer(FXP.NAME, id).u32(entries.length);
    for (const e of entries) {
      const name = e.path.slice(e.path.lastIndexOf('/') + 1);
      w.string(name)
        .string(longname(e, name, this.opts.username))
        .attrs(this.attrs(e));
    }
    this.send(w.done());
  }

  /** writerShadowed tells whether a newer handle of this session writes the same path (listed once). */
  private writerShadowed(w: WriteHandle): boolean {
    return this.writerAt(w.path) !== w;
  }

  /**
   * rename serves RENAME and posix-rename@openssh.com. Handles open on the old path follow the
   * file, as open files do on a disk: a file created here and not yet closed is renamed by
   * retargeting its handle, and its CLOSE commits it under the new name.
   */
  private rename(id: number, from: string, to: string, overwrite: boolean): Promise<void> {
    // Handles under `from` will be under `to`: later requests on them order with both names.
    const moved = (p: string) => (p === from || p.startsWith(`${from}/`) ? to + p.slice(from.length) : null);
    for (const h of this.handles.all())
      for (const q of [...h.orderPaths]) {
        const m = moved(q);
        if (m !== null && !h.orderPaths.includes(m)) h.orderPaths.push(m);
      }
    return this.run(overwrite ? 'posix-rename' : 'rename', { paths: [from, to], change: true }, async () => {
      const following = [...this.handles.all()].filter((h) => moved(h.path) !== null);
      const pendingOnly =
        following.some((h) => h.kind === 'write' && !h.detached) && !(await this.exists(from));
      if (!pendingOnly) await this.files.move(from, to, { overwrite });
      else if (!overwrite && (this.writerAt(to) || (await this.exists(to))))
        throw new GatewayError('processing-failure/destination-exists', `/${to} already exists`);
      // Whatever was being written at the destination was replaced, as on a disk.
      for (const h of this.writersAt(to)) if (!following.some((f) => f === h)) h.detached = true;
      for (const h of following) {
        const target = moved(h.path)!;
        if (h.kind === 'write' && !h.detached) await h.staged.retarget(target);
        h.path = target;
      }
      this.status(id, Status.OK);
    });
  }

  private async openFile(id: number, p: string, flags: number): Promise<void> {
    if (flags & (OpenFlags.WRITE | OpenFlags.APPEND)) {
      if (flags & OpenFlags.EXCL || !(flags & OpenFlags.CREAT)) {
        const exists = this.writerAt(p) !== undefined || (await this.exists(p));
        if (exists && flags & OpenFlags.EXCL)
          throw new GatewayError('processing-failure/destination-exists', `/${p} already exists`);
        if (!exists && !(flags & OpenFlags.CREAT))
          throw new GatewayError('not-found/file-not-found', `/${p} does not exist`);
      }
      const truncate = (flags & OpenFlags.TRUNC) !== 0;
      // Opened again while this session still writes it: one open file, as on a disk. sshfs sends
      // the OPEN of `echo more >> f` before the CLOSE of `printf hello > f` when the kernel's
      // release of the first lags; a second staged copy would lose the first write.
      const open = this.writerAt(p);
      let staged: StagedWrite;
      if (open) {
        staged = open.staged;
        if (truncate) {
          open.pendingCopy = null;
          await staged.truncate(0);
        } else await this.materialize(open);
      } else {
        staged = await this.files.stage(p, { truncate, signal: this.abort.signal });
        if (this.closed) {
          await staged.abort();
          return;
        }
      }
      const handle = this.handles.add({
        kind: 'write',
        path: p,
        staged,
        append: (flags & OpenFlags.APPEND) !== 0,
        pendingCopy: null,
        mtime: null,
        readable: (flags & OpenFlags.READ) !== 0,
        touched: new Date(),
        detached: false,
      });
      return this.send(new Writer(FXP.HANDLE, id).bytes(handle).done());
    }
    // Reading a file this session is writing: its bytes as written so far (see read()).
    const writer = this.writerAt(p);
    if (writer) {
      const handle = this.handles.add({
        kind: 'read',
        path: p,
        entry: writerEntry(writer),
        cursor: null,
        writer,
      });
      return this.send(new Writer(FXP.HANDLE, id).bytes(handle).done());
    }
    const dl = await this.files.openRead(p, { signal: this.abort.signal, record: false });
    if (this.closed) {
      dl.stream.destroy();
      return;
    }
    const handle = this.handles.add({
      kind: 'read',
      path: p,
      entry: dl.entry,
      cursor: new StreamCursor(dl.stream, 0),
      writer: null,
      unrecorded: true,
    });
    this.send(new Writer(FXP.HANDLE, id).bytes(handle).done());
  }

  private async extended(id: number, r: Reader): Promise<void> {
    const name = r.string();
    switch (name) {
      case 'posix-rename@openssh.com':
        return this.rename(id, this.path(r.string()), this.path(r.string()), true);
      case 'statvfs@openssh.com':
      case 'fstatvfs@openssh.com': {
        const p = name === 'statvfs@openssh.com' ? this.path(r.string()) : null;
        if (p === null) this.handle(r);
        return this.run('statvfs', { paths: p === null ? [] : [p], change: false }, async () => {
          if (p !== null && !this.writerAt(p)) await this.files.stat(p);
          // The blob store's space is the site's space; for S3 this is the local data dir's.
          const s = await statfs(this.opts.dataDir);
          const w = new Writer(FXP.EXTENDED_REPLY, id);
          for (const v of [
            s.bsize,
            s.bsize,
            s.blocks,
            s.bfree,
            s.bavail,
            s.files,
            s.ffree,
            s.ffree,
            0,
            0,
            255,
          ])
            w.u64(v);
          this.send(w.done());
        });
      }
      case 'fsync@openssh.com': {
        const h = this.handle(r);
        return this.run(
          'fsync',
          { paths: h.orderPaths, change: true },
          async () => {
            if (h.kind === 'write') await h.staged.flush();
            this.status(id, Status.OK);
          },
          [h],
        );
      }
      case 'hardlink@openssh.com':
        // Not advertised; sshfs and `sftp ln` still try it. A file has one name here.
        return this.status(id, Status.OP_UNSUPPORTED, 'Hard links are not supported');
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
        return this.run(
          'copy-data',
          { paths: [...from.orderPaths, ...to.orderPaths], change: true },
          async () => {
            await this.copyData(from, readOffset, readLength, to, writeOffset);
            this.status(id, Status.OK);
          },
          [from, to],
        );
      }
      case 'check-file-name':
      case 'check-file-handle': {
        const byName = name === 'check-file-name';
        const p = byName ? this.path(r.string()) : null;
        const h = byName ? null : this.handle(r);
        if (h && h.kind !== 'read')
          throw new GatewayError('bad-request/request-params-invalid', 'This handle is not open for reading');
        const algorithms = r
          .string()
          .split(',')
          .map((a) => a.trim().toLowerCase());
        const start = r.u64();
        const length = r.u64();
        const blockSize = r.u32();
        return this.run(
          'check-file',
          { paths: p !== null ? [p] : h!.orderPaths, change: false },
          async () => {
            const entry = p !== null ? await this.files.stat(p) : (h as ReadHandle).entry;
            this.checkFile(id, entry, algorithms, start, length, blockSize);
          },
        );
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
    // Removed or replaced while open: like an unlinked file on a disk, its bytes go nowhere.
    if (h.detached) return h.staged.abort();
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
    if (h.staged.changed) return void (await h.staged.commit({ signal: this.abort.signal }));
    await h.staged.abort();
    // Nothing written, only a time set (GNU touch -d: open, FSETSTAT, close): the time is kept.
    const mtime = h.staged.mtimeSet;
    if (mtime) await this.files.setMtime(h.path, mtime);
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

/** dataBytes is the file data a request carries (WRITE) or asks for (READ: its last field, the length). */
function dataBytes({ payload, data }: Packet): number {
  if (data) return data.reduce((n, d) => n + d.length, 0);
  if (payload[0] === FXP.WRITE) return payload.length;
  if (payload[0] === FXP.READ && payload.length >= 4)
    return Math.min(payload.readUInt32BE(payload.length - 4), MAX_DATA);
  return 0;
}
