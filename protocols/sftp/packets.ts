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

/** PacketSplitter cuts a byte stream into packet payloads (type byte first), refusing oversize ones. */
export class PacketSplitter {
  private chunks: Buffer[] = [];
  private buffered = 0;

  /** push adds bytes and returns every packet they completed. */
  push(chunk: Buffer): Buffer[] {
    this.chunks.push(chunk);
    this.buffered += chunk.length;
    const out: Buffer[] = [];
    for (;;) {
      if (this.buffered < 4) break;
      const head = this.peek(4);
      const len = head.readUInt32BE(0);
      if (len === 0 || len > MAX_PACKET + 1024)
        throw new BadMessage(`packet of ${len} bytes exceeds the limit`);
      if (this.buffered < 4 + len) break;
      out.push(this.take(4 + len).subarray(4));
    }
    return out;
  }

  private peek(n: number): Buffer {
    if (this.chunks[0]!.length >= n) return this.chunks[0]!;
    this.chunks = [Buffer.concat(this.chunks)];
    return this.chunks[0]!;
  }

  private take(n: number): Buffer {
    const all = this.chunks[0]!.length >= n ? this.chunks[0]! : Buffer.concat(this.chunks);
    const packet = all.subarray(0, n);
    const rest = all.subarray(n);
    if (all === this.chunks[0]) this.chunks.shift();
    else this.chunks = [];
    if (rest.length) this.chunks.unshift(rest);
    this.buffered -= n;
    return packet;
  }
}
