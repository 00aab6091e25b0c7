/**
 * A local blob's download stream (blobstores/blobfile.ts): piped straight into a socket, an HTTP
 * response or a file it sends through a few buffers it reuses (new buffers for every 256 KiB made
 * V8 run full collections during 1 GiB downloads); read any other way it hands out buffers of its
 * own. Either way the bytes (and ranges) are the blob's, and a destination that goes away ends it.
 */
import { expect } from 'chai';
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import fs, { createWriteStream } from 'node:fs';
import { syncBuiltinESMExports } from 'node:module';
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

describe('blob store: LocalBlobStore.join (REST action=end)', () => {
  let root: string;
  let store: LocalBlobStore;
  const a = randomBytes(3 * 1024 * 1024 + 17);
  const b = randomBytes(5 * 1024 * 1024 + 1);
  const ids = { a: randomUUID(), b: randomUUID() };
  before(async () => {
    root = await mkdtemp(path.join(os.tmpdir(), 'svc-blobjoin-'));
    store = new LocalBlobStore(root);
    await store.put(ids.a, Readable.from([a]));
    await store.put(ids.b, Readable.from([b]));
  });
  after(async () => {
    await store.close();
    await rm(root, { recursive: true, force: true });
  });

  it('writes a range of one blob and two whole blobs in order, every piece seen first, through reused buffers', async () => {
    const id = randomUUID();
    const seen = createHash('md5');
    const memory = new Set<ArrayBufferLike>();
    const { size } = await store.join(
      id,
      [
        () => store.get(ids.a, { range: { start: 0, end: 1_000_000 } }),
        () => store.get(ids.b),
        () => store.get(ids.a),
      ],
      (chunk) => {
        seen.update(chunk);
        memory.add(chunk.buffer);
        return undefined;
      },
    );
    const want = Buffer.concat([a.subarray(0, 1_000_001), b, a]);
    expect(size).to.equal(want.length);
    expect(seen.digest('hex')).to.equal(md5(want));
    const chunks: Buffer[] = [];
    for await (const chunk of await store.get(id)) chunks.push(chunk as Buffer);
    expect(md5(Buffer.concat(chunks))).to.equal(md5(want));
    // 48 pieces of 256 KiB through two buffers (and the spares kept between streams).
    expect(memory.size).to.be.within(2, 10);
  });

  it('leaves no blob and no partial file when the hashing fails or a source is gone', async () => {
    const failing = randomUUID();
    let calls = 0;
    const err = await store
      .join(failing, [() => store.get(ids.b), () => store.get(ids.a)], () => {
        if (++calls === 3) return Promise.reject(new Error('hashing failed'));
        return undefined;
      })
      .then(
        () => null,
        (e: Error) => e,
      );
    expect(err?.message).to.equal('hashing failed');
    expect(await store.size(failing)).to.equal(null);

    const missing = randomUUID();
    const gone = await store
      .join(missing, [() => store.get(ids.a), () => store.get(randomUUID())], () => undefined)
      .then(
        () => null,
        (e: Error) => e,
      );
    expect(gone).to.be.an('error');
    expect(await store.size(missing)).to.equal(null);
    const { readdir } = await import('node:fs/promises');
    const left = (await readdir(root, { recursive: true })).filter((n) => String(n).endsWith('.partial'));
    expect(left).to.deep.equal([]);
  });
});

describe('blob store: a read that fails while the next piece is read ahead', () => {
  let root: string;
  let store: LocalBlobStore;
  const id = randomUUID();
  const realRead = fs.read;
  before(async () => {
    root = await mkdtemp(path.join(os.tmpdir(), 'svc-blobfail-'));
    store = new LocalBlobStore(root);
    await store.put(id, Readable.from([randomBytes(4 * 1024 * 1024)]));
  });
  after(async () => {
    await store.close();
    await rm(root, { recursive: true, force: true });
  });
  afterEach(() => {
    fs.read = realRead;
    syncBuiltinESMExports();
  });

  /** failReads makes every read after the first `ok` fail with EIO (a disk error). */
  function failReads(ok: number): void {
    let calls = 0;
    fs.read = ((...args: unknown[]) => {
      if (++calls <= ok) return (realRead as (...a: unknown[]) => void)(...args);
      const callback = args.at(-1) as (err: Error) => void;
      setImmediate(() => callback(Object.assign(new Error('EIO: i/o error, read'), { code: 'EIO' })));
    }) as typeof fs.read;
    syncBuiltinESMExports();
  }

  it('fails the download and the join with the disk error, never as an unhandled rejection', async () => {
    const unhandled: unknown[] = [];
    const onUnhandled = (err: unknown) => unhandled.push(err);
    process.on('unhandledRejection', onUnhandled);
    try {
      // A reader that does not read: the pump waits for a drain while its read ahead fails.
      const { socket, close } = await sink(true);
      const stream = await store.get(id);
      failReads(1);
      const piped = pipeline(stream, socket).then(
        () => null,
        (e: Error) => e,
      );
      await new Promise((resolve) => setTimeout(resolve, 100));
      socket.destroy();
      close();
      expect(await piped).to.be.an('error');

      failReads(1);
      const joined = await store
        .join(
          randomUUID(),
          [() => store.get(id)],
          () => new Promise<void>((resolve) => setTimeout(resolve, 50)),
        )
        .then(
          () => null,
          (e: Error) => e,
        );
      expect(joined?.message).to.match(/EIO/);
      await new Promise((resolve) => setTimeout(resolve, 50));
      expect(unhandled).to.deep.equal([]);
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
  });
});
