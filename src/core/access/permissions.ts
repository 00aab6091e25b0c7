/**
 * Permission rows (SPEC "Permission", "Permissions"): one user or one group, one folder, one level.
 * Site admins manage all; Folder Admins (`admin` level) manage those inside their folder; anyone
 * may list their own.
 */
import { In, IsNull, Raw, type EntityManager, type FindOptionsWhere } from 'typeorm';
import { z } from 'zod';
import {
  GroupEntity,
  PermissionEntity,
  UserEntity,
  type PermissionLevel,
  type PermissionRow,
  type UserRow,
} from '../../db/entities.ts';
import { recordAction } from '../actions/record.ts';
import type { CoreContext } from '../context.ts';
import { GatewayError, modelSaveError } from '../errors.ts';
import type { Page, PageRequest } from '../pagination.ts';
import { ancestorsOf, normalizeFolderPath } from '../paths.ts';
import { isSiteAdmin, type Principal } from '../principal.ts';
import { folderPath, int, parseFields, text } from '../validation.ts';
import { requireFullKey } from './guards.ts';
import { effectiveRights, type EffectiveRights } from './effective.ts';
import { groupIdsOf, requireCapability } from './rights.ts';

/** Permission is a permission row as the API shows it. */
export interface Permission {
  id: number;
  path: string;
  permission: PermissionLevel;
  user_id: number | null;
  username: string | null;
  group_id: number | null;
  group_name: string | null;
}

const levels = ['full', 'readonly', 'writeonly', 'previewonly', 'admin'] as const;

// SPEC "Permission": path must neither start nor end with a slash. A list filter is not stored,
// so it takes the slashes a client may add and drops them.
const permissionPath = folderPath(5000);
const pathFilter = text(5000).transform((v, c) => {
  const r = normalizeFolderPath(v, 5000);
  if ('problem' in r) {
    c.addIssue({ code: 'custom', message: r.problem });
    return z.NEVER;
  }
  return r.path;
});

/** permissionCreateSchema is what POST /permissions accepts. */
export const permissionCreateSchema = z.object({
  path: permissionPath,
  permission: z.enum(levels, { error: `must be one of ${levels.join(', ')}` }),
  user_id: int.nullable().optional(),
  username: text(50).optional(),
  group_id: int.nullable().optional(),
  /** our extension: like username, the group by its name when group_id is not given */
  group_name: text(50).optional(),
});

/**
 * permissionFilterSchema is the `filter` object GET /permissions accepts; `applies_to` (our
 * extension) keeps the rows that count on a path: those on it and on its ancestors.
 */
export const permissionFilterSchema = z.object({
  path: pathFilter.optional(),
  user_id: int.optional(),
  group_id: int.optional(),
  applies_to: pathFilter.optional(),
});

/** permissionEffectiveSchema is the query GET /permissions/effective accepts (user by id or username). */
export const permissionEffectiveSchema = z.object({
  user_id: int.optional(),
  username: text(50).optional(),
  path: pathFilter.optional(),
});

/** Permissions manages permission rows. */
export class Permissions {
  constructor(private readonly ctx: CoreContext) {}

  /**
   * list shows every row to site admins; to others their own and their groups' rows, and to a
   * Folder Admin also every row on or below the folders they administer.
   */
  async list(p: Principal, req: PageRequest & { filter?: unknown }): Promise<Page<Permission>> {
    requireFullKey(p);
    const filter = parseFields(permissionFilterSchema, req.filter ?? {});
    const w = this.ctx.paginator.window('permissions', req);
    const rows = await this.ctx.db.read(async (em) => {
      const base: FindOptionsWhere<PermissionRow> = {};
      if (filter.path !== undefined) base.path = filter.path;
      if (filter.user_id !== undefined) base.user_id = filter.user_id;
      if (filter.group_id !== undefined) base.group_id = filter.group_id;
      // The paths the filter allows, when it names them.
      let paths = filter.path === undefined ? undefined : [filter.path];
      if (filter.applies_to !== undefined) {
        const ancestors = ancestorsOf(filter.applies_to);
        paths = paths ? paths.filter((path) => ancestors.includes(path)) : ancestors;
        if (!paths.length) return [];
        base.path = In(paths);
      }
      let where: FindOptionsWhere<PermissionRow>[] = [base];
      if (!isSiteAdmin(p)) {
        const me = p.user!.id;
        const groups = await groupIdsOf(em, me);
        where = [{ ...base, user_id: me }, ...(groups.length ? [{ ...base, group_id: In(groups) }] : [])];
        for (const [i, folder] of (await this.adminFoldersIn(em, me, groups)).entries())
          where.push(...inFolder(base, paths, folder, i));
      }
      const found = await em.find(PermissionEntity, {
        where,
        order: { id: 'ASC' },
        skip: w.offset,
        take: w.perPage + 1,
      });
      return this.views(em, found);
    });
    return this.ctx.paginator.page(w, rows);
  }

  /**
   * adminFolders lists the folders where the principal is a Folder Admin (`admin` level, their own
   * or a group's), outermost first, for the web interface's admin pages; '' means the whole site.
   */
  async adminFolders(p: Principal): Promise<string[]> {
    if (isSiteAdmin(p)) return [''];
    if (!p.user) return [];
    const me = p.user.id;
    return this.ctx.db.read(async (em) => this.adminFoldersIn(em, me, await groupIdsOf(em, me)));
  }

  /**
   * effective answers what a user may do on a path and which grant gives each capability (our
   * extension, GET /permissions/effective): for site admins, and for Folder Admins on paths inside
   * their folders.
   */
  async effective(p: Principal, input: unknown): Promise<EffectiveRights> {
    requireFullKey(p);
    const q = parseFields(permissionEffectiveSchema, input);
    const path = q.path ?? '';
    return this.ctx.db.read(async (em) => {
      await requireCapability(em, p, 'admin', path);
      let user: UserRow | null = null;
      if (q.user_id !== undefined) user = await em.findOneBy(UserEntity, { id: q.user_id });
      else if (q.username) user = await em.findOneBy(UserEntity, { username_key: q.username.toLowerCase() });
      else throw modelSaveError({ base: ['one of user_id or username is required'] });
      if (!user) {
        const who = q.user_id !== undefined ? `User ${q.user_id}` : `No user is named ${q.username}, so it`;
        throw new GatewayError('not-found/user-not-found', `${who} was not found`);
      }
      return effectiveRights(em, user, path);
    });
  }

  // The folders a user administers (own or group `admin` rows), outermost first, nested ones dropped.
  private async adminFoldersIn(em: EntityManager, me: number, groups: number[]): Promise<string[]> {
    const rows = await em.find(PermissionEntity, {
      where: [
        { permission: 'admin', user_id: me },
        ...(groups.length ? [{ permission: 'admin' as const, group_id: In(groups) }] : []),
      ],
    });
    const paths = [...new Set(rows.map((r) => r.path))].sort();
    // A folder inside another listed one adds nothing.
    return paths.filter((path) => !paths.some((o) => o !== path && (o === '' || path.startsWith(`${o}/`))));
  }

  /** create grants a level to a user (by id or username) or a group, never both. */
  async create(p: Principal, input: unknown): Promise<Permission> {
    requireFullKey(p);
    const data = parseFields(permissionCreateSchema, input);
    return this.ctx.db.work(async (em) => {
      await requireCapability(em, p, 'admin', data.path);
      let userId = data.user_id ?? null;
      let groupId = data.group_id ?? null;
      if (userId === null && data.username) {
        const user = await em.findOneBy(UserEntity, { username_key: data.username.toLowerCase() });
        if (!user) throw modelSaveError({ username: ['does not name an existing user'] });
        userId = user.id;
      }
      if (groupId === null && data.group_name) {
        const group = await em.findOneBy(GroupEntity, { name: data.group_name });
        if (!group) throw modelSaveError({ group_name: ['does not name an existing group'] });
        groupId = group.id;
      }
      if (userId !== null && groupId !== null)
        throw modelSaveError({ base: ['user_id and group_id cannot both be set'] });
      if (userId === null && groupId === null)
        throw modelSaveError({ base: ['one of user_id, username or group_id is required'] });
      if (userId !== null && !(await em.existsBy(UserEntity, { id: userId }))) {
        throw modelSaveError({ user_id: ['does not name an existing user'] });
      }
      if (groupId !== null && !(await em.existsBy(GroupEntity, { id: groupId }))) {
        throw modelSaveError({ group_id: ['does not name an existing group'] });
      }
      const same = await em.findOneBy(PermissionEntity, {
        path: data.path,
        permission: data.permission,
        user_id: userId ?? IsNull(),
        group_id: groupId ?? IsNull(),
      });
      if (same) throw modelSaveError({ permission: ['already exists for this path and user or group'] });
      const row = await em.save(
        PermissionEntity,
        em.create(PermissionEntity, {
          path: data.path,
          permission: data.permission,
          user_id: userId,
          group_id: groupId,
          created_at: new Date(),
        }),
      );
      await recordAction(em, p, {
        action: 'permission_create',
        path: row.path,
        display: `Granted ${row.permission} on /${row.path}`,
        targets: [
          { type: 'permission', id: row.id, permission: row.permission, user_id: userId, group_id: groupId },
        ],
      });
      return (await this.views(em, [row]))[0]!;
    });
  }

  /** remove deletes a row; Folder Admins may delete rows inside their folder. */
  async remove(p: Principal, id: number): Promise<void> {
    requireFullKey(p);
    await this.ctx.db.work(async (em) => {
      const row = await em.findOneBy(PermissionEntity, { id });
      if (!row) throw new GatewayError('not-found/permission-not-found', `Permission ${id} not found`);
      await requireCapability(em, p, 'admin', row.path);
      await em.delete(PermissionEntity, { id });
      await recordAction(em, p, {
        action: 'permission_destroy',
        path: row.path,
        display: `Revoked ${row.permission} on /${row.path}`,
        targets: [
          {
            type: 'permission',
            id: row.id,
            permission: row.permission,
            user_id: row.user_id,
            group_id: row.group_id,
          },
        ],
      });
    });
  }

  private async views(em: EntityManager, rows: PermissionRow[]): Promise<Permission[]> {
    const userIds = [...new Set(rows.map((r) => r.user_id).filter((v): v is number => v !== null))];
    const groupIds = [...new Set(rows.map((r) => r.group_id).filter((v): v is number => v !== null))];
    const users = userIds.length ? await em.findBy(UserEntity, { id: In(userIds) }) : [];
    const groups = groupIds.length ? await em.findBy(GroupEntity, { id: In(groupIds) }) : [];
    return rows.map((r) => ({
      id: r.id,
      path: r.path,
      permission: r.permission,
      user_id: r.user_id,
      username: users.find((u) => u.id === r.user_id)?.username ?? null,
      group_id: r.group_id,
      group_name: groups.find((g) => g.id === r.group_id)?.name ?? null,
    }));
  }
}

/**
 * inFolder narrows `base` to rows on `folder` or below it. A list already narrowed to known paths
 * (`paths`: filter[path] or filter[applies_to]) keeps those in the folder; otherwise the rows are
 * found with a byte-exact prefix test, as the file tree's subtree queries do, and `i` keeps the
 * parameters of several folders apart in one query.
 */
function inFolder(
  base: FindOptionsWhere<PermissionRow>,
  paths: string[] | undefined,
  folder: string,
  i: number,
): FindOptionsWhere<PermissionRow>[] {
  const prefix = `${folder}/`;
  if (paths !== undefined) {
    const inside = paths.filter((path) => folder === '' || path === folder || path.startsWith(prefix));
    return inside.length ? [{ ...base, path: In(inside) }] : [];
  }
  if (folder === '') return [base];
  const below = Raw((col) => `substr(${col}, 1, :adminLen${i}) = :adminPrefix${i}`, {
    [`adminLen${i}`]: [...prefix].length,
    [`adminPrefix${i}`]: prefix,
  });
  return [
    { ...base, path: folder },
    { ...base, path: below },
  ];
}
