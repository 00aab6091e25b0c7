/**
 * Per-session SFTP handles: open files being read, staged uploads, and folder listings. Each
 * handle runs its requests one after another in arrival order (pipelined READs of a download then
 * read one stream sequentially, and a CLOSE never overtakes the WRITEs before it), and the table
 * releases everything when the session ends (mscdex/ssh2#709: nobody else will).
 */
import type { Readable } from 'node:stream';
import {
  GatewayError,
  readBytes,
  type Entry,
  type FileSession,
  type StagedWrite,
} from '../../src/core/index.ts';

/** ReadHandle is a file opened for reading: one stream, positioned where the last READ stopped. */
export interface ReadHandle {
  kind: 'read';
  path: string;
  entry: Entry;
  cursor: StreamCursor | null;
  /** opened while this session was writing the file: reads see that handle's bytes until its CLOSE */
  writer: WriteHandle | null;
  /**
   * the `read` Action is still to be recorded: at the first READ, so an open that reads nothing
   * (the source of OpenSSH's `cp`, done by copy-data, which records its own `copy`) records none
   */
  unrecorded?: boolean;
}

/**
 * WriteHandle is an upload staged in the core until CLOSE commits it. After a whole-file
 * copy-data, `pendingCopy` names the source instead of staged bytes, and CLOSE copies it in the
 * core (sharing its blob); any later change to the handle first reads the source into staging.
 */
export interface WriteHandle {
  kind: 'write';
  path: string;
  staged: StagedWrite;
  append: boolean;
  pendingCopy: { path: string; size: number } | null;
  /** the mtime FSETSTAT asked for, applied after a pending copy too */
  mtime: Date | null;
  /** opened with READ as well: READ sees the staged bytes (SQLite reads back what it wrote) */
  readable: boolean;
  /** the modification time STAT shows while the file is open: the old file's, then the last change's */
  touched: Date;
  /** the path was removed or replaced while open: CLOSE discards the bytes, as a disk drops an unlinked file */
  detached: boolean;
}

/** DirHandle is a folder listing read in pages by READDIR. */
export interface DirHandle {
  kind: 'dir';
  path: string;
  /** the listing's pages (the core's listAll), started by the first READDIR */
  pages: AsyncGenerator<Entry[]> | null;
  done: boolean;
}

/**
 * Handle is any open handle, with the queue that keeps its requests in order and the paths its
 * requests order with (its path, plus the names a pending rename gives it: see order.ts).
 */
export type Handle = (ReadHandle | WriteHandle | DirHandle) & {
  queue: Promise<unknown>;
  orderPaths: string[];
};

/**
 * StreamCursor reads a byte stream in pieces of a requested size, remembering its position. A
 * stream the store read whole already (a small file, readBytes) is taken as that one buffer: no
 * iterator, no turn of the event loop per READ.
 */
export class StreamCursor {
  private left: Buffer | null = null;
  private it: AsyncIterator<Buffer> | null = null;
  private ended = false;

  constructor(
    private readonly stream: Readable,
    /** the file offset of the next byte the stream yields */
    public pos: number,
  ) {
    const whole = readBytes(stream);
    if (whole) {
      this.left = whole.length > 0 ? whole : null;
      this.ended = true;
    }
  }

  /**
   * take reads up to `n` bytes (fewer only at the end of the file; none at its end), as views of
   * the stream's chunks: a READ of 255 KiB spans four of them, and the reply is sent in pieces.
   */
  async take(n: number): Promise<Buffer[]> {
    const out: Buffer[] = [];
    let got = 0;
    while (got < n && (this.left || !this.ended)) {
      if (!this.left) {
        this.it ??= this.stream[Symbol.asyncIterator]() as AsyncIterator<Buffer>;
        const r = await this.it.next();
        if (r.done) {
          this.ended = true;
          break;
        }
        this.left = r.value;
      }
      const part = this.left.subarray(0, n - got);
      this.left = part.length < this.left.length ? this.left.subarray(part.length) : null;
      out.push(part);
      got += part.length;
    }
    this.pos += got;
    return out;
  }

  /** close stops the stream and frees its buffers. */
  close(): void {
    this.left = null;
    this.stream.destroy();
  }
}

/** HandleTable maps the opaque handle strings of one session to its open handles. */
export class HandleTable {
  private readonly handles = new Map<string, Handle>();
  private next = 1;

  constructor(private readonly max: number) {}

  get size(): number {
    return this.handles.size;
  }

  get full(): boolean {
    return this.handles.size + this.reserved >= this.max;
  }

  private reserved = 0;

  /**
   * reserve holds a slot while a handle is being opened (OPENs run concurrently), or throws when
   * the session has `max` handles; the returned function gives the slot back.
   */
  reserve(): () => void {
    if (this.full) throw new GatewayError('rate-limited/too-many-requests', 'Too many open handles');
    this.reserved++;
    let given = false;
    return () => {
      if (!given) this.reserved--;
      given = true;
    };
  }

  /** add registers a handle and returns its id (4 bytes on the wire, well under SFTP's 256). */
  add(h: ReadHandle | WriteHandle | DirHandle): Buffer {
    const id = Buffer.allocUnsafe(4);
    id.writeUInt32BE(this.next++ >>> 0);
    this.handles.set(id.toString('hex'), { ...h, queue: Promise.resolve(), orderPaths: [h.path] });
    return id;
  }

  get(id: Buffer): Handle | undefined {
    return this.handles.get(id.toString('hex'));
  }

  delete(id: Buffer): void {
    this.handles.delete(id.toString('hex'));
  }

  /** all is every open handle. */
  all(): IterableIterator<Handle> {
    return this.handles.values();
  }

  /**
   * releaseAll closes every read stream and ends every unfinished upload (session ended): a file
   * its client never closed was cut, and what arrived is kept as the user's pending version for a
   * resume (OpenSSH `reput`); the file keeps its old content.
   */
  async releaseAll(): Promise<void> {
    const all = [...this.handles.values()];
    this.handles.clear();
    await Promise.all(
      all.map(async (h) => {
        if (h.kind === 'read') h.cursor?.close();
        if (h.kind === 'write')
          await (h.detached ? h.staged.abort() : h.staged.suspend()).catch(() => undefined);
      }),
    );
  }
}

/** writerEntry is the `Entry` of a file open for writing, as STAT and FSTAT report it before CLOSE. */
export function writerEntry(h: WriteHandle): Entry {
  return {
    path: h.path,
    type: 'file',
    size: h.pendingCopy ? h.pendingCopy.size : h.staged.size,
    mtime: h.mtime ?? h.touched,
    crc32: null,
    md5: null,
  };
}

/** openEntry is the `Entry` of a handle's file as FSTAT reports it. */
export function openEntry(session: FileSession, h: Handle): Promise<Entry> | Entry {
  if (h.kind === 'write') return writerEntry(h);
  if (h.kind === 'read') return h.entry;
  return session.stat(h.path);
}
