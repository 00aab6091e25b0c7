/**
 * The SFTP packet splitter (protocols/sftp/packets.ts), without sockets: SSH delivers a channel's
 * bytes in pieces that do not follow SFTP's packets (a 32 KiB WRITE spans two SSH packets).
 */
import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import { FXP, MAX_PACKET, PacketSplitter, Writer, type Packet } from '../../../protocols/sftp/packets.ts';

/** framed is a payload with SFTP's 4-byte length before it. */
function framed(payload: Buffer): Buffer {
  const head = Buffer.alloc(4);
  head.writeUInt32BE(payload.length);
  return Buffer.concat([head, payload]);
}

/** whole is a packet's payload as sent: a WRITE's data kept in pieces goes back after its length. */
function whole(p: Packet): Buffer {
  if (!p.data) return p.payload;
  const length = Buffer.alloc(4);
  length.writeUInt32BE(p.data.reduce((n, d) => n + d.length, 0));
  return Buffer.concat([p.payload, length, ...p.data]);
}

/** write is the payload of an SFTP WRITE of `data` (type byte first), as OpenSSH sends it. */
function write(data: Buffer): Buffer {
  return new Writer(FXP.WRITE, 7).string('h1').u64(65_536).bytes(data).done().subarray(4);
}

/** split feeds `stream` to a new splitter in pieces of the given sizes (cycled) and collects the packets. */
function split(stream: Buffer, sizes: number[]): Packet[] {
  const s = new PacketSplitter();
  const out: Packet[] = [];
  for (let at = 0, i = 0; at < stream.length; i++) {
    const n = Math.min(sizes[i % sizes.length]!, stream.length - at);
    // A copy, as a socket hands over fresh memory: the splitter must not rely on adjacent pieces.
    out.push(...s.push(Buffer.from(stream.subarray(at, at + n))));
    at += n;
  }
  return out;
}

describe('SFTP packet splitter', () => {
  const payloads = [
    ...[1, 13, 32_781, 5].map((n) => randomBytes(n)),
    write(randomBytes(MAX_PACKET - 1024)),
    randomBytes(70_000),
    write(randomBytes(10)),
    write(randomBytes(32_768)),
    randomBytes(2),
  ];
  const stream = Buffer.concat(payloads.map(framed));

  for (const [title, sizes] of [
    ['one piece', [stream.length]],
    ['a byte at a time', [1]],
    ['pieces of 3 bytes (lengths split too)', [3]],
    ["SSH's 32 KiB pieces", [32_768]],
    ['uneven pieces', [7, 32_768, 1, 40_000, 2, 100]],
  ] as const) {
    it(`gives every packet whole and in order: ${title}`, () => {
      const got = split(stream, [...sizes]);
      expect(got.map((p) => whole(p).length)).to.deep.equal(payloads.map((p) => p.length));
      got.forEach((p, i) => expect(whole(p).equals(payloads[i]!), `packet ${i}`).to.equal(true));
    });
  }

  it('copies a packet that spanned pieces, so it stays whole when those pieces are reused', () => {
    const s = new PacketSplitter();
    const a = Buffer.from(stream.subarray(0, 7));
    const b = Buffer.from(stream.subarray(7, 40));
    const got = [...s.push(a), ...s.push(b)];
    a.fill(0);
    b.fill(0);
    expect(got[1]!.payload.equals(payloads[1]!)).to.equal(true);
  });

  it("keeps a WRITE's data in the pieces it came in, and joins anything else", () => {
    const got = split(stream, [32_768]);
    const big = got[4]!;
    expect(big.data!.length, 'pieces of the 256 KiB WRITE').to.be.greaterThan(7);
    expect(big.payload[0]).to.equal(FXP.WRITE);
    expect(got[5]!.data, 'a spanning packet that is not a WRITE').to.equal(undefined);
    // A byte at a time: the WRITE's data would be thousands of pieces; they are joined.
    for (const p of split(stream, [1])) expect(p.data?.length ?? 1).to.be.at.most(64);
  });

  it('refuses a packet longer than the limit, and an empty one', () => {
    const head = Buffer.alloc(4);
    head.writeUInt32BE(MAX_PACKET + 2048);
    expect(() => new PacketSplitter().push(head)).to.throw(/exceeds the limit/);
    expect(() => new PacketSplitter().push(Buffer.alloc(4))).to.throw(/exceeds the limit/);
  });
});
