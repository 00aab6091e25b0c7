/**
 * WebDAV locks (RFC 4918 §6–§7, class 2), kept in the database by site path so every instance
 * honours the same locks. A lock covers its root and, with depth infinity, everything below it.
 * Exclusive locks conflict with every other lock on a covered path; shared locks only with
 * exclusive ones. The protocol side (If header, lock-token submission) is the adapter's; this
 * module answers which locks exist and creates, refreshes and removes them.
 */
import { randomUUID } from 'node:crypto';
import { LessThan, type EntityManager } from 'typeorm';
import { DavLockEntity, type DavLockRow } from '../../db/entities.ts';
import { inside, marks, rowOf, sql } from '../../db/sql.ts';
import { requireCapability } from '../access/rights.ts';
import type { CoreContext } from '../context.ts';
import { GatewayError, LockedError } from '../errors.ts';
import { ancestorsOf, isInside } from '../paths.ts';
import { isSiteAdmin, type Principal } from '../principal.ts';
import type { SessionScope } from './scope.ts';

/** MAX_LOCK_SECONDS caps a lock's timeout; `Infinite` gets this too (RFC 4918 §10.7 lets the server choose). */
export const MAX_LOCK_SECONDS = 24 * 3600;

/** DavLock is a live lock as the session sees it (paths relative to its root). */
export interface DavLock {
  token: string;
  /** the lock root, in the session's paths ('' when the lock is on or above its root) */
  path: string;
  depth: '0' | 'infinity';
  scope: 'exclusive' | 'shared';
  /** the client's DAV:owner element as XML, '' when none */
  owner: string;
  userId: number | null;
  timeoutSeconds: number;
  expiresAt: Date;
}

/** LockRequest is what a LOCK asks for. */
export interface LockRequest {
  scope: 'exclusive' | 'shared';
  depth: '0' | 'infinity';
  owner: string;
  timeoutSeconds: number;
}

const covers = (row: DavLockRow, site: string) =>
  row.path === site || (row.depth === 'infinity' && isInside(site, row.path));

/**
 * liveLocks reads the unexpired locks that cover `site` (on it, or depth infinity on an ancestor),
 * and with `descendants` those on paths below it, in one hand-written statement (db/sql.ts): every
 * write on every front end asks, and almost always hears none.
 */
async function liveLocks(em: EntityManager, site: string, descendants: boolean): Promise<DavLockRow[]> {
  const ancestors = ancestorsOf(site);
  const params: unknown[] = [];
  let where: string;
  // Every lock is on the root or below it. (The ancestors' values stayed in the parameters once
  // this clause dropped their marks: PROPFIND Depth 1 on a site admin's `/` answered 500.)
  if (descendants && site === '') where = '1 = 1';
  else {
    params.push(...ancestors);
    where = `path IN (${marks(ancestors.length)})`;
    if (descendants) {
      const prefix = `${site}/`;
      where += ' OR substr(path, 1, ?) = ?';
      params.push([...prefix].length, prefix);
    }
  }
  const rows = await sql<Record<string, unknown>>(
    em,
    'SELECT token, path, depth, scope, owner, user_id, timeout_seconds, created_at, expires_at ' +
      `FROM dav_locks WHERE expires_at > ? AND (${where})`,
    [Date.now(), ...params],
  );
  return rows
    .map((r) => rowOf(DavLockEntity, r))
    .filter((r) => covers(r, site) || (descendants && isInside(r.path, site)));
}

/** deleteLocksUnder removes the locks on `site` and below it (DELETE, MOVE source, overwritten destination). */
export async function deleteLocksUnder(em: EntityManager, site: string): Promise<void> {
  await em.delete(DavLockEntity, { path: site });
  if (site === '') await em.createQueryBuilder().delete().from(DavLockEntity).execute();
  else
    await em
      .createQueryBuilder()
      .delete()
      .from(DavLockEntity)
      .where(...inside(em, 'path', site))
      .execute();
}

/**
 * requireUnlocked refuses a change of `site` (and with `descendants` of everything below it) that a
 * live WebDAV lock covers unless the request submitted that lock's token and the principal holds it
 * (RFC 4918 §7: a lock binds every writer; issue 11). Locks belong to the core, so FTP, SFTP and the
 * REST API, which cannot submit a token, are refused too. Run it inside the change's unit of work,
 * after its tree locks.
 */
export async function requireUnlocked(
  em: EntityManager,
  p: Principal,
  tokens: ReadonlySet<string>,
  site: string,
  opts: { descendants?: boolean; show: (site: string) => string },
): Promise<void> {
  const now = new Date();
  const live = await liveLocks(em, site, opts.descendants ?? false);
  if (live.length === 0) return;
  const me = p.user?.id ?? null;
  const roots = new Map<string, DavLockRow[]>();
  for (const l of live) roots.set(l.path, [...(roots.get(l.path) ?? []), l]);
  // Each locked root needs one of its tokens: the exclusive lock's, or any of its shared locks'.
  for (const [root, group] of roots) {
    if (group.some((l) => tokens.has(l.token) && l.user_id === me)) continue;
    const until = group.reduce((t, l) => (l.expires_at > t ? l.expires_at : t), now);
    throw new LockedError(opts.show(root), until);
  }
}

/** Locks creates, finds, refreshes and releases WebDAV locks. */
export class Locks {
  constructor(private readonly ctx: CoreContext) {}

  private view(session: SessionScope, row: DavLockRow): DavLock {
    return {
      token: row.token,
      path: isInside(row.path, session.root) ? session.visible(row.path) : '',
      depth: row.depth,
      scope: row.scope,
      owner: row.owner,
      userId: row.user_id,
      timeoutSeconds: row.timeout_seconds,
      expiresAt: row.expires_at,
    };
  }

  /** live reads the unexpired locks that cover `site`, and with `descendants` those below it. */
  private live(em: EntityManager, site: string, descendants: boolean): Promise<DavLockRow[]> {
    return liveLocks(em, site, descendants);
  }

  /**
   * affecting lists the live locks that cover `path` (on it, or depth infinity on an ancestor), and
   * with `descendants` the locks on paths below it (what a DELETE or MOVE of a folder touches).
   */
  async affecting(
    session: SessionScope,
    path: string,
    opts: { descendants?: boolean } = {},
  ): Promise<DavLock[]> {
    const site = session.site(path);
    const rows = await this.ctx.db.read((em) => this.live(em, site, opts.descendants ?? false));
    return rows.map((r) => this.view(session, r));
  }

  /**
   * lock creates a lock on `path` (which need not exist: the adapter makes the lock-null file).
   * It needs write permission; a conflicting lock is `processing-failure/file-locked`.
   */
  async lock(session: SessionScope, path: string, req: LockRequest): Promise<DavLock> {
    const site = session.site(path);
    const seconds = Math.max(1, Math.min(req.timeoutSeconds, MAX_LOCK_SECONDS));
    return this.ctx.db.work(async (em) => {
      // On PostgreSQL, instances take LOCKs one at a time (a transaction-scoped advisory lock), so
      // two conflicting LOCKs cannot both pass the check below. LOCK is rare; one key suffices.
      // SQLite's queue already runs one unit of work at a time.
      if (this.ctx.db.kind === 'postgres')
        await em.query(`SELECT pg_advisory_xact_lock(hashtext('svc-dav-locks'))`);
      await requireCapability(em, session.principal, 'write', site);
      await em.delete(DavLockEntity, { expires_at: LessThan(new Date()) });
      const existing = await this.live(em, site, req.depth === 'infinity');
      const conflict = existing.find((r) => r.scope === 'exclusive' || req.scope === 'exclusive');
      if (conflict)
        throw new GatewayError('processing-failure/file-locked', `/${session.visible(site)} is locked`);
      const now = new Date();
      const row: DavLockRow = {
        token: `urn:uuid:${randomUUID()}`,
        path: site,
        depth: req.depth,
        scope: req.scope,
        owner: req.owner,
        user_id: session.principal.user?.id ?? null,
        timeout_seconds: seconds,
        created_at: now,
        expires_at: new Date(now.getTime() + seconds * 1000),
      };
      await em.insert(DavLockEntity, row);
      return this.view(session, row);
    });
  }

  /** refresh restarts the timeout of the live lock `token` that covers `path`. */
  async refresh(
    session: SessionScope,
    path: string,
    token: string,
    timeoutSeconds: number,
  ): Promise<DavLock> {
    const site = session.site(path);
    const seconds = Math.max(1, Math.min(timeoutSeconds, MAX_LOCK_SECONDS));
    return this.ctx.db.work(async (em) => {
      const row = (await this.live(em, site, false)).find((r) => r.token === token);
      if (!row) throw new GatewayError('not-found/resource-not-found', 'No such lock on this resource');
      this.requireHolder(session, row);
      const expires_at = new Date(Date.now() + seconds * 1000);
      await em.update(DavLockEntity, { token }, { expires_at, timeout_seconds: seconds });
      return this.view(session, { ...row, expires_at, timeout_seconds: seconds });
    });
  }

  /** unlock removes the lock `token`, which must cover `path`; only its holder or a site admin may. */
  async unlock(session: SessionScope, path: string, token: string): Promise<void> {
    const site = session.site(path);
    await this.ctx.db.work(async (em) => {
      const row = (await this.live(em, site, false)).find((r) => r.token === token);
      if (!row) throw new GatewayError('not-found/resource-not-found', 'No such lock on this resource');
      this.requireHolder(session, row);
      await em.delete(DavLockEntity, { token });
    });
  }

  private requireHolder(session: SessionScope, row: DavLockRow): void {
    const p = session.principal;
    if (!isSiteAdmin(p) && (p.user?.id ?? null) !== row.user_id)
      throw new GatewayError('not-authorized/write-permission-required', 'This lock belongs to another user');
  }
}
