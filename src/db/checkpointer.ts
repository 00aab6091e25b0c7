/**
 * Checkpointer copies SQLite's write-ahead log back into the database file from a worker thread
 * with a connection of its own. SQLite would otherwise checkpoint inside whichever COMMIT crosses
 * 1,000 WAL pages, on the event loop: a copy of up to 4 MB and, at synchronous NORMAL, two fsyncs
 * (the WAL before, the database after) that every session on the process waited for. The
 * gateway's connection runs with wal_autocheckpoint = 0 while the worker lives, and gets SQLite's
 * own checkpoints back if the worker dies.
 */
import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';
import { LogThrottle, type Logger } from '../log.ts';

/**
 * EVERY is how many commits go by between checkpoints: about SQLite's own 1,000 pages (an upload
 * writes ~15 in each of its two commits), so a checkpoint's two fsyncs come no more often than
 * they did inside COMMIT.
 */
const EVERY = 64;

/**
 * BEHIND is the WAL's length, in pages, past which the next checkpoint runs in the database's
 * queue. A checkpoint beside the gateway's commits copies what was committed when it began, so
 * under steady writes it never catches up, and SQLite only starts the WAL over once one has
 * copied every page with no commit in between: that one runs while the queue holds the next unit
 * of work (the event loop stays free), and copies only what came since the last.
 */
const BEHIND = 2000;

// The worker's code is given as text (eval), so the same file runs under tsx and compiled.
const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const Sqlite = require(workerData.driver);
const db = new Sqlite(workerData.file);
// NORMAL: the checkpoint syncs the WAL before it copies and the database after, here, off the
// gateway's event loop; PASSIVE never waits for the gateway's connection.
db.pragma('synchronous = NORMAL');
// A checkpoint copies page by page and reads nothing twice: no page cache to hold.
db.pragma('cache_size = 8');
parentPort.on('message', (m) => {
  if (m === 'close') {
    db.close();
    parentPort.close();
    return;
  }
  try {
    const [row] = db.pragma('wal_checkpoint(PASSIVE)');
    parentPort.postMessage({ ok: true, log: row.log, checkpointed: row.checkpointed });
  } catch (err) {
    parentPort.postMessage({ ok: false, error: String(err && err.message || err) });
  }
});
`;

/** Checkpointer runs the checkpoints of one SQLite database file. */
export class Checkpointer {
  /**
   * started by `start` (a serving gateway: what it holds open is fixed once it is up) or else at
   * the first checkpoint (a CLI run or a test that commits little never needs one)
   */
  private worker: Worker | null = null;
  private commits = 0;
  private running = false;
  private closed = false;
  /** whether the last checkpoint left the WAL longer than BEHIND */
  private behind = false;
  private reply: ((m: Reply) => void) | null = null;
  private exited: Promise<void> = Promise.resolve();
  private readonly throttle = new LogThrottle(60_000);

  /**
   * `exclusive` runs a function in the database's queue (no unit of work beside it); `fallBack`
   * turns SQLite's own checkpoints back on (the worker is gone); `log` hears a failed checkpoint.
   */
  constructor(
    private readonly file: string,
    private readonly exclusive: (fn: () => Promise<void>) => Promise<void>,
    private readonly fallBack: () => void,
    private readonly log: Logger | null,
  ) {}

  /** start starts the worker now rather than at the first checkpoint. */
  start(): void {
    if (!this.closed) this.worker ??= this.spawn();
  }

  private spawn(): Worker {
    const file = this.file;
    const driver = createRequire(import.meta.url).resolve('better-sqlite3');
    const worker = new Worker(WORKER_SOURCE, {
      eval: true,
      workerData: { file, driver },
      // It keeps nothing: a small heap is all it needs, and the gateway's memory is measured.
      resourceLimits: { maxYoungGenerationSizeMb: 1, maxOldGenerationSizeMb: 16 },
    });
    // A quiet gateway or a CLI run must not be kept alive by its checkpointer.
    worker.unref();
    worker.on('message', (m: Reply) => this.reply?.(m));
    worker.on('error', (err) => {
      this.log?.error('database checkpoint worker failed; SQLite checkpoints on commit again', {
        error: err.message,
      });
    });
    this.exited = new Promise((resolve) =>
      worker.once('exit', () => {
        this.reply?.({ ok: false, error: 'the checkpoint worker exited' });
        if (!this.closed) this.fallBack();
        this.closed = true;
        resolve();
      }),
    );
    return worker;
  }

  /** committed counts a commit of the gateway's connection; every EVERY commits a checkpoint starts. */
  committed(): void {
    if (++this.commits >= EVERY && !this.running && !this.closed) this.run();
  }

  private run(): void {
    this.running = true;
    this.commits = 0;
    const worker = (this.worker ??= this.spawn());
    const checkpoint = async () => {
      const m = await new Promise<Reply>((resolve) => {
        this.reply = resolve;
        worker.postMessage('checkpoint');
      });
      this.reply = null;
      if (m.ok) this.behind = m.log > BEHIND;
      // A full disk fails every checkpoint until it has room: one line a minute says so.
      else if (this.throttle.take(m.error)) this.log?.warn('database checkpoint failed', { error: m.error });
    };
    void (this.behind ? this.exclusive(checkpoint) : checkpoint())
      .catch(() => undefined)
      .finally(() => {
        this.running = false;
        if (this.commits >= EVERY && !this.closed) this.run();
      });
  }

  /** close lets a running checkpoint finish, then closes the worker's connection. */
  async close(): Promise<void> {
    if (this.closed) return this.exited;
    this.closed = true;
    if (!this.worker) return;
    // Held open until the worker is gone: an unref'd worker would let the process end first.
    this.worker.ref();
    this.worker.postMessage('close');
    await this.exited;
  }
}

/** Reply is the worker's answer to a checkpoint: the WAL's length and how much of it is copied, in pages. */
type Reply = { ok: true; log: number; checkpointed: number } | { ok: false; error: string };
