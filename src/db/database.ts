/**
 * The one data-access layer. Every read and unit of work of the core goes through `Database`.
 *
 * Why: TypeORM's better-sqlite3 driver shares one connection between all callers, so a second
 * transaction started while another is open silently becomes a SAVEPOINT inside it, and the
 * outer ROLLBACK erases writes the inner caller believed committed (typeorm/typeorm#307, #10364;
 * research/libraries.md §4). On SQLite every call here therefore waits its turn in a FIFO queue;
 * the calls queued in one turn of the event loop run as one transaction with a savepoint each (a
 * group: issue 13, per-file cost), so concurrent sessions share its COMMIT, its WAL pages and
 * its file locks, while each call still commits or fails on its own. PostgreSQL gets one pooled
 * connection per transaction, and the same API.
 *
 * Rule for callers: a unit of work does database statements only. Never await network or storage
 * I/O inside it (an upload is two short units: started, committed).
 */
import { mkdirSync } from 'node:fs';
import { open, type FileHandle } from 'node:fs/promises';
import path from 'node:path';
import { DataSource, type EntityManager } from 'typeorm';
import { ConfigError, type Config } from '../config.ts';
import { classifyDatabaseError, databaseUnreachableCause } from '../core/errors.ts';
import { LogThrottle, type Logger } from '../log.ts';
import { Checkpointer } from './checkpointer.ts';
import { entities } from './entities.ts';
import { migrations } from './migrations/index.ts';

// What to run once a unit of work has committed, by its transaction's EntityManager.
const committed = new WeakMap<EntityManager, (() => void)[]>();

/**
 * afterCommit runs `fn` once the unit of work `em` belongs to has committed, never if it rolls back
 * (storage I/O a change calls for, such as deleting a blob it made garbage, starts there: never
 * inside the transaction). Outside a unit of work it runs `fn` on the next tick.
 */
export function afterCommit(em: EntityManager, fn: () => void): void {
  const hooks = committed.get(em);
  if (hooks) hooks.push(fn);
  else if (em.queryRunner?.isTransactionActive) committed.set(em, [fn]);
  else queueMicrotask(fn);
}

function runHooks(hooks: (() => void)[] | undefined): void {
  if (hooks) for (const hook of hooks) hook();
}

/** takeHooks takes what is to run after `em`'s unit of work commits. */
function takeHooks(em: EntityManager | undefined): (() => void)[] | undefined {
  const hooks = em && committed.get(em);
  if (hooks) committed.delete(em!);
  return hooks;
}

/** dropHooks forgets what a unit of work that did not commit had registered (SQLite shares one EntityManager). */
function dropHooks(em: EntityManager): void {
  committed.delete(em);
}

/** GROUP is the most calls one turn of SQLite's queue runs in one transaction. */
const GROUP = 64;

/** Queued is a call waiting in SQLite's queue. */
interface Queued {
  /** `solo` runs alone and outside any transaction (migrations, checkpoints) */
  kind: 'read' | 'work' | 'solo';
  /** the metric it is timed under */
  metric: 'read' | 'work';
  fn: (em: EntityManager) => Promise<unknown>;
  /** a unit of work answered only once the WAL is synced (storage.durability `fsync`) */
  durable: boolean;
  resolve: (value: unknown) => void;
  reject: (err: unknown) => void;
}

/** Done is a call that committed, with its value and what is to run after it. */
interface Done {
  u: Queued;
  started: bigint;
  value: unknown;
  hooks: (() => void)[] | undefined;
}

/** DatabaseKind tells which server answers: the embedded SQLite file or PostgreSQL. */
export type DatabaseKind = 'sqlite' | 'postgres';

/**
 * Database serializes units of work on SQLite and runs them in transactions on both databases. A
 * database that does not answer fails every call with `service-unavailable/database-unavailable`
 * (a full disk under SQLite with `insufficient-storage`), logged at most once per cause every few
 * seconds; the pool reconnects by itself when the database is back, so no restart is needed.
 */
export class Database {
  /** SQLite: the calls waiting their turn, and whether a turn is scheduled or running */
  private readonly waiting: Queued[] = [];
  private pumping = false;
  /** close's waits for the queue to empty */
  private readonly drained: (() => void)[] = [];
  /** SQLite: the connection, for the savepoints of a group and its transaction state */
  private sqlite: SqliteHandle | null = null;
  private readonly throttle = new LogThrottle();
  /** calls started and not yet finished (on SQLite, the one running and those waiting their turn) */
  private calls = 0;
  /** observe, when set, hears how long each read or unit of work took (the core's metrics) */
  observe: ((kind: 'read' | 'work', seconds: number, ok: boolean) => void) | null = null;

  private constructor(
    readonly source: DataSource,
    readonly kind: DatabaseKind,
    private readonly log: Logger | null,
    /** storage.durability: whether a commit waits for the disk */
    private readonly durability: 'fsync' | 'os',
    /** SQLite's write-ahead log, which walSync syncs */
    private readonly walFile: string | null = null,
  ) {}

  /** SQLite: set to have the next transaction take the write lock as it begins */
  private immediate: { next: boolean } | null = null;
  /** SQLite's checkpoints, off the event loop */
  private checkpointer: Checkpointer | null = null;
  /** the open WAL, for its syncs */
  private wal: FileHandle | null = null;
  /** the WAL sync in flight, and the one queued after it for commits that came meanwhile */
  private walSyncing: Promise<void> | null = null;
  private walNext: Promise<void> | null = null;

  /**
   * walSync resolves once every commit made before the call is on disk (SQLite, storage.durability
   * `fsync`). Group commit: a sync covers every commit before it started, so the commits that wait
   * while one runs share the next one, and the event loop serves other sessions meanwhile.
   */
  private walSync(): Promise<void> {
    if (this.walSyncing === null) {
      const run = this.syncWalNow().finally(() => {
        this.walSyncing = null;
      });
      this.walSyncing = run;
      return run;
    }
    this.walNext ??= this.walSyncing
      .catch(() => undefined)
      .then(() => {
        this.walNext = null;
        return this.walSync();
      });
    return this.walNext;
  }

  private async syncWalNow(): Promise<void> {
    // The WAL exists from the first write until the last connection closes (SQLite's WAL mode);
    // it is reset in place after a checkpoint, never replaced, so one descriptor serves.
    this.wal ??= await open(this.walFile!, 'r');
    await this.wal.datasync();
  }

  /** open connects to the database the settings name; it does not migrate. */
  static async open(config: Config, log?: Logger): Promise<Database> {
    const kind: DatabaseKind = config.database.url ? 'postgres' : 'sqlite';
    let source: DataSource;
    let handle: SqliteHandle | null = null;
    if (kind === 'postgres') {
      source = new DataSource({
        type: 'postgres',
        url: config.database.url,
        entities,
        migrations,
        poolSize: config.database.pool_size,
        parseInt8: true,
        // storage.durability `os`: a commit returns before its WAL record is flushed (the server
        // flushes it within wal_writer_delay); never inconsistent, a power loss may drop the last.
        ...(config.storage.durability === 'os' ? { extra: { options: '-c synchronous_commit=off' } } : {}),
        migrationsTransactionMode: 'each',
        logging: false,
      });
    } else {
      try {
        mkdirSync(config.data_dir, { recursive: true });
      } catch (err) {
        throw new ConfigError(cannotOpen(config, err));
      }
      source = new DataSource({
        type: 'better-sqlite3',
        database: path.join(config.data_dir, 'gateway.sqlite'),
        entities,
        migrations,
        enableWAL: true,
        // NORMAL syncs the WAL at checkpoints only, which in WAL mode stays consistent and loses
        // nothing when the process crashes. Under storage.durability `fsync` the gateway syncs the
        // WAL itself after each durable commit (walSync), off the event loop and shared by the
        // commits that wait together: SQLite's FULL would sync inside COMMIT, on the event loop.
        prepareDatabase: (db: SqliteHandle) => {
          db.pragma('synchronous = NORMAL');
          // A group's savepoints (Database.runGroup) keep their undo pages in memory, not in temp files.
          db.pragma('temp_store = MEMORY');
          handle = db;
        },
        timeout: config.database.sqlite_busy_timeout_ms,
        migrationsTransactionMode: 'each',
        logging: false,
      });
    }
    try {
      await source.initialize();
    } catch (err) {
      throw new ConfigError(cannotOpen(config, err));
    }
    const wal = kind === 'sqlite' ? path.join(config.data_dir, 'gateway.sqlite-wal') : null;
    const db = new Database(source, kind, log ?? null, config.storage.durability, wal);
    if (kind === 'sqlite') db.immediate = immediateBegin(source);
    if (handle) {
      const main: SqliteHandle = handle;
      db.sqlite = main;
      db.checkpointer = new Checkpointer(
        path.join(config.data_dir, 'gateway.sqlite'),
        (fn) => db.serialized('work', fn),
        () => main.open && main.pragma('wal_autocheckpoint = 1000'),
        log ?? null,
      );
      main.pragma('wal_autocheckpoint = 0');
    }
    return db;
  }

  /** migrate applies every pending migration and returns the names it applied. */
  async migrate(): Promise<string[]> {
    return this.serialized('work', async () => {
      const applied = await this.source.runMigrations();
      return applied.map((m) => m.name);
    });
  }

  /** pendingMigrations tells whether the schema is behind the code. */
  async pendingMigrations(): Promise<boolean> {
    return this.serialized('read', () => this.source.showMigrations());
  }

  /**
   * work runs fn as one transaction; on SQLite no other read or unit of work runs meanwhile.
   * `durable: false` lets the commit return before it is on disk, for rows that only matter
   * together with a later durable commit (a new blob's record, which its upload's commit settles):
   * the later commit's sync carries it (SQLite's WAL is synced in order; PostgreSQL's WAL flush
   * covers every earlier record), so an upload costs one sync of the database, not two.
   */
  work<T>(fn: (em: EntityManager) => Promise<T>, opts: { durable?: boolean } = {}): Promise<T> {
    const lazy = opts.durable === false && this.durability === 'fsync';
    if (this.kind === 'sqlite')
      // SQLite at `fsync`: on disk before anyone hears of it, synced outside the queue, so the next
      // unit of work runs while this one's sync is under way (and may share it).
      return this.enqueue('work', fn, this.durability === 'fsync' && !lazy);
    return this.observed('work', async () => {
      let tx: EntityManager | undefined;
      const value = await this.source.transaction(async (em) => {
        tx = em;
        if (lazy) await em.query('SET LOCAL synchronous_commit TO OFF');
        return fn(em);
      });
      runHooks(takeHooks(tx));
      return value;
    });
  }

  /**
   * one is work for a unit of work that is a single statement, which is atomic by itself: on
   * PostgreSQL it runs without a transaction around it (one round trip instead of three), unless
   * `durable: false` needs one to let its commit skip the wait for the disk; on SQLite it is work.
   */
  one<T>(fn: (em: EntityManager) => Promise<T>, opts: { durable?: boolean } = {}): Promise<T> {
    if (this.kind === 'sqlite' || (opts.durable === false && this.durability === 'fsync'))
      return this.work(fn, opts);
    // Outside a transaction, afterCommit runs its hooks once the statement has answered.
    return this.observed('work', () => fn(this.source.manager));
  }

  /**
   * read runs fn without a transaction of its own (reads, or statements that each stand alone and
   * commit on their own, such as a lease's release); on SQLite it still waits its turn, so it never
   * sees uncommitted rows.
   */
  read<T>(fn: (em: EntityManager) => Promise<T>): Promise<T> {
    if (this.kind === 'sqlite') return this.enqueue('read', fn, false);
    return this.observed('read', () => fn(this.source.manager));
  }

  /**
   * serving readies what a serving gateway keeps for its whole run (SQLite's checkpoint thread),
   * so that the descriptors and threads it holds are fixed once it is up.
   */
  serving(): void {
    this.checkpointer?.start();
  }

  /** close waits for queued work and closes the connection or pool. */
  async close(): Promise<void> {
    while (this.pumping || this.waiting.length) await new Promise<void>((r) => this.drained.push(r));
    await this.walSyncing?.catch(() => undefined);
    await this.wal?.close().catch(() => undefined);
    this.wal = null;
    await this.checkpointer?.close();
    this.checkpointer = null;
    if (this.source.isInitialized) await this.source.destroy();
  }

  /**
   * pool tells how the connections are used now: PostgreSQL's pool (open, idle, callers waiting
   * for one, the most it opens); SQLite's one connection, busy or idle, and the calls queued for it.
   */
  pool(): { total: number; idle: number; waiting: number; max: number } {
    if (this.kind === 'postgres') {
      const pg = (this.source.driver as unknown as { master?: PgPoolCounts }).master;
      return {
        total: pg?.totalCount ?? 0,
        idle: pg?.idleCount ?? 0,
        waiting: pg?.waitingCount ?? 0,
        max: pg?.options?.max ?? 0,
      };
    }
    return { total: 1, idle: this.calls > 0 ? 0 : 1, waiting: Math.max(0, this.calls - 1), max: 1 };
  }

  /**
   * ping answers once the database ran a trivial statement (readiness, doctor), with the server's
   * clock on PostgreSQL; it does not wait in SQLite's queue, so it never holds up real work.
   */
  async ping(): Promise<{ now: Date | null }> {
    if (this.kind === 'postgres') {
      const rows = (await this.source.query('SELECT now() AS now')) as { now: Date }[];
      return { now: new Date(rows[0]!.now) };
    }
    await this.source.query('SELECT 1');
    return { now: null };
  }

  /** serialized runs fn alone on SQLite, outside any transaction (migrations, checkpoints). */
  private serialized<T>(kind: 'read' | 'work', fn: () => Promise<T>): Promise<T> {
    if (this.kind !== 'sqlite') return this.observed(kind, fn);
    return this.enqueue('solo', fn, false, kind);
  }

  /** observed runs fn as one call: counted while it runs, timed for the metrics, its failure classified. */
  private observed<T>(kind: 'read' | 'work', fn: () => Promise<T>): Promise<T> {
    this.calls++;
    const started = process.hrtime.bigint();
    return fn().then(
      (v) => {
        this.calls--;
        this.timed(kind, started, true);
        return v;
      },
      (err: unknown) => {
        this.calls--;
        this.timed(kind, started, false);
        return this.fault(err);
      },
    );
  }

  private timed(kind: 'read' | 'work', started: bigint, ok: boolean): void {
    this.observe?.(kind, Number(process.hrtime.bigint() - started) / 1e9, ok);
  }

  /** enqueue puts a call in SQLite's queue; it answers once its group has committed (and, if durable, synced). */
  private enqueue<T>(
    kind: Queued['kind'],
    fn: (em: EntityManager) => Promise<T>,
    durable: boolean,
    metric: 'read' | 'work' = kind === 'read' ? 'read' : 'work',
  ): Promise<T> {
    this.calls++;
    return new Promise<T>((resolve, reject) => {
      this.waiting.push({
        kind,
        metric,
        fn,
        durable,
        resolve: resolve as (v: unknown) => void,
        reject,
      });
      this.pump();
    });
  }

  /**
   * pump schedules the next turn of SQLite's queue. It starts on the event loop's check phase, not
   * at once: a unit of work only waits on SQLite, so without that pause the queue would never hold
   * two calls, while the sessions whose events this turn of the loop serves queue theirs meanwhile
   * and the turn runs them as one group (one transaction: the pages they share, such as the
   * action log's last page, are written to the WAL once, and the file locks are taken once).
   */
  private pump(): void {
    if (this.pumping) return;
    if (this.waiting.length === 0) {
      for (const r of this.drained.splice(0)) r();
      return;
    }
    this.pumping = true;
    setImmediate(() => {
      const first = this.waiting[0]!;
      let n = 1;
      if (first.kind !== 'solo')
        while (n < this.waiting.length && n < GROUP && this.waiting[n]!.kind !== 'solo') n++;
      const units = this.waiting.splice(0, n);
      void (units.length === 1 ? this.runAlone(units[0]!) : this.runGroup(units)).finally(() => {
        this.pumping = false;
        this.pump();
      });
    });
  }

  /** runAlone runs one call as it would run without others: a read bare, a unit of work in its own transaction. */
  private async runAlone(u: Queued): Promise<void> {
    const started = process.hrtime.bigint();
    let hooks: (() => void)[] | undefined;
    let value: unknown;
    try {
      if (u.kind === 'solo') value = await (u.fn as () => Promise<unknown>)();
      else if (u.kind === 'read') value = await u.fn(this.source.manager);
      else {
        let tx: EntityManager | undefined;
        const run = () =>
          this.source.transaction(async (em) => {
            tx = em;
            dropHooks(em);
            return u.fn(em);
          });
        try {
          value = await run();
        } catch (err) {
          // Another process on the same SQLite file (the CLI beside a serving gateway) wrote
          // between this unit's first read and its first write, and SQLite refused that write at
          // once (see overtaken) and the transaction is rolled back. A unit of work is database
          // statements only, so it runs again, this time taking the write lock as it begins
          // (waiting up to the busy timeout for it), so that it cannot be overtaken again. Only
          // then: an immediate BEGIN would also make units that only read wait for, and fail on,
          // a lock that reads need not wait for.
          if (!this.immediate || !overtaken(err)) throw err;
          this.immediate.next = true;
          value = await run();
        }
        this.checkpointer?.committed();
        hooks = takeHooks(tx);
      }
    } catch (err) {
      this.fail(u, started, err);
      return;
    }
    this.answer([{ u, started, value, hooks }]);
  }

  /**
   * runGroup runs several calls in one transaction, each in a savepoint of its own: a call that
   * fails undoes only its own statements and hears its own error; the others answer once the
   * transaction has committed. If the transaction as a whole cannot go on (another process
   * committed first, SQLite rolled it back by itself, the COMMIT failed), it is rolled back and
   * each call runs again alone: a unit of work is database statements only, so it may.
   */
  private async runGroup(units: Queued[]): Promise<void> {
    const runner = this.source.driver.createQueryRunner('master');
    const db = this.sqlite!;
    const done: Done[] = [];
    const failed: { u: Queued; started: bigint; err: unknown }[] = [];
    let broken = false;
    try {
      await runner.startTransaction();
    } catch {
      broken = true;
    }
    for (const u of broken ? [] : units) {
      const started = process.hrtime.bigint();
      const ems = [runner.manager, this.source.manager];
      for (const em of ems) committed.set(em, []);
      try {
        db.exec('SAVEPOINT grouped');
        const value = await u.fn(u.kind === 'read' ? this.source.manager : runner.manager);
        db.exec('RELEASE grouped');
        done.push({ u, started, value, hooks: ems.flatMap((em) => takeHooks(em) ?? []) });
      } catch (err) {
        for (const em of ems) dropHooks(em);
        if (!db.inTransaction || overtaken(err)) {
          broken = true;
          break;
        }
        try {
          db.exec('ROLLBACK TO grouped; RELEASE grouped');
        } catch {
          broken = true;
          break;
        }
        failed.push({ u, started, err });
      }
    }
    if (!broken) {
      try {
        await runner.commitTransaction();
      } catch {
        broken = true;
      }
    }
    if (broken) {
      try {
        if (db.inTransaction) db.exec('ROLLBACK');
      } catch {
        // Nothing to roll back any more: each call runs alone below either way.
      }
      // TypeORM's runner keeps its own idea of the transaction; it is over.
      Object.assign(runner, { isTransactionActive: false, transactionDepth: 0 });
      for (const u of units) await this.runAlone(u);
      return;
    }
    for (const d of done) if (d.u.kind === 'work') this.checkpointer?.committed();
    for (const f of failed) this.fail(f.u, f.started, f.err);
    this.answer(done);
  }

  /** answer hands committed calls their values: at once, or once the WAL is synced for durable ones. */
  private answer(done: Done[]): void {
    const later: Done[] = [];
    for (const d of done) {
      if (d.u.durable) later.push(d);
      else this.settle(d);
    }
    if (later.length === 0) return;
    // The hooks come after the sync: what they start (deleting a blob this commit stopped
    // referring to) must not outrun it.
    void this.walSync().then(
      () => later.forEach((d) => this.settle(d)),
      (err: unknown) => later.forEach((d) => this.fail(d.u, d.started, err)),
    );
  }

  private settle(d: Done): void {
    try {
      runHooks(d.hooks);
    } catch (err) {
      // The commit stands; the caller hears what went wrong after it, the other calls go on.
      this.fail(d.u, d.started, err);
      return;
    }
    this.calls--;
    this.timed(d.u.metric, d.started, true);
    d.u.resolve(d.value);
  }

  private fail(u: Queued, started: bigint, err: unknown): void {
    this.calls--;
    this.timed(u.metric, started, false);
    try {
      this.fault(err);
    } catch (classified) {
      u.reject(classified);
    }
  }

  /** fault rethrows a failed call, classified; the cause of an outage is logged, throttled. */
  private fault(err: unknown): never {
    const cause = databaseUnreachableCause(err);
    const held = cause && this.throttle.take(cause);
    if (held)
      this.log?.error('database unavailable', {
        cause,
        error: err instanceof Error ? err.message : String(err),
        ...(held.held ? { held_back: held.held } : {}),
      });
    throw classifyDatabaseError(err);
  }
}

/**
 * immediateBegin lets SQLite's next transaction (once) begin IMMEDIATE: TypeORM's better-sqlite3
 * driver has one query runner and writes its BEGIN itself, so that runner's statement is swapped.
 */
function immediateBegin(source: DataSource): { next: boolean } {
  const flag = { next: false };
  const runner = source.driver.createQueryRunner('master');
  const query = runner.query.bind(runner) as (sql: string, ...rest: unknown[]) => Promise<unknown>;
  (runner as { query: typeof query }).query = (sql, ...rest) => {
    if (!flag.next || sql !== 'BEGIN TRANSACTION') return query(sql, ...rest);
    flag.next = false;
    return query('BEGIN IMMEDIATE TRANSACTION', ...rest);
  };
  return flag;
}

/**
 * overtaken tells whether SQLite refused a transaction's write because another process on the file
 * wrote first: it committed since this transaction's first read (SQLITE_BUSY_SNAPSHOT), or it holds
 * the write lock just then (SQLITE_BUSY: SQLite calls no busy handler for a transaction that has
 * read already, since two such waiting on each other would deadlock). No busy timeout waits either out.
 */
function overtaken(err: unknown): boolean {
  const code = driverCode(err);
  return code === 'SQLITE_BUSY_SNAPSHOT' || code === 'SQLITE_BUSY';
}

/** driverCode is the database driver's code of a failed statement (PostgreSQL's SQLSTATE, SQLite's name). */
function driverCode(err: unknown): string | undefined {
  const e = err as { code?: string; driverError?: { code?: string } };
  return e.driverError?.code ?? e.code;
}

/** SqliteHandle is the part of better-sqlite3's connection the gateway sets pragmas on. */
interface SqliteHandle {
  readonly open: boolean;
  readonly inTransaction: boolean;
  pragma(source: string): unknown;
  exec(source: string): unknown;
}

/** PgPoolCounts is what node-postgres's Pool tells about its connections. */
interface PgPoolCounts {
  totalCount: number;
  idleCount: number;
  waitingCount: number;
  options?: { max?: number };
}

/** isUniqueViolation tells whether a failed statement broke a unique index (a race two checks lost). */
export function isUniqueViolation(err: unknown): boolean {
  const code = driverCode(err);
  return code === '23505' || code === 'SQLITE_CONSTRAINT_UNIQUE' || code === 'SQLITE_CONSTRAINT_PRIMARYKEY';
}

/**
 * cannotOpen says why the database did not open, naming the setting to fix and never the
 * password of a database URL: the operator's first start should not need a stack trace.
 */
function cannotOpen(config: Config, err: unknown): string {
  const e = err as { code?: string; message?: string; hostname?: string };
  if (!config.database.url) {
    return `setting data_dir (SVC_DATA_DIR): cannot open the SQLite database in ${config.data_dir}: ${e.message ?? String(err)}`;
  }
  let shown = config.database.url;
  let database = '';
  try {
    const u = new URL(config.database.url);
    if (u.password) u.password = '***';
    shown = u.toString();
    database = decodeURIComponent(u.pathname.slice(1));
  } catch {
    shown = 'the URL given';
  }
  const why =
    e.code === 'ECONNREFUSED'
      ? 'nothing answers there (is PostgreSQL running, on that host and port?)'
      : e.code === 'ENOTFOUND' || e.code === 'EAI_AGAIN'
        ? `host ${e.hostname ?? ''} not found`.replace('  ', ' ')
        : e.code === '3D000'
          ? `database "${database}" does not exist (create it: createdb ${database || '<name>'})`
          : e.code === '28P01' || e.code === '28000'
            ? `the server refused the login: ${e.message ?? ''}`
            : (e.message ?? String(err));
  return `setting database.url (SVC_DATABASE_URL): cannot connect to ${shown}: ${why}`;
}
