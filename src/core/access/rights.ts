/**
 * Permission evaluation (DESIGN.md "Permissions"): a permission on a folder applies to it and
 * everything below; a user's rights on a path are the union of their own and their groups'
 * permissions on the path and its ancestors. Site admins and site-wide keys pass every check.
 */
import type { EntityManager } from 'typeorm';
import {
  MembershipEntity,
  PermissionEntity,
  type PermissionLevel,
  type PermissionRow,
} from '../../db/entities.ts';
import { marks, rowOf, sql } from '../../db/sql.ts';
import { GatewayError, type ErrorType } from '../errors.ts';
import { ancestorsOf } from '../paths.ts';
import { isSiteAdmin, type Principal } from '../principal.ts';

/** Capability is one thing a user may do on a path. */
export type Capability = 'list' | 'read' | 'write' | 'delete' | 'admin';

/** levelCapabilities says what each permission level allows. */
export const levelCapabilities: Record<PermissionLevel, readonly Capability[]> = {
  full: ['list', 'read', 'write', 'delete'],
  admin: ['list', 'read', 'write', 'delete', 'admin'],
  readonly: ['list', 'read'],
  writeonly: ['write'],
  previewonly: ['list'],
};

/** CAPABILITIES are every capability, in the order answers list them. */
export const CAPABILITIES: readonly Capability[] = ['list', 'read', 'write', 'delete', 'admin'];

// The SPEC error type a missing capability is reported with.
const missing: Record<Capability, ErrorType> = {
  list: 'not-authorized/read-permission-required',
  read: 'not-authorized/read-permission-required',
  write: 'not-authorized/write-permission-required',
  delete: 'not-authorized/full-permission-required',
  admin: 'not-authorized/folder-admin-permission-required',
};

/** groupIdsOf lists the groups a user belongs to. */
export async function groupIdsOf(em: EntityManager, userId: number): Promise<number[]> {
  return (await em.findBy(MembershipEntity, { user_id: userId })).map((m) => m.group_id);
}

/** rightsOn computes the principal's capabilities on a site path (folder path form, '' = root). */
export async function rightsOn(em: EntityManager, p: Principal, path: string): Promise<Set<Capability>> {
  return (await rightsOnEach(em, p, [path])).get(path)!;
}

/**
 * rightsOnEach computes the principal's capabilities on each of `paths`, reading the permission
 * rows of all their ancestors in one query (a batch of 1,000 files costs two queries, not 2,000).
 */
export async function rightsOnEach(
  em: EntityManager,
  p: Principal,
  paths: readonly string[],
): Promise<Map<string, Set<Capability>>> {
  const out = new Map<string, Set<Capability>>();
  if (isSiteAdmin(p) || !p.user) {
    for (const path of paths) out.set(path, new Set(isSiteAdmin(p) ? CAPABILITIES : []));
    return out;
  }
  const rows = await rowsApplyingTo(em, p.user.id, paths);
  for (const path of paths) {
    const caps = new Set<Capability>();
    for (const row of appliesTo(rows, path)) for (const c of levelCapabilities[row.permission]) caps.add(c);
    out.set(path, caps);
  }
  return out;
}

/**
 * rowsApplyingTo reads the permission rows that count for a user on any of `paths`: their own and
 * their groups' rows on each path and its ancestors. appliesTo then picks those of one path.
 */
export async function rowsApplyingTo(
  em: EntityManager,
  userId: number,
  paths: readonly string[],
): Promise<PermissionRow[]> {
  const ancestors = [...new Set(paths.flatMap((path) => ancestorsOf(path)))];
  // One hand-written statement for the user's own rows and their groups': this runs before every
  // file operation, where TypeORM's two built queries cost more than SQLite's work (issue 13).
  const rows = await sql<Record<string, unknown>>(
    em,
    `SELECT id, path, permission, user_id, group_id, created_at FROM permissions
      WHERE path IN (${marks(ancestors.length)})
        AND ((user_id = ? AND group_id IS NULL)
             OR group_id IN (SELECT group_id FROM group_memberships WHERE user_id = ?))
      ORDER BY path, id`,
    [...ancestors, userId, userId],
  );
  return rows.map((r) => rowOf(PermissionEntity, r));
}

/** appliesTo keeps the rows (of rowsApplyingTo) on `path` or one of its ancestors. */
export function appliesTo(rows: readonly PermissionRow[], path: string): PermissionRow[] {
  const mine = new Set(ancestorsOf(path));
  return rows.filter((row) => mine.has(row.path));
}

/**
 * requireCapability throws SPEC's not-authorized type when the principal lacks `cap` on `path`;
 * `show` turns the site path into the one the user sees (FTP, SFTP and WebDAV are rooted).
 */
export async function requireCapability(
  em: EntityManager,
  p: Principal,
  cap: Capability,
  path: string,
  show: (site: string) => string = (site) => site,
): Promise<void> {
  requireIn(await rightsOn(em, p, path), cap, path, show);
}

/** requireIn is requireCapability on rights already read (rightsOn), for a caller that needs more than one of them. */
export function requireIn(
  caps: ReadonlySet<Capability>,
  cap: Capability,
  path: string,
  show: (site: string) => string = (site) => site,
): void {
  if (!caps.has(cap))
    throw new GatewayError(missing[cap], `You need ${cap} permission on /${show(path)} to do this`);
}
