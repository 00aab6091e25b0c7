/**
 * Checkpointer copies SQLite's write-ahead log back into the database file from the background
 * thread (thread.ts), with a connection of its own there. SQLite would otherwise checkpoint
 * inside whichever COMMIT crosses 1,000 WAL pages, on the event loop: a copy of up to 4 MB and,
 * at synchronous NORMAL, two fsyncs (the WAL before, the database after) that every session on
 * the process waited for. The gateway's connection runs with wal_autocheckpoint = 0 while the
 * thread lives, and gets SQLite's own checkpoints back if the thread dies.
 */
import { createRequire } from 'node:module';
import { LogThrottle, type Logger } from '../log.ts';
import { BackgroundThread, type Channel } from '../thread.ts';

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

// The handler's code is text (thread.ts), so the same file runs under tsx and compiled. One
// thread serves every database of the process (tests open many), each by its file.
const CHECKPOINT_SOURCE = `(require) => {
  const dbs = new Map();
  const open = (m) => {
    let db = dbs.get(m.file);
    if (db) return db;
    const Sqlite = require(m.driver);
    db = new Sqlite(m.file);
    dbs.set(m.file, db);
    // NORMAL: the checkpoint syncs the WAL before it copies and the database after, here, off the
    // gateway's event loop; PASSIVE never waits for the gateway's connection.
    db.pragma('synchronous = NORMAL');
    // A checkpoint copies page by page and reads nothing twice: no page cache to hold.
    db.pragma('cache_size = 8');
    return db;
  };
  return (m, reply) => {
    if (m.type === 'open') {
      // Unanswered: a file that cannot be opened now fails the first checkpoint, which says why.
      try {
        open(m);
      } catch {}
      return;
    }
    try {
      if (m.type === 'close') {
        dbs.get(m.file)?.close();
        dbs.delete(m.file);
        reply({ ok: true, log: 0, checkpointed: 0 });
      } else {
        const [row] = open(m).pragma('wal_checkpoint(PASSIVE)');
        reply({ ok: true, log: row.log, checkpointed: row.checkpointed });
      }
    } catch (err) {
      reply({ ok: false, error: String((err && err.message) || err) });
    }
  };
}`;

/** Checkpointer runs the checkpoints of one SQLite database file. */
export class Checkpointer {
  /**
   * opened by `start` (a serving gateway: what it holds open is fixed once it is up) or else at
   * the first checkpoint (a CLI run or a test that commits little never needs one)
   */
  private channel: Channel | null = null;
  private readonly driver = createRequire(import.meta.url).resolve('better-sqlite3');
  private commits = 0;
  private running = false;
  private closed = false;
  /** whether the last checkpoint left the WAL longer than BEHIND */
  private behind = false;
  /** the requests posted and not yet answered, in order: the thread answers them in turn */
  private readonly replies: ((m: Reply) => void)[] = [];
  private readonly throttle = new LogThrottle(60_000);

  /**
   * `exclusive` runs a function in the database's queue (no unit of work beside it); `fallBack`
   * turns SQLite's own checkpoints back on (the thread is gone); `log` hears a failed checkpoint.
   */
  constructor(
    private readonly file: string,
    private readonly exclusive: (fn: () => Promise<void>) => Promise<void>,
    private readonly fallBack: () => void,
    private readonly log: Logger | null,
  ) {}

  /** start opens the connection in the background thread now rather than at the first checkpoint. */
  start(): void {
    if (!this.closed) this.connect();
  }

  private connect(): Channel {
    if (this.channel) return this.channel;
    const channel = BackgroundThread.shared().open('checkpoint', CHECKPOINT_SOURCE, {
      message: (m) => this.replies.shift()?.(m as Reply),
      exit: (err) => {
        if (!this.closed) {
          this.log?.error("the database checkpoints' thread failed; SQLite checkpoints on commit again", {
            error: err.message,
          });
          this.fallBack();
        }
        this.closed = true;
        for (const reply of this.replies.splice(0)) reply({ ok: false, error: err.message });
      },
    });
    channel.post({ type: 'open', file: this.file, driver: this.driver });
    return (this.channel = channel);
  }

  /** ask posts a request to the connection in the thread and gives its answer. */
  private ask(channel: Channel, type: 'checkpoint' | 'close'): Promise<Reply> {
    return new Promise<Reply>((resolve) => {
      this.replies.push(resolve);
      channel.post({ type, file: this.file, driver: this.driver });
    });
  }

  /** committed counts a commit of the gateway's connection; every EVERY commits a checkpoint starts. */
  committed(): void {
    if (++this.commits >= EVERY && !this.running && !this.closed) this.run();
  }

  private run(): void {
    this.running = true;
    this.commits = 0;
    const channel = this.connect();
    const checkpoint = async () => {
      const m = await this.ask(channel, 'checkpoint');
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

  /** close lets a running checkpoint finish, then closes the thread's connection to the file. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    const channel = this.channel;
    if (!channel) return;
    // Held until the connection is closed: the unref'd thread would let the process end first.
    const release = channel.hold();
    try {
      await this.ask(channel, 'close');
    } finally {
      channel.close();
      release();
    }
  }
}

/** Reply is the thread's answer to a checkpoint: the WAL's length and how much of it is copied, in pages. */
type Reply = { ok: true; log: number; checkpointed: number } | { ok: false; error: string };
