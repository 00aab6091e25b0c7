/**
 * SFTP version 3 wire format (draft-ietf-secsh-filexfer-02, plus OpenSSH's PROTOCOL extensions):
 * packet types, status codes, attribute flags, a reader for request payloads and builders for the
 * replies. Ours rather than ssh2's SFTP module, which cannot advertise extensions or send
 * EXTENDED_REPLY (research/libraries.md §2).
 */

/** FXP holds the packet types. */
export const FXP = {
  INIT: 1,
  VERSION: 2,
  OPEN: 3,
  CLOSE: 4,
  READ: 5,
  WRITE: 6,
  LSTAT: 7,
  FSTAT: 8,
  SETSTAT: 9,
  FSETSTAT: 10,
  OPENDIR: 11,
  READDIR: 12,
  REMOVE: 13,
  MKDIR: 14,
  RMDIR: 15,
  REALPATH: 16,
  STAT: 17,
  RENAME: 18,
  READLINK: 19,
  SYMLINK: 20,
  STATUS: 101,
  HANDLE: 102,
  DATA: 103,
  NAME: 104,
  ATTRS: 105,
  EXTENDED: 200,
  EXTENDED_REPLY: 201,
} as const;

/** Status is SFTP v3's status codes. */
export const Status = {
  OK: 0,
  EOF: 1,
  NO_SUCH_FILE: 2,
  PERMISSION_DENIED: 3,
  FAILURE: 4,
  BAD_MESSAGE: 5,
  NO_CONNECTION: 6,
  CONNECTION_LOST: 7,
  OP_UNSUPPORTED: 8,
} as const;
export type StatusCode = (typeof Status)[keyof typeof Status];

/** STATUS_NAMES names each status code for logs (SSH_FX_* without the prefix). */
export const STATUS_NAMES = Object.fromEntries(Object.entries(Status).map(([k, v]) => [v, k])) as Record<
  StatusCode,
  string
>;

/** OpenFlags are SSH_FXF_* of OPEN. */
export const OpenFlags = { READ: 1, WRITE: 2, APPEND: 4, CREAT: 8, TRUNC: 0x10, EXCL: 0x20 } as const;

const ATTR_SIZE = 0x1;
const ATTR_UIDGID = 0x2;
const ATTR_PERMISSIONS = 0x4;
const ATTR_ACMODTIME = 0x8;
const ATTR_EXTENDED = 0x80000000;

/** MAX_PACKET is the largest packet accepted or sent (OpenSSH's sftp-server limit, 256 KiB). */
export const MAX_PACKET = 256 * 1024;
/** MAX_DATA is the most data one READ returns or one WRITE carries (limits@openssh.com). */
export const MAX_DATA = MAX_PACKET - 1024;

/** Attrs are the attributes a client sent (SETSTAT, OPEN) or we send. */
export interface Attrs {
  size?: number;
  uid?: number;
  gid?: number;
  permissions?: number;
  atime?: number;
  mtime?: number;
}

/** BadMessage is a malformed request payload (answered SSH_FX_BAD_MESSAGE). */
export class BadMessage extends Error {}

/** Reader reads the fields of one packet payload. */
export class Reader {
  private at = 0;
  constructor(private readonly buf: Buffer) {}

  private need(n: number): void {
    if (this.at + n > this.buf.length) throw new BadMessage('truncated packet');
  }
  byte(): number {
    this.need(1);
    return this.buf[this.at++]!;
  }
  u32(): number {
    this.need(4);
    const v = this.buf.readUInt32BE(this.at);
    this.at += 4;
    return v;
  }
  u64(): number {
    this.need(8);
    const v = this.buf.readBigUInt64BE(this.at);
    this.at += 8;
    // Offsets past 2^53 cannot name a byte of any file we hold; clamp rather than lose precision.
    return v > BigInt(Number.MAX_SAFE_INTEGER) ? Number.MAX_SAFE_INTEGER : Number(v);
  }
  bytes(): Buffer {
    const len = this.u32();
    this.need(len);
    const v = this.buf.subarray(this.at, this.at + len);
    this.at += len;
    return v;
  }
  string(): string {
    return this.bytes().toString('utf8');
  }
  attrs(): Attrs {
    const flags = this.u32();
    const a: Attrs = {};
    if (flags & ATTR_SIZE) a.size = this.u64();
    if (flags & ATTR_UIDGID) {
      a.uid = this.u32();
      a.gid = this.u32();
    }
    if (flags & ATTR_PERMISSIONS) a.permissions = this.u32();
    if (flags & ATTR_ACMODTIME) {
      a.atime = this.u32();
      a.mtime = this.u32();
    }
    if (flags & ATTR_EXTENDED) {
      const count = this.u32();
      for (let i = 0; i < count; i++) {
        this.bytes();
        this.bytes();
      }
    }
    return a;
  }
}

/** Writer builds one packet: length and type first, then the fields. */
export class Writer {
  private parts: Buffer[] = [];
  private length = 0;

  constructor(type: number, id?: number) {
    this.byte(type);
    if (id !== undefined) this.u32(id);
  }
  private push(b: Buffer): this {
    this.parts.push(b);
    this.length += b.length;
    return this;
  }
  byte(v: number): this {
    return this.push(Buffer.from([v]));
  }
  u32(v: number): this {
    const b = Buffer.allocUnsafe(4);
    b.writeUInt32BE(v >>> 0);
    return this.push(b);
  }
  u64(v: number): this {
    const b = Buffer.allocUnsafe(8);
    b.writeBigUInt64BE(BigInt(Math.max(0, Math.floor(v))));
    return this.push(b);
  }
  bytes(v: Buffer): this {
    this.u32(v.length);
    return this.push(v);
  }
  string(v: string): this {
    return this.bytes(Buffer.from(v, 'utf8'));
  }
  /** raw appends bytes without a length (check-file's hash) */
  raw(v: Buffer): this {
    return this.push(v);
  }
  attrs(a: Attrs): this {
    let flags = 0;
    if (a.size !== undefined) flags |= ATTR_SIZE;
    if (a.uid !== undefined && a.gid !== undefined) flags |= ATTR_UIDGID;
    if (a.permissions !== undefined) flags |= ATTR_PERMISSIONS;
    if (a.mtime !== undefined) flags |= ATTR_ACMODTIME;
    this.u32(flags);
    if (a.size !== undefined) this.u64(a.size);
    if (flags & ATTR_UIDGID) this.u32(a.uid!).u32(a.gid!);
    if (a.permissions !== undefined) this.u32(a.permissions);
    if (a.mtime !== undefined) this.u32(a.atime ?? a.mtime).u32(a.mtime);
    return this;
  }
  /** done prepends the length and returns the packet. */
  done(): Buffer {
    const head = Buffer.allocUnsafe(4);
    head.writeUInt32BE(this.length);
    return Buffer.concat([head, ...this.parts], this.length + 4);
  }
}

/**
 * Packet is one packet's payload (type byte first), whole; for a WRITE that spanned pieces of the
 * stream, its fields up to the data's length, and the data in the pieces it arrived in, uncopied
 * (StagedWrite.writeAt writes pieces with one system call): OpenSSH's WRITEs of 256 KiB each
 * span eight SSH packets, and joining them copied every uploaded byte once more.
 */
export interface Packet {
  payload: Buffer;
  data?: Buffer[];
}

/** MAX_DATA_PIECES bounds the pieces of a WRITE's data kept apart; more (a client sending tiny SSH packets) are joined. */
const MAX_DATA_PIECES = 64;

/** dataHeader is an SSH_FXP_DATA packet up to its data: the data, `length` bytes, follows it on the wire. */
export function dataHeader(id: number, length: number): Buffer {
  const head = Buffer.allocUnsafe(13);
  head.writeUInt32BE(9 + length, 0);
  head[4] = FXP.DATA;
  head.writeUInt32BE(id, 5);
  head.writeUInt32BE(length, 9);
  return head;
}

/** PacketSplitter cuts a byte stream into packet payloads (type byte first), refusing oversize ones. */
export class PacketSplitter {
  private chunks: Buffer[] = [];
  private buffered = 0;

  /** push adds bytes and returns every packet they completed. */
  push(chunk: Buffer): Packet[] {
    this.chunks.push(chunk);
    this.buffered += chunk.length;
    const out: Packet[] = [];
    for (;;) {
      if (this.buffered < 4) break;
      const len = this.peek(4).readUInt32BE(0);
      if (len === 0 || len > MAX_PACKET + 1024)
        throw new BadMessage(`packet of ${len} bytes exceeds the limit`);
      if (this.buffered < 4 + len) break;
      out.push(
        this.chunks[0]!.length >= 4 + len ? { payload: this.take(4 + len).subarray(4) } : this.spanning(len),
      );
    }
    return out;
  }

  /** spanning takes a whole packet of `len` bytes that spans pieces: a WRITE's data stays in them. */
  private spanning(len: number): Packet {
    const fields = this.writeFields(len);
    if (fields === 0) return { payload: this.take(4 + len).subarray(4) };
    const payload = this.take(4 + fields).subarray(4);
    this.take(4);
    const data = this.pieces(len - fields - 4);
    return data.length > MAX_DATA_PIECES ? { payload, data: [Buffer.concat(data)] } : { payload, data };
  }

  /**
   * writeFields is the length of a WRITE's fields before its data's length (type, id, handle,
   * offset), or 0 when the packet is not a WRITE whose data fills the rest of it.
   */
  private writeFields(len: number): number {
    // type (1), id (4), the handle's length (4): handles are short, so a longer one is not split.
    if (len < 9 || this.peek(5)[4] !== FXP.WRITE) return 0;
    const handle = this.peek(13).readUInt32BE(9);
    const fields = 1 + 4 + 4 + handle + 8;
    if (handle > 256 || fields + 4 > len) return 0;
    return this.peek(4 + fields + 4).readUInt32BE(4 + fields) === len - fields - 4 ? fields : 0;
  }

  private peek(n: number): Buffer {
    if (this.chunks[0]!.length < n) this.join(n);
    return this.chunks[0]!;
  }

  private take(n: number): Buffer {
    if (this.chunks[0]!.length < n) this.join(n);
    const first = this.chunks[0]!;
    const packet = first.subarray(0, n);
    if (first.length === n) this.chunks.shift();
    else this.chunks[0] = first.subarray(n);
    this.buffered -= n;
    return packet;
  }

  /** pieces takes the next n bytes as views of the pieces that hold them (no copy). */
  private pieces(n: number): Buffer[] {
    const out: Buffer[] = [];
    let whole = 0;
    this.buffered -= n;
    while (n > 0) {
      const c = this.chunks[whole]!;
      if (c.length <= n) {
        out.push(c);
        n -= c.length;
        whole++;
      } else {
        out.push(c.subarray(0, n));
        this.chunks[whole] = c.subarray(n);
        n = 0;
      }
    }
    this.chunks.splice(0, whole);
    return out;
  }

  /**
   * join copies the first n buffered bytes into one buffer of their own. Only those: joining every
   * buffered chunk copied the packets after them too, and made each of them a view that kept the
   * joined buffer alive until the last was written.
   */
  private join(n: number): void {
    const joined = Buffer.allocUnsafe(n);
    let at = 0;
    let whole = 0;
    while (at < n) {
      const c = this.chunks[whole]!;
      const used = Math.min(c.length, n - at);
      c.copy(joined, at, 0, used);
      at += used;
      if (used < c.length) this.chunks[whole] = c.subarray(used);
      else whole++;
    }
    // One splice, not a shift per piece: a client sending a byte per SSH packet must not cost n².
    this.chunks.splice(0, whole, joined);
  }
}
