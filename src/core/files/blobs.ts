/**
 * The life of a blob after its bytes are written, in one place: who may still need it (leases),
 * when nobody wants it any more (garbage), and deleting it (reclaim). Issue 19 item 2: space comes
 * back as soon as no reader holds a blob, not after a fixed delay.
 *
 * Garbage. A blob that a commit stops referring to (a file deleted or overwritten, a part
 * replaced, an upload dropped) is queued in blob_garbage in that commit's unit of work. So is a new
 * blob before its bytes are written (`create`): the commit that points a row at it takes the mark
 * away (`settle`), and a blob whose writer crashed between its put and its commit stays garbage
 * and is collected. Right after a unit of work that queued garbage commits, the blobs are
 * reclaimed in the background: deleted when no row refers to them and no live lease holds them.
 *
 * Leases. Every read of a blob (a download on any protocol, a copy or append source inside the
 * core) holds a lease, unless the store holds what it opened (the local store's open descriptor,
 * `heldOnOpen`): a download there reads its file row, opens the blob, and reads the row again
 * only when the blob was reclaimed in between (openHeld), writing nothing. A lease is a row in
 * blob_leases, inserted in the unit of work that resolves the file (or next to it), deleted when
 * the stream closes. The release of the last lease of a garbage blob reclaims it. Leases are
 * rows because several instances share one database (DESIGN.md "Scale-out"): a reader on another
 * instance keeps its blob. A lease expires after LEASE_TTL_MS unless its instance renews it (every
 * live lease of the instance in one statement a minute), so an instance that died holds nothing
 * for longer than that; the minute's collection then takes what such leases held. On PostgreSQL
 * the table is UNLOGGED (no WAL flush per download).
 *
 * Races (PostgreSQL's READ COMMITTED; SQLite runs one unit of work at a time). A reader takes a
 * shared advisory lock on the blob, then checks that the blob is still wanted (its file row still
 * names it, or for a blob named directly, some row or its garbage mark is still there), then
 * inserts its lease and commits. The collector takes the same lock exclusively before it looks for
 * leases. So either the collector comes second and sees the lease, or the reader comes second and
 * sees the blob gone (and re-reads the file row, or answers file-not-found). An advisory lock
 * writes no row, so this costs no WAL flush (a FOR SHARE row lock would, at every download).
 */
import { randomBytes, randomUUID } from 'node:crypto';
import type { Readable } from 'node:stream';
import { In, LessThan, type DataSource, type EntityManager } from 'typeorm';
import { afterCommit } from '../../db/database.ts';
import { insideMarked, kindOf, sql } from '../../db/sql.ts';
import { BlobGarbageEntity, BlobLeaseEntity, FileEntity } from '../../db/entities.ts';
import type { CoreContext } from '../context.ts';
import { GatewayError } from '../errors.ts';
import type { BlobId, BlobStore, ByteRange } from './blobstore.ts';
import { OWNER, type TempOwners } from './staging.ts';
import { newBlobId } from './transfers.ts';

/** LEASE_TTL_MS is how long a lease holds its blob unless its instance renews it. */
export const LEASE_TTL_MS = 5 * 60 * 1000;
/** LEASE_RENEW_MS is how often an instance renews the leases it holds. */
export const LEASE_RENEW_MS = 60 * 1000;
/** URL_LEASE is the instance of the leases that keep blobs for signed download URLs. */
const URL_LEASE = 'signed-url';
// How many garbage blobs one collection looks at, and how many ids go in one statement.
const BATCH = 500;
/** PRESSURE_TTL_MS is how long one look at the store's free space answers underPressure. */
const PRESSURE_TTL_MS = 1000;

/**
 * exists runs `SELECT 1 WHERE …` for one blob id, each `?` of `condition` being it: the checks of
 * reclaim and open, one statement each instead of one query-builder call per table (issue 13).
 */
async function exists(em: EntityManager, condition: string, blobId: BlobId): Promise<boolean> {
  const n = condition.split('?').length - 1;
  return (await sql(em, `SELECT 1 WHERE ${condition}`, Array(n).fill(blobId))).length > 0;
}
/** REFERENCED: a file, an upload part, an upload's kept bytes or a pending version refers to the blob. */
const REFERENCED =
  'EXISTS (SELECT 1 FROM files WHERE blob_id = ?) OR EXISTS (SELECT 1 FROM upload_parts WHERE blob_id = ?) ' +
  'OR EXISTS (SELECT 1 FROM uploads WHERE restart_blob_id = ?) ' +
  'OR EXISTS (SELECT 1 FROM pending_versions WHERE blob_id = ?)';

// A new blob's record: its garbage mark (reclaimed if no commit settles it) and its writer's
// lease, made together and taken away together by the commit (settle). On PostgreSQL each pair is
// one statement, a round trip each way fewer for every upload.
const MARK_NEW = 'INSERT INTO blob_garbage (blob_id, since) VALUES (?, ?)';
const INSERT_LEASE = 'INSERT INTO blob_leases (id, blob_id, instance, expires_at) VALUES (?, ?, ?, ?)';
const UNMARK = 'DELETE FROM blob_garbage WHERE blob_id = ?';
const DROP_LEASE = 'DELETE FROM blob_leases WHERE id = ?';

/**
 * leaseId is a new lease's id, 32 hex digits as its column holds: randomUUID's, without dashes.
 * randomUUID draws from a buffered pool, where randomBytes asked the system's generator on every
 * upload and download (6 µs warm, tens on a busy event loop).
 */
const leaseId = () => randomUUID().replaceAll('-', '');

/** Lease is one hold on a blob, released once. */
export interface Lease {
  readonly id: string;
  readonly blobId: BlobId;
}

/** NewBlob is a blob id recorded as pending garbage, held by its writer's lease until the commit. */
export type NewBlob = Lease;

// The Blobs of each database, so markGarbage (called inside any unit of work) can reach them.
const byDatabase = new WeakMap<DataSource, Blobs>();

/**
 * BULK is how many blobs one unit of work may mark with a lock each; more are marked under the
 * lock on all garbage (lockAllGarbage). PostgreSQL keeps every advisory lock of a transaction in a
 * shared table of about 64 per connection: deleting a folder of 20,000 files took one per blob and
 * failed with "out of shared memory", deleting nothing.
 */
const BULK = 1000;

/**
 * markGarbage queues blobs as no longer wanted, in the caller's unit of work; once it commits they
 * are reclaimed unless a row still refers to them or a lease holds them.
 */
export async function markGarbage(em: EntityManager, blobIds: (string | null)[]): Promise<void> {
  const ids = [...new Set(blobIds.filter((b): b is string => !!b))];
  if (ids.length === 0) return;
  // Under the collector's lock: a collector that found this blob still referenced (by the row this
  // unit of work drops) and dropped its mark must commit before the mark is looked for here.
  if (ids.length > BULK) await lockAllGarbage(em, true);
  else await lockBlobs(em, ids, true);
  const since = Date.now();
  for (const id of ids)
    await sql(
      em,
      'INSERT INTO blob_garbage (blob_id, since) VALUES (?, ?) ON CONFLICT (blob_id) DO NOTHING',
      [id, since],
    );
  const blobs = byDatabase.get(em.connection);
  if (blobs) afterCommit(em, () => blobs.reclaimSoon(ids));
}

/**
 * markGarbageInside marks, in the caller's unit of work, the blobs of every file strictly inside
 * `folder` (whose rows it is about to delete) as garbage, inside the database: a folder of any
 * size, never its blob ids in memory. Once it commits they are reclaimed in batches (reclaimMarked).
 */
export async function markGarbageInside(em: EntityManager, folder: string): Promise<void> {
  await lockAllGarbage(em, true);
  const since = Date.now();
  const [test, bounds] = insideMarked(em, 'path', folder);
  await sql(
    em,
    'INSERT INTO blob_garbage (blob_id, since) SELECT DISTINCT blob_id, CAST(? AS BIGINT) FROM files ' +
      `WHERE ${test} AND blob_id IS NOT NULL ON CONFLICT (blob_id) DO NOTHING`,
    [since, ...bounds],
  );
  const blobs = byDatabase.get(em.connection);
  if (blobs) afterCommit(em, () => blobs.reclaimMarked(since));
}

/**
 * lockBlobs takes PostgreSQL's advisory locks on blobs until the unit of work ends: shared for a
 * reader, exclusive for the collector and for marking garbage (SQLite runs one unit of work at a
 * time: nothing to do).
 */
async function lockBlobs(em: EntityManager, blobIds: BlobId[], exclusive: boolean): Promise<void> {
  if (em.connection.driver.options.type !== 'postgres') return;
  const fn = exclusive ? 'pg_advisory_xact_lock' : 'pg_advisory_xact_lock_shared';
  // In one order (the array's, sorted), so two units of work locking several blobs do not deadlock.
  await em.query(`SELECT ${fn}(hashtextextended(b, 0)) FROM unnest($1::text[]) AS b`, [[...blobIds].sort()]);
}

/**
 * lockAllGarbage takes PostgreSQL's advisory lock on all garbage until the unit of work ends:
 * exclusive to mark many blobs at once, shared by the collector for each blob it looks at (after
 * that blob's own lock, which a marking unit of work may hold already, so the two never wait on
 * each other in a circle). Either the marking waits for every collector that dropped a mark to
 * commit, or the collectors wait for the marking; as a blob's own lock does for one.
 */
async function lockAllGarbage(em: EntityManager, exclusive: boolean): Promise<void> {
  if (em.connection.driver.options.type !== 'postgres') return;
  const fn = exclusive ? 'pg_advisory_xact_lock' : 'pg_advisory_xact_lock_shared';
  await em.query(`SELECT ${fn}(hashtextextended('blob_garbage', 0))`);
}

/** Blobs tracks this instance's leases and reclaims garbage blobs. */
export class Blobs {
  /**
   * instance names this core in the lease rows it writes: the process's OWNER (so a sweep can tell
   * whether the process still runs), then a name of its own (tests run several cores in one process).
   */
  readonly instance = `${OWNER}.${randomBytes(4).toString('hex')}`;
  private readonly live = new Map<string, Lease>();
  private renewal: NodeJS.Timeout | null = null;
  private readonly running = new Set<Promise<unknown>>();
  /** the reclaims due when download URLs expire */
  private readonly urlTimers = new Set<NodeJS.Timeout>();
  /** set once stop is called: the background work that loops ends early */
  private stopping = false;
  /** the last answer of underPressure, and when it was found */
  private pressure: { at: number; under: boolean } | null = null;

  constructor(
    private readonly ctx: CoreContext,
    private readonly store: BlobStore,
  ) {
    byDatabase.set(ctx.db.source, this);
  }

  /** liveLeases counts the leases this instance holds now (for tests and diagnosis). */
  get liveLeases(): number {
    return this.live.size;
  }

  /**
   * lease inserts a lease on `blobId` in the caller's unit of work once `stillWanted` (run under the
   * blob's lock, see "Races") says the blob is still there, else returns null; it counts once the
   * unit of work commits.
   */
  async lease(em: EntityManager, blobId: BlobId, stillWanted: () => Promise<boolean>): Promise<Lease | null> {
    await lockBlobs(em, [blobId], false);
    if (!(await stillWanted())) return null;
    return this.insertLease(em, blobId);
  }

  /** insertLease leases `blobId`, with `markNew` also marking it garbage until a commit settles it (create). */
  private async insertLease(em: EntityManager, blobId: BlobId, markNew = false): Promise<Lease> {
    const lease: Lease = { id: leaseId(), blobId };
    const values = [lease.id, blobId, this.instance, Date.now() + LEASE_TTL_MS];
    if (!markNew) await sql(em, INSERT_LEASE, values);
    else if (kindOf(em) === 'postgres')
      await sql(em, `WITH marked AS (${MARK_NEW}) ${INSERT_LEASE}`, [blobId, Date.now(), ...values]);
    else {
      await sql(em, MARK_NEW, [blobId, Date.now()]);
      await sql(em, INSERT_LEASE, values);
    }
    afterCommit(em, () => this.hold(lease));
    return lease;
  }

  /**
   * holdForUrl keeps blob `blobId` for a signed download URL until `until`, when the URL expires:
   * a file deleted or replaced after its URL was handed out still downloads until then (issue 12).
   * The lease is not renewed; under disk pressure it does not hold the blob (see reclaim). Returns
   * false when the blob is gone already (the file changed since it was resolved).
   */
  async holdForUrl(blobId: BlobId, until: Date): Promise<boolean> {
    const held = await this.ctx.db.work(async (em) => {
      await lockBlobs(em, [blobId], false);
      if (!(await em.existsBy(FileEntity, { blob_id: blobId }))) return false;
      await em.insert(BlobLeaseEntity, {
        id: leaseId(),
        blob_id: blobId,
        instance: URL_LEASE,
        expires_at: until,
      });
      return true;
    });
    // Nobody releases it: once it expires, the blob goes if it became garbage meanwhile.
    if (held) {
      const timer = setTimeout(
        () => {
          this.urlTimers.delete(timer);
          this.reclaimSoon([blobId]);
        },
        until.getTime() - Date.now() + 1000,
      );
      timer.unref();
      this.urlTimers.add(timer);
    }
    return held;
  }

  /**
   * dropDeadLeases deletes the leases of instances `owners` knows to be dead (killed on this host:
   * their pid is gone), so what they held is collected at once rather than after LEASE_TTL_MS.
   */
  async dropDeadLeases(owners: TempOwners): Promise<Set<string>> {
    const instances = await this.ctx.db.read((em) =>
      em
        .createQueryBuilder(BlobLeaseEntity, 'l')
        .select('DISTINCT l.instance', 'instance')
        .getRawMany<{ instance: string }>(),
    );
    const dead = new Set<string>();
    const gone: string[] = [];
    for (const { instance } of instances) {
      const owner = instance.split('.')[0]!;
      if (!(await owners.dead(owner, false))) continue;
      dead.add(owner);
      gone.push(instance);
    }
    if (gone.length) await this.ctx.db.work((em) => em.delete(BlobLeaseEntity, { instance: In(gone) }));
    return dead;
  }

  /**
   * open leases blob `blobId`, named directly (a signed download URL, the kept bytes of an append,
   * an upload's parts and kept bytes at its end, a pending version's kept bytes), and opens it; the lease goes when the stream closes. A blob that was collected is
   * file-not-found.
   */
  async open(blobId: BlobId, opts: { range?: ByteRange; signal?: AbortSignal } = {}): Promise<Readable> {
    const lease = await this.ctx.db.work((em) =>
      this.lease(em, blobId, () =>
        exists(em, `${REFERENCED} OR EXISTS (SELECT 1 FROM blob_garbage WHERE blob_id = ?)`, blobId),
      ),
    );
    if (!lease) throw new GatewayError('not-found/file-not-found', 'This file no longer exists');
    return this.opened(lease, opts);
  }

  /** heldOnOpen tells whether an opened blob holds its bytes by itself (no lease needed to read it). */
  get heldOnOpen(): boolean {
    return this.store.heldOnOpen === true;
  }

  /**
   * openHeld opens blob `blobId`, named by a file row just read, on a store that holds what it
   * opened (heldOnOpen): no lease row, no write. Null when the blob is gone: the row was replaced
   * and its old blob reclaimed between the read and the open, so the caller reads the row again.
   */
  async openHeld(
    blobId: BlobId,
    opts: { range?: ByteRange; signal?: AbortSignal } = {},
  ): Promise<Readable | null> {
    try {
      return await this.store.get(blobId, opts);
    } catch (err) {
      if ((err as { code?: string }).code === 'ENOENT') return null;
      throw err;
    }
  }

  /** opened opens the leased blob and releases the lease when the stream closes (or fails to open). */
  async opened(lease: Lease, opts: { range?: ByteRange; signal?: AbortSignal } = {}): Promise<Readable> {
    let stream: Readable;
    try {
      stream = await this.store.get(lease.blobId, opts);
    } catch (err) {
      this.release(lease);
      if ((err as { code?: string }).code === 'ENOENT')
        throw new GatewayError('not-found/file-not-found', 'This file no longer exists');
      throw err;
    }
    stream.once('close', () => this.release(lease));
    return stream;
  }

  /**
   * create names a new blob and records it, before any byte is written, as garbage held by its
   * writer's lease: if the process dies before the commit, the lease expires and the blob is
   * collected. The commit calls settle(); a writer that gives up calls discard().
   */
  async create(): Promise<NewBlob> {
    const id = newBlobId();
    // Not synced on its own: the upload's commit, which settles it, syncs it. A power loss before
    // that commit may forget the record and leave the blob's file unreferenced (space, not data).
    return this.ctx.db.one((em) => this.insertLease(em, id, true), { durable: false });
  }

  /** settle, in the unit of work that makes a row refer to the new blob, takes its pending mark and lease away. */
  async settle(em: EntityManager, blob: NewBlob): Promise<void> {
    if (kindOf(em) === 'postgres')
      await sql(em, `WITH unmarked AS (${UNMARK}) ${DROP_LEASE}`, [blob.blobId, blob.id]);
    else {
      await sql(em, UNMARK, [blob.blobId]);
      await sql(em, DROP_LEASE, [blob.id]);
    }
    afterCommit(em, () => this.live.delete(blob.id));
  }

  /**
   * discard gives up a blob whose commit failed or never came: it is garbage again (unless a row
   * refers to it, as an upload part adopted as the file does) and is reclaimed when nothing holds it.
   */
  async discard(blobId: BlobId, pending?: NewBlob): Promise<void> {
    if (pending) this.live.delete(pending.id);
    await this.ctx.db.work(async (em) => {
      if (pending) await em.delete(BlobLeaseEntity, { id: pending.id });
      await markGarbage(em, [blobId]);
    });
  }

  /**
   * release ends a lease (once; a second call does nothing). When the blob is garbage and no other
   * live lease holds it, it is reclaimed now. A release that fails leaves a row that nobody renews:
   * it expires.
   */
  release(lease: Lease): void {
    if (!this.live.delete(lease.id)) return;
    // No unit of work: the delete commits on its own, then the look at the garbage mark (a
    // collector that saw the lease before the delete left the blob to this check).
    this.track(
      this.ctx.db
        .read(async (em) => {
          await em.delete(BlobLeaseEntity, { id: lease.id });
          return em.existsBy(BlobGarbageEntity, { blob_id: lease.blobId });
        })
        .then((garbage) => (garbage ? this.reclaim([lease.blobId]) : 0)),
    );
  }

  /** reclaimSoon reclaims blobs in the background, after the commit that made them garbage. */
  reclaimSoon(blobIds: BlobId[]): void {
    this.track(this.reclaim(blobIds));
  }

  /**
   * reclaimMarked reclaims in the background, BATCH at a time, the garbage marked at `since` that
   * no lease holds (markGarbageInside's): each batch's marks are taken, so the next finds the rest.
   * A stopping gateway stops after the batch under way; the marks left are collect's.
   */
  reclaimMarked(since: number): void {
    this.track(
      (async () => {
        while (!this.stopping) {
          const due = await this.ctx.db.read((em) =>
            sql<{ blob_id: string }>(
              em,
              'SELECT blob_id FROM blob_garbage g WHERE since = ? ' +
                'AND NOT EXISTS (SELECT 1 FROM blob_leases l WHERE l.blob_id = g.blob_id) LIMIT ?',
              [since, BATCH],
            ),
          );
          if (due.length === 0) return;
          await this.reclaim(due.map((g) => g.blob_id));
          if (due.length < BATCH) return;
        }
      })(),
    );
  }

  /**
   * reclaim deletes each blob that is garbage, referred to by no row and held by no live lease,
   * and returns how many it deleted. The check is a short unit of work per blob, the delete comes
   * after it; of two instances reclaiming one blob at once only the one that took its garbage row
   * deletes it.
   */
  async reclaim(blobIds: BlobId[]): Promise<number> {
    let deleted = 0;
    const pressure = blobIds.length > 0 && (await this.underPressure());
    for (const blobId of blobIds) {
      const unwanted = await this.ctx.db.work(async (em) => {
        await lockBlobs(em, [blobId], true);
        await lockAllGarbage(em, false);
        // Under disk pressure only readers hold a blob, not download URLs nobody may ever use.
        const held = await sql(
          em,
          'SELECT 1 FROM blob_leases WHERE blob_id = ? AND expires_at > ?' +
            (pressure ? ' AND instance <> ?' : ''),
          pressure ? [blobId, Date.now(), URL_LEASE] : [blobId, Date.now()],
        );
        if (held.length > 0) return false;
        const used = await exists(
          em,
          `${REFERENCED} OR EXISTS (SELECT 1 FROM uploads WHERE blob_id = ?)`,
          blobId,
        );
        // Of two reclaims of one blob only the one that took its mark deletes it.
        const taken = await sql(em, 'DELETE FROM blob_garbage WHERE blob_id = ? RETURNING blob_id', [blobId]);
        return !used && taken.length > 0;
      });
      if (unwanted) {
        await this.store.delete(blobId);
        deleted++;
      }
    }
    return deleted;
  }

  /**
   * underPressure tells whether the store's file system has less free space than
   * storage.reclaim_at_once_below_free_percent of its size (a store that cannot tell never is).
   */
  private async underPressure(): Promise<boolean> {
    // Asked after every upload that leaves garbage: one look at the disk serves a second of them.
    if (this.pressure && Date.now() - this.pressure.at < PRESSURE_TTL_MS) return this.pressure.under;
    const percent = this.ctx.config.storage.reclaim_at_once_below_free_percent;
    const space = await this.store.space?.().catch(() => null);
    const under = !!space && space.total > 0 && (space.free / space.total) * 100 < percent;
    this.pressure = { at: Date.now(), under };
    return under;
  }

  /**
   * collect is the safety net run every minute: it drops expired leases (of instances that died,
   * or releases that failed) and reclaims the garbage they held, and whatever a crash kept from
   * being reclaimed after its commit. Returns how many blobs it deleted.
   */
  async collect(): Promise<number> {
    const due = await this.ctx.db.work(async (em) => {
      await em.delete(BlobLeaseEntity, { expires_at: LessThan(new Date()) });
      return em
        .createQueryBuilder(BlobGarbageEntity, 'g')
        .select('g.blob_id', 'blob_id')
        .where('NOT EXISTS (SELECT 1 FROM blob_leases l WHERE l.blob_id = g.blob_id)')
        .orderBy('g.since', 'ASC')
        .limit(BATCH)
        .getRawMany<{ blob_id: string }>();
    });
    return this.reclaim(due.map((g) => g.blob_id));
  }

  /**
   * finishing runs the end of a cut upload (its bytes kept as a pending version, or given up) as
   * work stop waits for: a stopping gateway closes its database only after it.
   */
  finishing<T>(work: Promise<T>): Promise<T> {
    const p = work.catch(() => undefined).finally(() => this.running.delete(p));
    this.running.add(p);
    return work;
  }

  /** idle resolves once the releases and reclaims under way (and those they started) are done. */
  async idle(): Promise<void> {
    while (this.running.size) await Promise.allSettled([...this.running]);
  }

  /** stop ends the renewal and waits for the releases, reclaims and cut uploads' ends under way. */
  async stop(): Promise<void> {
    this.stopping = true;
    if (this.renewal) clearInterval(this.renewal);
    this.renewal = null;
    for (const t of this.urlTimers) clearTimeout(t);
    this.urlTimers.clear();
    await this.idle();
  }

  private hold(lease: Lease): void {
    this.live.set(lease.id, lease);
    if (this.renewal) return;
    this.renewal = setInterval(() => this.track(this.renew()), LEASE_RENEW_MS);
    this.renewal.unref();
  }

  /** renew pushes the expiry of every lease this instance holds, a few hundred ids a statement. */
  private async renew(): Promise<void> {
    const ids = [...this.live.keys()];
    if (ids.length === 0) {
      if (this.renewal) clearInterval(this.renewal);
      this.renewal = null;
      return;
    }
    const expires_at = new Date(Date.now() + LEASE_TTL_MS);
    for (let i = 0; i < ids.length; i += BATCH) {
      const chunk = ids.slice(i, i + BATCH);
      await this.ctx.db.work((em) => em.update(BlobLeaseEntity, { id: In(chunk) }, { expires_at }));
    }
  }

  private track(work: Promise<unknown>): void {
    const p = work
      .catch((err: unknown) => this.ctx.log.warn('blob reclaim failed', { error: String(err) }))
      .finally(() => this.running.delete(p));
    this.running.add(p);
  }
}
