/**
 * A local blob's download stream (blobstores/blobfile.ts): piped straight into a socket, an HTTP
 * response or a file it sends through a few buffers it reuses (new buffers for every 256 KiB made
 * V8 run full collections during 1 GiB downloads); read any other way it hands out buffers of its
 * own. Either way the bytes (and ranges) are the blob's, and a destination that goes away ends it.
 */
import { expect } from 'chai';
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { PassThrough, Readable, type Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { LocalBlobStore } from '../../../src/core/files/blobstores/local.ts';

const md5 = (b: Buffer) => createHash('md5').update(b).digest('hex');

/** recordBuffers notes the memory (ArrayBuffer) behind every chunk written into `dest`. */
function recordBuffers(dest: Writable): Set<ArrayBufferLike> {
  const seen = new Set<ArrayBufferLike>();
  const write = dest.write.bind(dest) as (...args: unknown[]) => boolean;
  (dest as unknown as { write: (...args: unknown[]) => boolean }).write = (...args: unknown[]) => {
    if (Buffer.isBuffer(args[0])) seen.add(args[0].buffer);
    return write(...args);
  };
  return seen;
}

/**
 * sink is a TCP server that gathers what one connection sends until it closes (or, `stalled`,
 * reads nothing); `socket` is the sending end.
 */
async function sink(
  stalled = false,
): Promise<{ socket: net.Socket; received: Promise<Buffer>; close: () => void }> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  let conn: net.Socket | undefined;
  const received = new Promise<Buffer>((resolve) =>
    server.once('connection', (c) => {
      conn = c;
      const chunks: Buffer[] = [];
      if (stalled) return c.pause();
      c.on('data', (d: Buffer) => chunks.push(d));
      c.on('close', () => resolve(Buffer.concat(chunks)));
    }),
  );
  const socket = net.connect((server.address() as net.AddressInfo).port, '127.0.0.1');
  await new Promise((resolve) => socket.once('connect', resolve));
  return {
    socket,
    received,
    close: () => {
      conn?.destroy();
      server.close();
    },
  };
}

describe('blob store: a local blob piped into a socket, a response or a file', () => {
  let root: string;
  let store: LocalBlobStore;
  let id: string;
  const bytes = randomBytes(24 * 1024 * 1024 + 4321);
  before(async () => {
    root = await mkdtemp(path.join(os.tmpdir(), 'svc-blobfile-'));
    store = new LocalBlobStore(root);
    id = randomUUID();
    await store.put(id, Readable.from([bytes]));
  });
  after(async () => {
    await store.close();
    await rm(root, { recursive: true, force: true });
  });

  it('sends a blob into a socket through a few reused buffers, every byte in order', async () => {
    const { socket, received, close } = await sink();
    const seen = recordBuffers(socket);
    await pipeline(await store.get(id), socket);
    const got = await received;
    close();
    expect(got.length).to.equal(bytes.length);
    expect(md5(got)).to.equal(md5(bytes));
    // 97 reads of 256 KiB; a new buffer each (fs.ReadStream's way) would be 97 ArrayBuffers.
    expect(seen.size).to.be.within(1, 12);
  });

  it('sends a range into a socket, and the same range read as a stream', async () => {
    const range = { start: 1_000_003, end: 9_000_001 };
    const { socket, received, close } = await sink();
    await pipeline(await store.get(id, { range }), socket);
    const got = await received;
    close();
    const want = bytes.subarray(range.start, range.end + 1);
    expect(md5(got)).to.equal(md5(want));
    const chunks: Buffer[] = [];
    for await (const chunk of await store.get(id, { range })) chunks.push(chunk as Buffer);
    expect(md5(Buffer.concat(chunks))).to.equal(md5(want));
  });

  it('answers an HTTP request and writes a file the same way', async () => {
    const server = http.createServer((_req, res) => {
      void store.get(id).then((stream) => {
        res.setHeader('Content-Length', bytes.length);
        stream.pipe(res);
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const response = await fetch(`http://127.0.0.1:${(server.address() as net.AddressInfo).port}/`);
    const body = Buffer.from(await response.arrayBuffer());
    server.close();
    expect(md5(body)).to.equal(md5(bytes));

    const file = path.join(root, 'copy');
    const out = createWriteStream(file);
    const seen = recordBuffers(out);
    await pipeline(await store.get(id), out);
    expect(md5(await readFile(file))).to.equal(md5(bytes));
    expect(seen.size).to.be.within(1, 12);
  });

  it('hands a Transform buffers of its own: it passes each one on as it is', async () => {
    const through = new PassThrough();
    const seen = recordBuffers(through);
    const chunks: Buffer[] = [];
    through.on('data', (c: Buffer) => chunks.push(c));
    await pipeline(await store.get(id), through);
    expect(md5(Buffer.concat(chunks))).to.equal(md5(bytes));
    expect(seen.size).to.equal(chunks.length);
  });

  it('ends (and closes its file) when the socket is cut mid-way, or the download is aborted', async () => {
    const { socket, received, close } = await sink();
    const stream = await store.get(id);
    const closed = new Promise((resolve) => stream.once('close', resolve));
    stream.pipe(socket);
    setTimeout(() => socket.destroy(), 5);
    await closed;
    await received;
    close();
    expect(stream.destroyed).to.equal(true);

    const controller = new AbortController();
    // A reader that never reads: the pump waits for a drain that does not come.
    const second = await sink(true);
    const aborted = await store.get(id, { signal: controller.signal });
    const piped = pipeline(aborted, second.socket);
    setTimeout(() => controller.abort(), 20);
    const err = await piped.then(
      () => null,
      (e: Error) => e,
    );
    second.socket.destroy();
    second.close();
    expect(err?.name).to.equal('AbortError');
    expect(aborted.destroyed).to.equal(true);
  });

  it('reads as a plain stream once anyone read from it first', async () => {
    const stream = await store.get(id);
    const first = (await new Promise<Buffer>((resolve) => stream.once('data', resolve))) as Buffer;
    stream.pause();
    const { socket, received, close } = await sink();
    await pipeline(stream, socket);
    const got = Buffer.concat([first, await received]);
    close();
    expect(md5(got)).to.equal(md5(bytes));
  });
});
