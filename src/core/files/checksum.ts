/**
 * Checksum computes a stream's md5 and crc32 off the event loop (issue 13): bytes are copied into
 * 1 MiB batches whose memory moves to a worker thread that hashes them, so a 1 GiB upload does
 * not stall every other session for the ~2.5 s of md5 it costs (about 430 MB/s on one core).
 *
 * A file that ends inside its first batch never reaches a worker: it is hashed inline at the end,
 * where the round trip would cost more than the hashing (md5 state cannot move between threads, so
 * the first batch waits until it is known whether the file is small). Batches in flight per
 * checksum are bounded: `update` returns a promise to wait on when the worker lags, and the
 * Hasher stream applies it as backpressure.
 */
import { createHash } from 'node:crypto';
import os from 'node:os';
import { Transform, type TransformCallback } from 'node:stream';
import { crc32 } from 'node:zlib';
import { BackgroundThread, type Channel } from '../../thread.ts';

/** Digest is a content's hex md5 and its crc32 as 8 hex digits. */
export interface Digest {
  md5: string;
  crc32: string;
}

const BATCH = 1024 * 1024;
/** IN_FLIGHT batches per checksum may wait for its worker before the writer is held back. */
const IN_FLIGHT = 4;
/** SPARE batch buffers come back from the workers and are kept for the next batches. */
const SPARE = 16;
const spare: ArrayBuffer[] = [];

/** hexCrc formats a zlib crc32 value as SPEC's 8 hex digits. */
function hexCrc(crc: number): string {
  return (crc >>> 0).toString(16).padStart(8, '0');
}

// The handler's code is text (thread.ts), so the same file runs under tsx and compiled.
const HASH_SOURCE = `(require) => {
  const { createHash } = require('node:crypto');
  const { crc32 } = require('node:zlib');
  const states = new Map();
  return (m, reply) => {
    if (m.type === 'data') {
      let s = states.get(m.id);
      if (!s) states.set(m.id, (s = { md5: createHash('md5'), crc: 0 }));
      const chunk = new Uint8Array(m.buffer, 0, m.length);
      s.md5.update(chunk);
      s.crc = crc32(chunk, s.crc);
      // The batch's memory goes back for reuse: no allocation per MiB, none left to this isolate's GC.
      reply({ type: 'ack', id: m.id, buffer: m.buffer }, [m.buffer]);
    } else if (m.type === 'end') {
      const s = states.get(m.id) ?? { md5: createHash('md5'), crc: 0 };
      states.delete(m.id);
      reply({ type: 'digest', id: m.id, md5: s.md5.digest('hex'), crc: s.crc });
    } else if (m.type === 'discard') {
      states.delete(m.id);
    }
  };
}`;

/** Flow is a checksum's batches in flight and the writers waiting for fewer (kept apart from the
 * Checksum itself, so the worker's table does not keep a forgotten Checksum alive). */
interface Flow {
  inFlight: number;
  waiters: (() => void)[];
}

interface Pending {
  flow: Flow;
  digest?: { resolve: (d: Digest) => void; reject: (err: Error) => void };
}

/** HashWorker is the hashing on one background thread and the checksums it is computing. */
class HashWorker {
  private readonly channel: Channel;
  readonly pending = new Map<number, Pending>();
  dead: Error | null = null;

  constructor(thread: BackgroundThread) {
    this.channel = thread.open('hash', HASH_SOURCE, {
      message: (message) => {
        const m = message as { type: string; id: number; md5?: string; crc?: number; buffer?: ArrayBuffer };
        if (m.buffer && spare.length < SPARE) spare.push(m.buffer);
        const p = this.pending.get(m.id);
        if (!p) return;
        if (m.type === 'ack') {
          p.flow.inFlight--;
          if (p.flow.inFlight < IN_FLIGHT) for (const wake of p.flow.waiters.splice(0)) wake();
        } else if (m.type === 'digest') {
          this.pending.delete(m.id);
          p.digest?.resolve({ md5: m.md5!, crc32: hexCrc(m.crc!) });
        }
      },
      exit: (err) => {
        this.dead ??= err;
        for (const p of this.pending.values()) {
          for (const wake of p.flow.waiters.splice(0)) wake();
          p.digest?.reject(this.dead);
        }
        this.pending.clear();
      },
    });
  }

  post(message: object, transfer?: ArrayBuffer[]): void {
    this.channel.post(message, transfer);
  }
}

// A checksum dropped without digest or discard (a path that forgot) is forgotten by its worker
// when it is collected, so the worker's states cannot pile up.
const forgotten = new FinalizationRegistry<{ worker: HashWorker; id: number }>(({ worker, id }) => {
  worker.pending.delete(id);
  if (!worker.dead) worker.post({ type: 'discard', id });
});

const workers: HashWorker[] = [];
let nextWorker = 0;
let nextId = 1;

/** pickWorker spreads checksums over up to (cores − 1) threads: one core stays for the event loop. */
function pickWorker(): HashWorker {
  const size = Math.max(1, Math.min(4, os.availableParallelism() - 1));
  for (let i = workers.length - 1; i >= 0; i--) if (workers[i]!.dead) workers.splice(i, 1);
  if (workers.length < size) {
    // The first shares the process's background thread (with SQLite's checkpoints); more are
    // threads of their own, on machines with cores to spare.
    const w = new HashWorker(workers.length === 0 ? BackgroundThread.shared() : new BackgroundThread());
    workers.push(w);
    return w;
  }
  return workers[nextWorker++ % workers.length]!;
}

/** Checksum accumulates bytes in order and gives their md5, crc32 and count. */
export class Checksum {
  bytes = 0;
  private batch: Buffer | null = null;
  private fill = 0;
  private worker: HashWorker | null = null;
  private readonly id = nextId++;
  private readonly flow: Flow = { inFlight: 0, waiters: [] };
  private finished = false;

  /**
   * update takes the next bytes (copied at once, so the caller may reuse its buffer). It returns a
   * promise when the worker lags by IN_FLIGHT batches; waiting on it is the caller's backpressure.
   */
  update(chunk: Uint8Array): Promise<void> | undefined {
    if (this.finished) throw new Error('checksum already finished');
    this.bytes += chunk.length;
    let at = 0;
    while (at < chunk.length) {
      if (!this.batch) {
        const reused = spare.pop();
        this.batch = reused ? Buffer.from(reused) : Buffer.allocUnsafeSlow(BATCH);
      }
      const n = Math.min(chunk.length - at, BATCH - this.fill);
      this.batch.set(chunk.subarray(at, at + n), this.fill);
      this.fill += n;
      at += n;
      if (this.fill === BATCH) this.send();
    }
    if (this.flow.inFlight < IN_FLIGHT) return undefined;
    return new Promise((resolve) => this.flow.waiters.push(resolve));
  }

  /** send moves the full (or final) batch's memory to the worker without a copy. */
  private send(): void {
    if (!this.worker) {
      this.worker = pickWorker();
      forgotten.register(this, { worker: this.worker, id: this.id }, this);
      this.worker.pending.set(this.id, { flow: this.flow });
    }
    const buffer = this.batch!.buffer as ArrayBuffer;
    this.worker.post({ type: 'data', id: this.id, buffer, length: this.fill }, [buffer]);
    this.flow.inFlight++;
    this.batch = null;
    this.fill = 0;
  }

  /** digest ends the checksum and gives md5 and crc32 of every byte given to update. */
  async digest(): Promise<Digest> {
    if (this.finished) throw new Error('checksum already finished');
    this.finished = true;
    if (!this.worker) {
      // Small: hashed here, no round trip.
      const data = this.batch ? this.batch.subarray(0, this.fill) : Buffer.alloc(0);
      const digest = { md5: createHash('md5').update(data).digest('hex'), crc32: hexCrc(crc32(data)) };
      this.release();
      return digest;
    }
    if (this.fill > 0) this.send();
    forgotten.unregister(this);
    const worker = this.worker;
    if (worker.dead) throw worker.dead;
    return new Promise<Digest>((resolve, reject) => {
      const p = worker.pending.get(this.id)!;
      p.digest = { resolve, reject };
      worker.post({ type: 'end', id: this.id });
    });
  }

  /**
   * release puts the batch not sent to a worker back among the spares. A small file's bytes never
   * leave its first batch: dropped, each small upload left 1 MiB to the collector, which V8 counts
   * as external memory allocated since its last full collection, so a run of small uploads started
   * one every few dozen files (1,000 WebDAV PUTs: 1 GiB allocated, ~10 mark-compacts).
   */
  private release(): void {
    if (this.batch && spare.length < SPARE) spare.push(this.batch.buffer as ArrayBuffer);
    this.batch = null;
    this.fill = 0;
  }

  /** discard gives the checksum up (an aborted or out-of-order upload); the worker forgets it. */
  discard(): void {
    if (this.finished) return;
    this.finished = true;
    this.release();
    for (const wake of this.flow.waiters.splice(0)) wake();
    if (!this.worker) return;
    forgotten.unregister(this);
    this.worker.pending.delete(this.id);
    if (!this.worker.dead) this.worker.post({ type: 'discard', id: this.id });
  }
}

/** Hasher passes bytes through unchanged and knows their md5, crc32 and count at the end. */
export class Hasher extends Transform {
  private readonly sum = new Checksum();

  /** bytes counts what passed through so far. */
  get bytes(): number {
    return this.sum.bytes;
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback): void {
    const wait = this.sum.update(chunk);
    if (wait) void wait.then(() => done(null, chunk));
    else done(null, chunk);
  }

  override _destroy(err: Error | null, done: (err?: Error | null) => void): void {
    // Destroyed before its end (an error, an abort): nobody will ask for the digest. After a
    // normal end the stream destroys itself too, and the digest is still to be read.
    if (!this.writableFinished) this.sum.discard();
    done(err);
  }

  /** discard gives the checksum up when the bytes that passed are not kept. */
  discard(): void {
    this.sum.discard();
  }

  /** update hashes bytes that do not pass through (kept bytes stored elsewhere already). */
  update(chunk: Buffer): Promise<void> | undefined {
    return this.sum.update(chunk);
  }

  /** digest gives the hex md5 and crc32 (8 hex digits) once the stream has ended. */
  digest(): Promise<Digest> {
    return this.sum.digest();
  }
}
