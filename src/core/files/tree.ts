/**
 * Tree changes that conflict are serialized by the database, on every instance (DESIGN.md
 * "Scale-out"; issue 11). Every change of the namespace (create, replace, move, copy, delete,
 * upload end, a WebDAV lock-null file) runs in `change()`: one unit of work that first takes
 * path-keyed locks, then reads the rows it decides on, then writes.
 *
 * The locks are hierarchical: a change takes an exclusive lock on each path it changes and a
 * shared lock on each ancestor of those paths (a copy's source, which it only reads, is shared
 * too). So two changes conflict exactly when one changes a path the other changes, or one changes
 * a folder above the other's path: a folder rename and an upload end inside it, two renames of one
 * source, two creates of one name. Conflicting changes run one after the other; the second then
 * reads what the first committed (PostgreSQL's READ COMMITTED takes a new snapshot per statement,
 * and every read here comes after the locks) and answers as if it had come later: `not-found`,
 * `destination-exists`, `destination-parent-does-not-exist`. Changes of unrelated paths (siblings,
 * different folders) share at most ancestor locks, which are shared, and run at once.
 *
 * Mechanism: PostgreSQL transaction-scoped advisory locks on a 64-bit hash of the path, all taken
 * in one statement in key order, so two changes never wait on each other in a cycle. Blob locks
 * (blobs.ts) come after tree locks in every unit of work and no unit takes tree locks after blob
 * locks, so the two key spaces cannot deadlock each other either. A hash collision only makes two
 * unrelated paths wait for each other. Should PostgreSQL still report a deadlock or a serialization
 * failure, the unit of work is run again (a few times). SQLite runs one unit of work at a time
 * (db/database.ts), which serializes every change already.
 *
 * Invariants after any change: every row's parent folder exists (the root is synthetic), no two
 * rows share a path (the unique index; a violation that slips past is `destination-exists`, never
 * a 500), and every blob a row refers to exists (blobs.ts deletes only blobs nothing refers to).
 */
import type { EntityManager } from 'typeorm';
import { isUniqueViolation } from '../../db/database.ts';
import type { CoreContext } from '../context.ts';
import { GatewayError } from '../errors.ts';
import { ancestorsOf } from '../paths.ts';

/** TreeLocks names the paths a change writes (exclusive) and only reads (shared). */
export interface TreeLocks {
  /** paths created, replaced, moved, deleted or whose content changes */
  changes: string[];
  /** paths read as a whole, such as a copy's source */
  reads?: string[];
}

// Deadlocks and serialization failures: PostgreSQL aborted the transaction, it may run again.
const RETRYABLE = new Set(['40P01', '40001']);
const ATTEMPTS = 4;

/**
 * lockTree takes the locks of `locks` until the unit of work `em` ends (PostgreSQL; nothing on
 * SQLite). Call it first in the unit of work, before reading the rows the change depends on.
 */
export async function lockTree(em: EntityManager, locks: TreeLocks): Promise<void> {
  if (em.connection.driver.options.type !== 'postgres') return;
  const mode = new Map<string, boolean>();
  const want = (path: string, exclusive: boolean) => {
    if (path === '') return; // the root is never changed: everything would share its lock
    mode.set(path, exclusive || (mode.get(path) ?? false));
  };
  for (const p of locks.changes) for (const a of ancestorsOf(p)) want(a, a === p);
  for (const p of locks.reads ?? []) for (const a of ancestorsOf(p)) want(a, false);
  if (mode.size === 0) return;
  const paths = [...mode.keys()];
  // Key order, not path order: equal keys (a collision) then take one lock, in the strongest mode.
  // OFFSET 0 keeps the ordered subquery from being flattened, so the locks are taken in its order.
  await em.query(
    `SELECT CASE WHEN x THEN pg_advisory_xact_lock(k) ELSE pg_advisory_xact_lock_shared(k) END
       FROM (SELECT hashtextextended('tree:' || p, 0) AS k, bool_or(x) AS x
               FROM unnest($1::text[], $2::boolean[]) AS t(p, x)
              GROUP BY 1 ORDER BY 1 OFFSET 0) ordered`,
    [paths, paths.map((p) => mode.get(p)!)],
  );
}

/**
 * changeTree runs `fn` as one unit of work holding the tree locks of `locks`. A deadlock or
 * serialization failure runs it again; a unique violation that got past the checks (a row of that
 * path appeared) is `destination-exists`.
 */
export async function changeTree<T>(
  ctx: CoreContext,
  locks: TreeLocks,
  fn: (em: EntityManager) => Promise<T>,
): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await ctx.db.work(async (em) => {
        await lockTree(em, locks);
        return fn(em);
      });
    } catch (err) {
      const code =
        (err as { driverError?: { code?: string }; code?: string }).driverError?.code ??
        (err as { code?: string }).code;
      if (code && RETRYABLE.has(code) && attempt < ATTEMPTS) continue;
      if (isUniqueViolation(err))
        throw new GatewayError('processing-failure/destination-exists', 'The destination already exists');
      throw err;
    }
  }
}
