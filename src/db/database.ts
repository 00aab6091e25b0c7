/**
 * The one data-access layer. Every read and unit of work of the core goes through `Database`.
 *
 * Why: TypeORM's better-sqlite3 driver shares one connection between all callers, so a second
 * transaction started while another is open silently becomes a SAVEPOINT inside it, and the
 * outer ROLLBACK erases writes the inner caller believed committed (typeorm/typeorm#307, #10364;
 * research/libraries.md §4). On SQLite every call here therefore waits its turn in a FIFO queue.
 * PostgreSQL gets one pooled connection per transaction, and the same API.
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

/** DatabaseKind tells which server answers: the embedded SQLite file or PostgreSQL. */
export type DatabaseKind = 'sqlite' | 'postgres';

/**
 * Database serializes units of work on SQLite and runs them in transactions on both databases. A
 * database that does not answer fails every call with `service-unavailable/database-unavailable`
 * (a full disk under SQLite with `insufficient-storage`), logged at most once per cause every few
 * seconds; the pool reconnects by itself when the database is back, so no restart is needed.
 */
export class Database {
  private queue: Promise<unknown> = Promise.resolve();
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
  async work<T>(fn: (em: EntityManager) => Promise<T>, opts: { durable?: boolean } = {}): Promise<T> {
    const lazy = opts.durable === false && this.durability === 'fsync';
    // SQLite at `fsync`: on disk before anyone hears of it, synced outside the queue, so the next
    // unit of work runs while this one's sync is under way (and may share it). The hooks come
    // after the sync: what they start (deleting a blob this commit stopped referring to) must not
    // outrun it. Otherwise they run before the next unit of work, as the commit's own tail.
    const sync = this.kind === 'sqlite' && this.durability === 'fsync' && !lazy;
    let hooks: (() => void)[] | undefined;
    const result = await this.serialized('work', async () => {
      let tx: EntityManager | undefined;
      const run = () =>
        this.source.transaction(async (em) => {
          tx = em;
          if (lazy && this.kind === 'postgres') await em.query('SET LOCAL synchronous_commit TO OFF');
          return fn(em);
        });
      let value: T;
      try {
        value = await run();
      } catch (err) {
        // Another process on the same SQLite file (the CLI beside a serving gateway) committed
        // between this unit's first read and its first write: SQLite refuses that write at once
        // (SQLITE_BUSY_SNAPSHOT, which no busy timeout waits out) and the transaction is rolled
        // back. A unit of work is database statements only, so it runs again, this time taking
        // the write lock as it begins (waiting up to the busy timeout for it), so that it cannot
        // be overtaken again. Only then: an immediate BEGIN would also make units that only read
        // wait for, and fail on, a lock that reads need not wait for.
        if (!this.immediate || driverCode(err) !== 'SQLITE_BUSY_SNAPSHOT') throw err;
        this.immediate.next = true;
        value = await run();
      }
      this.checkpointer?.committed();
      hooks = tx && committed.get(tx);
      if (hooks) committed.delete(tx!);
      if (!sync) runHooks(hooks);
      return value;
    });
    if (sync) {
      try {
        await this.walSync();
      } catch (err) {
        this.fault(err);
      }
      runHooks(hooks);
    }
    return result;
  }

  /**
   * read runs fn without a transaction (reads, or statements that each stand alone and commit on
   * their own, such as a lease's release); on SQLite it still waits its turn, so it never sees
   * uncommitted rows.
   */
  read<T>(fn: (em: EntityManager) => Promise<T>): Promise<T> {
    return this.serialized('read', () => fn(this.source.manager));
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
    await this.queue.catch(() => undefined);
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

  private serialized<T>(kind: 'read' | 'work', fn: () => Promise<T>): Promise<T> {
    this.calls++;
    const guarded = () => {
      const started = process.hrtime.bigint();
      const timed = (ok: boolean) =>
        this.observe?.(kind, Number(process.hrtime.bigint() - started) / 1e9, ok);
      return fn().then(
        (v) => {
          timed(true);
          return v;
        },
        (err: unknown) => {
          timed(false);
          return this.fault(err);
        },
      );
    };
    const done = <V>(p: Promise<V>) => p.finally(() => this.calls--);
    if (this.kind !== 'sqlite') return done(guarded());
    const run = this.queue.then(guarded, guarded);
    // The queue only orders; a failure belongs to its caller, not to the next unit of work.
    this.queue = run.catch(() => undefined);
    return done(run);
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

/** driverCode is the database driver's code of a failed statement (PostgreSQL's SQLSTATE, SQLite's name). */
function driverCode(err: unknown): string | undefined {
  const e = err as { code?: string; driverError?: { code?: string } };
  return e.driverError?.code ?? e.code;
}

/** SqliteHandle is the part of better-sqlite3's connection the gateway sets pragmas on. */
interface SqliteHandle {
  readonly open: boolean;
  pragma(source: string): unknown;
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
