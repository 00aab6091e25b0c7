/**
 * Users (SPEC "User", "Users (site admin)") with DESIGN.md's extension fields: `site_admin` and the
 * per-interface flags `sftp_permission`, `dav_permission`, `restapi_permission`.
 */
import { createHash } from 'node:crypto';
import { In, type EntityManager } from 'typeorm';
import { z } from 'zod';
import { isUniqueViolation } from '../../db/database.ts';
import { marks, rowOf, sql, sqlArrays } from '../../db/sql.ts';
import {
  ClientLoginEntity,
  GroupEntity,
  MembershipEntity,
  PermissionEntity,
  UserEntity,
  type UserRow,
} from '../../db/entities.ts';
import { parseAllowedIps } from '../access/allowed-ips.ts';
import { requireFullKey, requireSiteAdmin } from '../access/guards.ts';
import { recordAction } from '../actions/record.ts';
import type { CoreContext } from '../context.ts';
import { GatewayError, modelSaveError } from '../errors.ts';
import { afterKey, parseSort, type SortDirection, type SortTerm } from '../keyset.ts';
import type { Page, PageRequest, SortKey } from '../pagination.ts';
import { isSiteAdmin, type Principal } from '../principal.ts';
import { bool, folderPath, idList, parseFields, text } from '../validation.ts';
import { hashPassword, PASSWORD_MAX_BYTES, PASSWORD_MIN } from './passwords.ts';
import { checkReauthentication } from './reauthentication.ts';

/** User is a user as the API shows it: every SPEC field but the write-only password and grant_permission. */
export interface User {
  id: number;
  username: string;
  name: string;
  email: string;
  notes: string;
  group_ids: string;
  ftp_permission: boolean;
  web_permission: boolean;
  sftp_permission: boolean;
  dav_permission: boolean;
  restapi_permission: boolean;
  attachments_permission: boolean;
  self_managed: boolean;
  require_password_change: boolean;
  site_admin: boolean;
  allowed_ips: string;
  user_root: string;
  created_at: Date;
  last_login_at: Date | null;
  /** locked_until (read-only extension) is when a lockout after failed logins ends; null when not locked */
  locked_until: Date | null;
}

/** GrantPermission is SPEC's write-only `grant_permission` and the permission rows each creates. */
export const grantLevels = {
  full: ['full'],
  read: ['readonly'],
  write: ['writeonly'],
  preview: ['previewonly'],
  'read+write': ['readonly', 'writeonly'],
  'preview+write': ['previewonly', 'writeonly'],
} as const;

// A username is what FTP, SFTP and HTTP Basic carry: no colon (Basic's separator), no control
// characters, no surrounding spaces.
const username = text(50).pipe(
  z
    .string()
    .min(1, { error: "can't be blank" })
    // eslint-disable-next-line no-control-regex
    .regex(/^[^\s:/\\\u0000-\u001f\u007f](?:[^:/\\\u0000-\u001f\u007f]*[^\s:/\\\u0000-\u001f\u007f])?$/, {
      error: 'must not contain : / \\ or control characters, nor start or end with a space',
    })
    // username_key (the lower-cased name, varchar(50)) can be longer than the name: 'İ' lowers to two.
    .refine((v) => v.toLowerCase().length <= 50, { error: 'is too long (maximum is 50 characters)' }),
);

const password = text().pipe(
  z
    .string()
    .min(PASSWORD_MIN, { error: `is too short (minimum is ${PASSWORD_MIN} characters)` })
    .refine((v) => Buffer.byteLength(v) <= PASSWORD_MAX_BYTES, {
      error: `is too long (maximum is ${PASSWORD_MAX_BYTES} bytes)`,
    }),
);

const email = text(50).pipe(
  z.string().refine((v) => v === '' || /^[^\s@]+@[^\s@]+$/.test(v), { error: 'is not an e-mail address' }),
);

const allowedIps = text().transform((v, c) => {
  const { invalid } = parseAllowedIps(v);
  if (invalid.length)
    c.addIssue({
      code: 'custom',
      message: `has entries that are not an IP address or CIDR range: ${invalid.join(', ')}`,
    });
  return v
    .split(/[\r\n,]+/)
    .map((s) => s.trim())
    .filter(Boolean)
    .join('\n');
});

// SPEC "User": user_root must not start with a slash and must end with one.
const userRoot = folderPath(250, { trailingSlash: true });

const fields = {
  username,
  password,
  name: text(50),
  email,
  notes: text(),
  group_ids: idList,
  ftp_permission: bool,
  web_permission: bool,
  sftp_permission: bool,
  dav_permission: bool,
  restapi_permission: bool,
  attachments_permission: bool,
  self_managed: bool,
  require_password_change: bool,
  site_admin: bool,
  allowed_ips: allowedIps,
  user_root: userRoot,
  grant_permission: z.enum(Object.keys(grantLevels) as [keyof typeof grantLevels], {
    error: `must be one of ${Object.keys(grantLevels).join(', ')}`,
  }),
};
/** userCreateSchema is what POST /users accepts. */
export const userCreateSchema = z.object(fields).partial().required({ username: true, password: true });
/** userUpdateSchema is what PUT or PATCH /users/:id accepts. */
export const userUpdateSchema = z.object(fields).partial();
type UserInput = z.infer<typeof userUpdateSchema>;

/** userSortFields are the fields GET /users sorts by (`sort_by[username]=asc`, an extension). */
export const userSortFields = ['username', 'created_at', 'last_login_at'] as const;
type UserSort = { field: (typeof userSortFields)[number]; direction: SortDirection } | null;

const direction = z.enum(['asc', 'desc'], { error: 'must be asc or desc' });
/** userListSchema is the query GET /users accepts besides cursor and per_page (extensions). */
export const userListSchema = z.object({
  search: text(100)
    .optional()
    .describe('Only users whose username, name or e-mail contains this text, in any case'),
  sort_by: z
    .object({ username: direction, created_at: direction, last_login_at: direction })
    .partial()
    .optional()
    .describe('One field and a direction, e.g. `sort_by[last_login_at]=desc`; oldest user first when absent'),
});

/**
 * userSortTerms is the ORDER BY of a sort, total so keyset pages never skip or repeat a row.
 * username_key is unique; a user who never logged in sorts as the oldest login.
 */
function userSortTerms(sort: UserSort): SortTerm[] {
  if (!sort) return [{ expr: 'u.id', asc: true }];
  const asc = sort.direction === 'asc';
  if (sort.field === 'username') return [{ expr: 'u.username_key', asc }];
  const column = sort.field === 'created_at' ? 'u.created_at' : 'COALESCE(u.last_login_at, 0)';
  return [
    { expr: column, asc },
    { expr: 'u.id', asc },
  ];
}

/** userSortKey is a user's values of userSortTerms, as a cursor carries them. */
function userSortKey(sort: UserSort, u: User): SortKey {
  if (!sort) return [u.id];
  if (sort.field === 'username') return [u.username.toLowerCase()];
  if (sort.field === 'created_at') return [u.created_at.getTime(), u.id];
  return [u.last_login_at?.getTime() ?? 0, u.id];
}

/** SETTABLE are the user's fields a create or update copies as given (the rest are checked or derived). */
const SETTABLE = [
  'name',
  'email',
  'notes',
  'ftp_permission',
  'web_permission',
  'sftp_permission',
  'dav_permission',
  'restapi_permission',
  'attachments_permission',
  'self_managed',
  'require_password_change',
  'site_admin',
  'allowed_ips',
  'user_root',
] as const satisfies readonly (keyof UserRow)[];

/** VIEW_COLUMNS are the columns of a user that its API view shows, in the order listings read them. */
const VIEW_COLUMNS = [
  'id',
  'username',
  ...SETTABLE,
  'created_at',
  'last_login_at',
  'locked_until',
] as const satisfies readonly (keyof UserRow)[];

/** Viewed is what a user's API view is made from. */
type Viewed = Pick<UserRow, (typeof VIEW_COLUMNS)[number]>;

/** viewedRow reads a listing's row, an array of VIEW_COLUMNS' values, as TypeORM would (rowOf). */
function viewedRow(values: unknown[]): Viewed {
  return rowOf(UserEntity, values, VIEW_COLUMNS);
}

/** Users manages user accounts; every call but the bootstrap is for site admins. */
export class Users {
  constructor(private readonly ctx: CoreContext) {}

  /**
   * list pages through the users: oldest first, or by `sort_by[username|created_at|last_login_at]`
   * (extension), only those whose username, name or e-mail contains `search` (any case). Every
   * sort pages by keyset: a cursor carries the sort key of the row its page starts after. By
   * username the unique username_key index serves the order; by created_at or last_login_at
   * the database sorts the matching rows (no index: measured fast at 10,000 users).
   */
  async list(p: Principal, req: PageRequest & Record<string, unknown>): Promise<Page<User>> {
    requireSiteAdmin(p);
    const { search } = parseFields(userListSchema.pick({ search: true }), { search: req.search });
    const sort: UserSort = parseSort(req.sort_by, userSortFields, null);
    const needle = (search ?? '').trim().toLowerCase();
    const digest = createHash('sha256').update(needle).digest('base64url').slice(0, 16);
    const w = this.ctx.paginator.window(
      `users:${sort ? `${sort.field}:${sort.direction}` : 'id'}:${needle ? digest : ''}`,
      req,
    );
    const terms = userSortTerms(sort);
    const seek = w.seek;
    const rows = await this.ctx.db.read(async (em) => {
      const qb = em.createQueryBuilder(UserEntity, 'u');
      if (needle) {
        // LIKE with the wildcards in the text escaped; username_key is already lower case.
        const like = `%${needle.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
        qb.where(
          "(u.username_key LIKE :like ESCAPE '\\' OR LOWER(u.name) LIKE :like ESCAPE '\\' OR LOWER(u.email) LIKE :like ESCAPE '\\')",
          { like },
        );
      }
      // A previous page reads backwards from the first row of the page the client is on.
      const ordered = seek?.before ? terms.map((t) => ({ ...t, asc: !t.asc })) : terms;
      if (seek) afterKey(qb, ordered, seek.key, 'seek');
      ordered.forEach((t, i) => qb[i === 0 ? 'orderBy' : 'addOrderBy'](t.expr, t.asc ? 'ASC' : 'DESC'));
      // A cursor made before keyset paging carries only an offset.
      if (!seek && w.offset > 0) qb.offset(w.offset);
      // The statement TypeORM builds, its rows read as arrays of the view's columns (db/sql.ts):
      // turning a page of rows into entities took more than half of a GET /users (issue 13).
      qb.select(VIEW_COLUMNS.map((c) => `u.${c}`)).limit(w.perPage + 1);
      const [text, params] = qb.getQueryAndParameters();
      return this.views(em, (await sqlArrays(em, text, params)).map(viewedRow));
    });
    return this.ctx.paginator.seekPage(w, rows, (u) => userSortKey(sort, u));
  }

  /** get shows one user: site admins see anyone, a user sees themself. */
  async get(p: Principal, id: number): Promise<User> {
    // A restricted key (desktop_app, …) does no account functions, not even on its own user.
    requireFullKey(p);
    if (p.user?.id !== id) requireSiteAdmin(p);
    return this.ctx.db.read(async (em) => {
      const row = await em.findOneBy(UserEntity, { id });
      if (!row) throw new GatewayError('not-found/user-not-found', `User ${id} not found`);
      return (await this.views(em, [row]))[0]!;
    });
  }

  /** byUsername shows one user by username (any case), for site admins and the operator. */
  async byUsername(p: Principal, usernameValue: string): Promise<User> {
    requireSiteAdmin(p);
    return this.ctx.db.read(async (em) => {
      const row = await em.findOneBy(UserEntity, { username_key: usernameValue.toLowerCase() });
      if (!row) throw new GatewayError('not-found/user-not-found', `User ${usernameValue} not found`);
      return (await this.views(em, [row]))[0]!;
    });
  }

  /**
   * unlock ends a user's lockout and forgets their failed logins, so the next login with the right
   * password succeeds at once (the per-address limit on failed logins is not the user's and stays).
   */
  async unlock(p: Principal, id: number): Promise<User> {
    requireSiteAdmin(p);
    const unlocked = await this.ctx.db.work(async (em) => {
      const row = await em.findOneBy(UserEntity, { id });
      if (!row) throw new GatewayError('not-found/user-not-found', `User ${id} not found`);
      await em.update(
        UserEntity,
        { id },
        { failed_logins: 0, failed_login_window_start: null, locked_until: null },
      );
      row.locked_until = null;
      await recordAction(em, p, {
        action: 'user_update',
        display: `Unlocked user ${row.username}`,
        targets: [{ type: 'user', id: row.id, username: row.username, fields: ['locked_until'] }],
      });
      return (await this.views(em, [row]))[0]!;
    });
    this.ctx.credentials.clear();
    return unlocked;
  }

  /** create adds a user, its group memberships and its grant_permission rows in one unit of work. */
  async create(p: Principal, input: unknown): Promise<User> {
    requireSiteAdmin(p);
    const data = parseFields(userCreateSchema, input);
    const hash = await hashPassword(data.password, this.ctx.config.accounts.bcrypt_rounds);
    return this.ctx.db.work(async (em) => {
      const row = await this.insert(em, data, hash);
      await recordAction(em, p, {
        action: 'user_create',
        display: `Created user ${row.username}`,
        targets: [{ type: 'user', id: row.id, username: row.username }],
      });
      return (await this.views(em, [row]))[0]!;
    });
  }

  /**
   * update changes any subset of fields. A session changing a password must reauthenticate
   * (SPEC "Reauthentication"). A user may change their own name, email and password when
   * self_managed; everything else needs a site admin.
   */
  async update(p: Principal, id: number, input: unknown, reauthentication?: string): Promise<User> {
    requireFullKey(p);
    const data = parseFields(userUpdateSchema, input);
    if (!isSiteAdmin(p)) {
      const own = p.user?.id === id && p.user.self_managed;
      const selfFields = ['name', 'email', 'password'];
      if (!own || Object.keys(data).some((k) => !selfFields.includes(k))) requireSiteAdmin(p);
    }
    if (data.password !== undefined) await checkReauthentication(this.ctx, p, reauthentication);
    const hash =
      data.password === undefined
        ? undefined
        : await hashPassword(data.password, this.ctx.config.accounts.bcrypt_rounds);
    const updated = await this.ctx.db.work(async (em) => {
      const row = await em.findOneBy(UserEntity, { id });
      if (!row) throw new GatewayError('not-found/user-not-found', `User ${id} not found`);
      if (data.site_admin !== undefined && !isSiteAdmin(p)) requireSiteAdmin(p);
      await this.apply(em, row, data, hash);
      await recordAction(em, p, {
        action: 'user_update',
        display: `Updated user ${row.username}`,
        targets: [
          {
            type: 'user',
            id: row.id,
            username: row.username,
            fields: Object.keys(data).filter((k) => k !== 'password'),
          },
        ],
      });
      return (await this.views(em, [row]))[0]!;
    });
    // Flags, allowed_ips and passwords apply to this user's cached API keys at once (after commit).
    this.ctx.credentials.clear();
    return updated;
  }

  /** remove deletes a user with their memberships, permissions, keys and sessions; Actions stay. */
  async remove(p: Principal, id: number): Promise<void> {
    requireSiteAdmin(p);
    await this.ctx.db.work(async (em) => {
      const row = await em.findOneBy(UserEntity, { id });
      if (!row) throw new GatewayError('not-found/user-not-found', `User ${id} not found`);
      await em.delete(UserEntity, { id });
      // SQLite may hand a deleted user's id to the next user: no inherited login window.
      await em.delete(ClientLoginEntity, { user_id: id });
      await recordAction(em, p, {
        action: 'user_destroy',
        display: `Deleted user ${row.username}`,
        targets: [{ type: 'user', id: row.id, username: row.username }],
      });
    });
    this.ctx.credentials.clear();
  }

  /** bootstrapAdmin creates the first site admin when the database has no user yet (DESIGN.md). */
  async bootstrapAdmin(usernameValue: string, passwordValue: string): Promise<UserRow | null> {
    const hash = await hashPassword(passwordValue, this.ctx.config.accounts.bcrypt_rounds);
    return this.ctx.db.work(async (em) => {
      if ((await em.count(UserEntity)) > 0) return null;
      return this.insert(em, { username: usernameValue, site_admin: true }, hash);
    });
  }

  /** views turns rows into API users, reading all their group ids in one query. */
  async views(em: EntityManager, rows: Viewed[]): Promise<User[]> {
    const groups = new Map<number, number[]>();
    if (rows.length) {
      const memberships = await sql<{ user_id: number | string; group_id: number | string }>(
        em,
        `SELECT user_id, group_id FROM group_memberships WHERE user_id IN (${marks(rows.length)}) ORDER BY group_id`,
        rows.map((r) => r.id),
      );
      for (const m of memberships) {
        const id = Number(m.user_id);
        groups.set(id, [...(groups.get(id) ?? []), Number(m.group_id)]);
      }
    }
    const now = Date.now();
    return rows.map((r) => ({
      id: r.id,
      username: r.username,
      name: r.name,
      email: r.email,
      notes: r.notes,
      group_ids: (groups.get(r.id) ?? []).join(','),
      ftp_permission: r.ftp_permission,
      web_permission: r.web_permission,
      sftp_permission: r.sftp_permission,
      dav_permission: r.dav_permission,
      restapi_permission: r.restapi_permission,
      attachments_permission: r.attachments_permission,
      self_managed: r.self_managed,
      require_password_change: r.require_password_change,
      site_admin: r.site_admin,
      allowed_ips: r.allowed_ips,
      user_root: r.user_root,
      created_at: r.created_at,
      last_login_at: r.last_login_at,
      locked_until: r.locked_until && r.locked_until.getTime() > now ? r.locked_until : null,
    }));
  }

  private async insert(em: EntityManager, data: UserInput, hash: string): Promise<UserRow> {
    const now = new Date();
    const row = em.create(UserEntity, {
      username: data.username!,
      username_key: data.username!.toLowerCase(),
      password_hash: hash,
      created_at: now,
      updated_at: now,
    });
    await this.apply(em, row, data, undefined, true);
    return row;
  }

  private async apply(
    em: EntityManager,
    row: UserRow,
    data: UserInput,
    hash?: string,
    isNew = false,
  ): Promise<void> {
    if (data.username !== undefined && (isNew || data.username.toLowerCase() !== row.username_key)) {
      const taken = await em.existsBy(UserEntity, { username_key: data.username.toLowerCase() });
      if (taken) throw modelSaveError({ username: ['has already been taken'] });
      row.username = data.username;
      row.username_key = data.username.toLowerCase();
    } else if (data.username !== undefined) {
      row.username = data.username;
    }
    // SPEC: require_password_change requires web_permission, whichever of the two this call changes.
    if (
      (data.require_password_change ?? row.require_password_change ?? false) &&
      !(data.web_permission ?? row.web_permission ?? true)
    ) {
      throw modelSaveError({ require_password_change: ['requires web_permission'] });
    }
    for (const key of SETTABLE)
      if (data[key] !== undefined) (row as unknown as Record<string, unknown>)[key] = data[key];
    if (hash !== undefined) row.password_hash = hash;
    // A new row keeps updated_at = created_at: "never changed since created" is then exact (site.ts).
    row.updated_at = isNew ? row.created_at : new Date();
    try {
      await em.save(UserEntity, row);
    } catch (err) {
      // Two requests creating the same username at once: the unique index decides.
      if (isUniqueViolation(err)) throw modelSaveError({ username: ['has already been taken'] });
      throw err;
    }
    if (data.group_ids !== undefined) await this.setGroups(em, row.id, data.group_ids);
    if (data.grant_permission !== undefined) {
      const path = row.user_root.replace(/\/$/, '');
      for (const level of grantLevels[data.grant_permission]) {
        const exists = await em.existsBy(PermissionEntity, { user_id: row.id, path, permission: level });
        if (!exists) {
          await em.insert(PermissionEntity, {
            user_id: row.id,
            group_id: null,
            path,
            permission: level,
            created_at: new Date(),
          });
        }
      }
    }
  }

  private async setGroups(em: EntityManager, userId: number, groupIds: number[]): Promise<void> {
    const unique = [...new Set(groupIds)];
    const found = unique.length ? await em.findBy(GroupEntity, { id: In(unique) }) : [];
    const missing = unique.filter((g) => !found.some((f) => f.id === g));
    if (missing.length) throw modelSaveError({ group_ids: [`has unknown group ids: ${missing.join(', ')}`] });
    await em.delete(MembershipEntity, { user_id: userId });
    if (unique.length)
      await em.insert(
        MembershipEntity,
        unique.map((group_id) => ({ group_id, user_id: userId })),
      );
  }
}
