/**
 * Pending versions (issue 20): an upload cut off mid-way keeps what arrived, so its uploader can
 * resume it, and stays invisible to everyone else, so nobody reads a half-written file.
 *
 * A cut upload (FTP STOR/APPE whose data connection broke or was aborted, an SFTP file whose
 * client vanished before CLOSE, a WebDAV PUT whose body stopped) ends its write handle with
 * `suspend` instead of `abort`: the bytes that arrived, in order and without holes, are one blob
 * owned by a pending_versions row of (user, path). To that user the path reports the pending size
 * (stat and listings on every front end), and a write that starts at that size (FTP REST n + STOR,
 * APPE, SFTP OPEN without TRUNC then WRITE at n, WebDAV PUT with Content-Range) keeps the pending
 * bytes in front of the new ones. Its commit is the ordinary atomic commit of write.ts, which drops
 * the pending version in the same unit of work. A new upload of the path from offset 0 by the same
 * user drops it too. Other users see the file row only; each user has their own pending version,
 * and whichever upload completes last wins, as for any two writes.
 *
 * Checksums: the completed file's md5 and crc32 are computed over the bytes the final blob is made
 * of, kept bytes included, which are read back from the blob store (not sent again by the client).
 * No hash state is carried across the cut: nothing to keep consistent with the bytes across a
 * process restart or another instance, and the sums are right by construction.
 *
 * Rows live in the database, so a pending version survives a restart and is resumed on any
 * instance sharing the database; its blob is in the shared store. It expires after
 * `uploads.pending_hours`, refreshed by each cut; the minute's collection drops expired ones.
 */
import { randomBytes } from 'node:crypto';
import { LessThan, type EntityManager } from 'typeorm';
import { PendingVersionEntity, UserEntity, type PendingVersionRow } from '../../db/entities.ts';
import { rowOf, sql } from '../../db/sql.ts';
import { requireSiteAdmin } from '../access/guards.ts';
import type { CoreContext } from '../context.ts';
import type { Principal } from '../principal.ts';
import { parentOf } from '../paths.ts';
import { markGarbage } from './blobs.ts';
import type { Entry } from './namespace.ts';

export type { PendingVersionRow };

/** ownerOf is the user a principal's pending versions belong to (a site-wide key has none). */
export function ownerOf(principal: Principal): number | null {
  return principal.user?.id ?? null;
}

const PENDING_COLUMNS = 'id, user_id, path, parent, blob_id, size, interface, updated_at, expires_at';

/** pendingAt is `user`'s pending version of `site`, if any (expired ones no longer count). */
export async function pendingAt(
  em: EntityManager,
  user: number | null,
  site: string,
): Promise<PendingVersionRow | null> {
  if (user === null) return null;
  // Hand-written (db/sql.ts): every stat and upload asks, and almost always hears none.
  const [r] = await sql<Record<string, unknown>>(
    em,
    `SELECT ${PENDING_COLUMNS} FROM pending_versions WHERE user_id = ? AND path = ? AND expires_at > ?`,
    [user, site, Date.now()],
  );
  return r ? rowOf(PendingVersionEntity, r) : null;
}

/** pendingIn lists `user`'s live pending versions directly inside `folder`. */
export async function pendingIn(
  em: EntityManager,
  user: number | null,
  folder: string,
): Promise<PendingVersionRow[]> {
  if (user === null) return [];
  // Hand-written as pendingAt: every listing asks (a WebDAV client's PROPFIND of a small folder
  // spent about a twentieth of its time in the query builder here).
  const rows = await sql<Record<string, unknown>>(
    em,
    `SELECT ${PENDING_COLUMNS} FROM pending_versions WHERE user_id = ? AND parent = ? AND expires_at > ?`,
    [user, folder, Date.now()],
  );
  return rows.map((r) => rowOf(PendingVersionEntity, r));
}

/** dropPending deletes `user`'s pending version of `site`, in the caller's unit of work; its blob becomes garbage. */
export async function dropPending(em: EntityManager, user: number | null, site: string): Promise<void> {
  if (user === null) return;
  const dropped = await sql<{ blob_id: string }>(
    em,
    'DELETE FROM pending_versions WHERE user_id = ? AND path = ? RETURNING blob_id',
    [user, site],
  );
  if (dropped.length)
    await markGarbage(
      em,
      dropped.map((r) => r.blob_id),
    );
}

/**
 * recordPending makes blob `blobId` of `size` bytes `principal`'s pending version of `site`, in
 * the caller's unit of work (which also settles the blob), replacing the one before.
 */
export async function recordPending(
  ctx: CoreContext,
  em: EntityManager,
  principal: Principal,
  site: string,
  blobId: string,
  size: number,
): Promise<void> {
  const user = ownerOf(principal);
  if (user === null) throw new Error('recordPending without a user');
  await dropPending(em, user, site);
  const now = Date.now();
  await em.insert(PendingVersionEntity, {
    id: randomBytes(16).toString('hex'),
    user_id: user,
    path: site,
    parent: parentOf(site),
    blob_id: blobId,
    size,
    interface: principal.interface,
    updated_at: new Date(now),
    expires_at: new Date(now + ctx.config.uploads.pending_hours * 3600 * 1000),
  });
}

/** pendingEntry is how `user` sees a path with a pending version: its size and time, no checksums yet. */
export function pendingEntry(pending: PendingVersionRow, visiblePath: string): Entry {
  return {
    path: visiblePath,
    type: 'file',
    size: pending.size,
    mtime: pending.updated_at,
    crc32: null,
    md5: null,
  };
}

/** expirePending drops pending versions past their time (a hundred at a time); returns how many. */
export async function expirePending(ctx: CoreContext): Promise<number> {
  return ctx.db.work(async (em) => {
    const due = await em.find(PendingVersionEntity, {
      where: { expires_at: LessThan(new Date()) },
      take: 100,
    });
    if (due.length === 0) return 0;
    for (const row of due) await em.delete(PendingVersionEntity, { id: row.id });
    await markGarbage(
      em,
      due.map((r) => r.blob_id),
    );
    return due.length;
  });
}

/** pendingBytes is how many bytes `user`'s pending versions under `folder` ('' for all) hold. */
export async function pendingBytes(em: EntityManager, user: number | null, folder: string): Promise<number> {
  if (user === null) return 0;
  const qb = em
    .getRepository(PendingVersionEntity)
    .createQueryBuilder('p')
    .select('COALESCE(SUM(p.size), 0)', 'total')
    .where('p.user_id = :user', { user });
  if (folder !== '')
    qb.andWhere('substr(p.path, 1, :len) = :prefix', { len: [...folder].length + 1, prefix: `${folder}/` });
  const raw = await qb.getRawOne<{ total: string | number }>();
  return Number(raw?.total ?? 0);
}

/** PendingListing is one pending version as a site admin sees it. */
export interface PendingListing {
  username: string;
  /** the site path */
  path: string;
  size: number;
  interface: string;
  updated_at: Date;
  expires_at: Date;
}

/** listPending lists every live pending version for a site admin, oldest first (at most `limit`). */
export async function listPending(ctx: CoreContext, p: Principal, limit = 1000): Promise<PendingListing[]> {
  requireSiteAdmin(p);
  return ctx.db.read(async (em) => {
    const rows = await em.find(PendingVersionEntity, { order: { updated_at: 'ASC' }, take: limit });
    const users = new Map<number, string>();
    const out: PendingListing[] = [];
    for (const r of rows) {
      if (r.expires_at.getTime() <= Date.now()) continue;
      if (!users.has(r.user_id))
        users.set(
          r.user_id,
          (await em.findOneBy(UserEntity, { id: r.user_id }))?.username ?? `#${r.user_id}`,
        );
      out.push({
        username: users.get(r.user_id)!,
        path: r.path,
        size: r.size,
        interface: r.interface,
        updated_at: r.updated_at,
        expires_at: r.expires_at,
      });
    }
    return out;
  });
}
