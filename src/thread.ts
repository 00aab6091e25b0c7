/**
 * BackgroundThread is a worker thread for the work the gateway keeps off its event loop: the md5
 * and crc32 of uploads (core/files/checksum.ts) and SQLite's checkpoints (db/checkpointer.ts). A
 * worker thread costs about 9 MiB of memory before it does anything (its own V8 heap and Node's
 * start-up), so the process shares one thread between them rather than giving each its own
 * (issue 13: the gateway's memory, idle and during transfers). Each user installs a handler the
 * first time it posts, and talks to it over a channel of its own; replies come back on it.
 */
import { Worker } from 'node:worker_threads';

// The thread's code is given as text (eval), so the same file runs under tsx and compiled. A
// handler's source is an expression: a function of `require` that returns `(message, reply) =>`.
const THREAD_SOURCE = `
const { parentPort } = require('node:worker_threads');
const handlers = new Map();
parentPort.on('message', (m) => {
  if (m.install) {
    handlers.set(m.install, (0, eval)(m.source)(require));
    return;
  }
  handlers.get(m.handler)(m.message, (message, transfer) =>
    parentPort.postMessage({ channel: m.channel, message }, transfer ?? []));
});
`;

/** Channel is one user's line to a handler on a background thread. */
export interface Channel {
  /** post sends a message to the handler; `transfer` moves ArrayBuffers without a copy. */
  post(message: unknown, transfer?: ArrayBuffer[]): void;
  /** hold keeps the process alive until the returned function is called (work that must finish). */
  hold(): () => void;
  /** close stops listening (the thread stays for the others). */
  close(): void;
}

/** Listener hears a channel's replies, and once, the thread's death. */
export interface Listener {
  message(message: unknown): void;
  exit(err: Error): void;
}

let shared: BackgroundThread | null = null;
let nextChannel = 1;

/** BackgroundThread is one worker thread and the channels open to it. */
export class BackgroundThread {
  private readonly worker: Worker;
  private readonly installed = new Set<string>();
  private readonly channels = new Map<number, Listener>();
  private holds = 0;
  /** why the thread is gone, or null while it runs */
  dead: Error | null = null;

  /** shared is the process's background thread, started at its first use and again if it died. */
  static shared(): BackgroundThread {
    if (!shared || shared.dead) shared = new BackgroundThread();
    return shared;
  }

  /** constructor starts another thread (more hashing on a machine with cores to spare). */
  constructor() {
    this.worker = new Worker(THREAD_SOURCE, {
      eval: true,
      // What it keeps is small (hash states, a connection with an 8-page cache); its batches of
      // bytes are moved in, not allocated on its heap.
      resourceLimits: { maxYoungGenerationSizeMb: 1, maxOldGenerationSizeMb: 32 },
    });
    // An idle thread must not keep a finished process (a CLI run, a test) alive.
    this.worker.unref();
    this.worker.on('message', (m: { channel: number; message: unknown }) =>
      this.channels.get(m.channel)?.message(m.message),
    );
    const fail = (err: Error) => {
      if (this.dead) return;
      this.dead = err;
      const listeners = [...this.channels.values()];
      this.channels.clear();
      for (const l of listeners) l.exit(err);
    };
    this.worker.on('error', fail);
    this.worker.on('exit', (code) => fail(new Error(`background thread exited with code ${code}`)));
  }

  /**
   * open opens a channel to the handler `name` (installed from `source` on its first use here); a
   * dead thread calls the listener's exit at once.
   */
  open(name: string, source: string, listener: Listener): Channel {
    const id = nextChannel++;
    if (this.dead) queueMicrotask(() => listener.exit(this.dead!));
    else this.channels.set(id, listener);
    return {
      post: (message, transfer) => {
        if (this.dead) return;
        if (!this.installed.has(name)) {
          this.installed.add(name);
          this.worker.postMessage({ install: name, source });
        }
        this.worker.postMessage({ handler: name, channel: id, message }, transfer ?? []);
      },
      hold: () => {
        if (this.holds++ === 0) this.worker.ref();
        let released = false;
        return () => {
          if (released) return;
          released = true;
          if (--this.holds === 0) this.worker.unref();
        };
      },
      close: () => void this.channels.delete(id),
    };
  }
}
