/**
 * History (SPEC "History (recent actions)"): the Actions of the last 24 hours (SPEC "Limits"), by
 * file, by folder, by user, the logins, or all of them with filters, one cursor-paginated page at
 * a time. Every query is bounded by the `when` index (and (user_id, when) for a user's history);
 * path tests are `substr(col, 1, n) = prefix`, which is exact and case-sensitive on SQLite and
 * PostgreSQL alike (SQLite's LIKE ignores ASCII case, and PostgreSQL's ranges follow its collation).
 */
import { createHash } from 'node:crypto';
import type { EntityManager, SelectQueryBuilder } from 'typeorm';
import { ACTION_NAMES } from '../../config.ts';
import { ActionEntity, UserEntity, type ActionRow } from '../../db/entities.ts';
import { bytewise, subtreeBounds } from '../../db/sql.ts';
import { requireFullKey, requireSiteAdmin } from '../access/guards.ts';
import { rightsOn } from '../access/rights.ts';
import type { CoreContext } from '../context.ts';
import type { ActionName } from './record.ts';
import { GatewayError } from '../errors.ts';
import { afterKey, parseSort, type SortDirection, type SortTerm } from '../keyset.ts';
import type { Page, PageWindow } from '../pagination.ts';
import { normalizeFolderPath, parentOf } from '../paths.ts';
import { isSiteAdmin, type Principal } from '../principal.ts';

/** Action is SPEC's Action resource (history record). */
export interface Action {
  id: number;
  path: string;
  when: Date;
  destination: string;
  source: string;
  display: string;
  ip: string;
  targets: unknown[];
  user_id: number | null;
  username: string;
  action: string;
  failure_type: string;
  interface: string;
}

/**
 * HistoryQuery is the query string of a history request (values are strings, or objects for
 * the bracket fields): start_at, end_at, display, cursor, per_page, sort_by, and on /history
 * filter and filter_prefix.
 */
export type HistoryQuery = Record<string, unknown>;

/** HISTORY_HOURS is how far back the history endpoints reach (SPEC "Limits"). */
export const HISTORY_HOURS = 24;

// SPEC "Limits": an action path is at most 5000 characters.
const ACTION_PATH_MAX = 5000;

type SortField = 'created_at' | 'user_id' | 'path' | 'folder';

const SORT_FIELDS: readonly SortField[] = ['user_id', 'created_at'];
const SORT_FIELDS_ALL: readonly SortField[] = ['path', 'folder', 'user_id', 'created_at'];
// interface, action and username are extensions of SPEC's filter fields (the web admin's History page).
const FILTER_FIELDS = ['user_id', 'folder', 'path', 'interface', 'action', 'username'] as const;

/**
 * ACTION_NAMES are the values filter[action] takes: SPEC's Action `action` values and those the
 * gateway records beyond them (public keys, share links), the names a webhook filters on.
 */
export { ACTION_NAMES };
// The list and the names the gateway records are the same: a name on one side only fails to compile.
const everyAction: Record<Exclude<ActionName, (typeof ACTION_NAMES)[number]>, never> = {};
const onlyActions: readonly ActionName[] = ACTION_NAMES;
void [everyAction, onlyActions];

/** INTERFACE_NAMES are SPEC's Action `interface` values, the values filter[interface] takes. */
export const INTERFACE_NAMES = [
  'web',
  'ftp',
  'robot',
  'jsapi',
  'webdesktopapi',
  'sftp',
  'dav',
  'desktop',
  'restapi',
  'scim',
  'office',
  'mobile',
  'as2',
  'inbound_email',
  'remote',
] as const;
const FILTER_PREFIX_FIELDS = ['path'] as const;

/** Listing is one history endpoint's selection: its cursor name, its sort fields, its WHERE. */
interface Listing {
  /** names the rows selected (endpoint and its arguments, not the sort): a cursor is only good for it */
  name: string;
  sortFields: readonly SortField[];
  where(qb: SelectQueryBuilder<ActionRow>): void;
  /** set when the selection may be a small share of the window (a folder): see `list` */
  sparse?: boolean;
}

/**
 * SPARSE_SCAN is how many of the window's newest actions a sparse listing reads in time order
 * before it looks the rest up by its path indexes instead (see `list`).
 */
const SPARSE_SCAN = 5000;

/** History answers SPEC's five history endpoints. */
export class History {
  constructor(private readonly ctx: CoreContext) {}

  /**
   * files lists the actions on one file: those whose path, source or destination is `path`. Any
   * principal may ask; a user needs the `list` capability on the path (SPEC's history permission).
   */
  async files(p: Principal, path: string, q: HistoryQuery): Promise<Page<Action>> {
    const file = sitePath(path);
    if (file === '') throw new GatewayError('bad-request/request-params-required', 'A file path is required');
    await this.requireHistoryPermission(p, file);
    return this.list(q, {
      name: `files:${file}`,
      sortFields: SORT_FIELDS,
      where: (qb) =>
        qb.andWhere(
          this.pathTest((col) => [`${col} = :file`]),
          { file },
        ),
    });
  }

  /**
   * folders lists the actions on a folder and everything inside it (path, source or destination
   * in the subtree). For the root ('') that is every action with a path: logins and account
   * changes without one stay in the site admins' login and full history.
   */
  async folders(p: Principal, path: string, q: HistoryQuery): Promise<Page<Action>> {
    const folder = sitePath(path);
    await this.requireHistoryPermission(p, folder);
    return this.list(q, {
      name: `folders:${folder}`,
      sortFields: SORT_FIELDS,
      sparse: true,
      where: (qb) => {
        if (folder === '') {
          qb.andWhere("(a.path <> '' OR a.source <> '' OR a.destination <> '')");
          return;
        }
        // The folder itself, or a range of paths inside it (db/sql.ts subtreeBounds).
        const [below, beyond] = subtreeBounds(folder);
        qb.andWhere(
          this.pathTest((col) => [`${col} = :folder`, `${col} >= :below AND ${col} < :beyond`]),
          { folder, below, beyond },
        );
      },
    });
  }

  /** users lists one user's actions: site admins and site-wide keys for anyone, a user for themself. */
  async users(p: Principal, userId: number, q: HistoryQuery): Promise<Page<Action>> {
    requireFullKey(p);
    if (p.user?.id !== userId) requireSiteAdmin(p);
    return this.list(q, {
      name: `users:${userId}`,
      sortFields: SORT_FIELDS,
      where: (qb) => qb.andWhere('a.user_id = :userId', { userId }),
    });
  }

  /** login lists logins and failed logins, for site admins and site-wide keys. */
  async login(p: Principal, q: HistoryQuery): Promise<Page<Action>> {
    requireSiteAdmin(p);
    return this.list(q, {
      name: 'login',
      sortFields: SORT_FIELDS,
      // Literal, not bound: the partial logins index (migration 0008) is used only for its own terms.
      where: (qb) => qb.andWhere("a.action IN ('login', 'failedlogin')"),
    });
  }

  /**
   * all lists every action, for site admins and site-wide keys, narrowed by `filter` (exact
   * user_id; exact path; folder: actions directly in that folder, `/` for the top level) and
   * `filter_prefix` (path starts with the text given, case-sensitive). Extensions: filter[interface]
   * and filter[action], one of SPEC's values each, and filter[username] (a user by name, for
   * filter[user_id]).
   */
  async all(p: Principal, q: HistoryQuery): Promise<Page<Action>> {
    requireSiteAdmin(p);
    const filter = parseFilter(q.filter, 'filter', FILTER_FIELDS);
    const prefixFilter = parseFilter(q.filter_prefix, 'filter_prefix', FILTER_PREFIX_FIELDS);
    const userId = await this.filterUser(filter.user_id, filter.username);
    const path = filterPath(filter.path, 'filter[path]');
    const folder = filterPath(filter.folder, 'filter[folder]');
    const prefix = filterPrefix(prefixFilter.path);
    const iface = filterEnum(filter.interface, 'filter[interface]', INTERFACE_NAMES);
    const action = filterEnum(filter.action, 'filter[action]', ACTION_NAMES);
    const parent = this.parentExpression();
    return this.list(q, {
      name: `all:${JSON.stringify([userId, path, folder, prefix, iface, action])}`,
      sortFields: SORT_FIELDS_ALL,
      where: (qb) => {
        if (userId !== null) qb.andWhere('a.user_id = :filterUserId', { filterUserId: userId });
        if (iface !== null) qb.andWhere('a.interface = :filterInterface', { filterInterface: iface });
        if (action !== null) {
          // Logins are a sliver of a busy window: the terms of the partial logins index (migration
          // 0008), literal as in `login`, let both databases read it rather than scan the window.
          // The value is one of ACTION_NAMES, so it is safe as a literal.
          if (action === 'login' || action === 'failedlogin')
            qb.andWhere(`a.action IN ('login', 'failedlogin') AND a.action = '${action}'`);
          else qb.andWhere('a.action = :filterAction', { filterAction: action });
        }
        if (path !== null) qb.andWhere('a.path = :filterPath', { filterPath: path });
        if (folder !== null) {
          // The folder an action is in is its path without the last segment; pathless actions are in none.
          qb.andWhere(`${parent} = :filterFolder AND a.path <> ''`, {
            filterFolder: folder === '' ? '' : `${folder}/`,
          });
          if (folder !== '') this.prefixRange(qb, `${folder}/`, 'folder');
        }
        if (prefix !== null) {
          qb.andWhere('substr(a.path, 1, :prefixLength) = :filterPrefix', {
            filterPrefix: prefix,
            prefixLength: [...prefix].length,
          });
          this.prefixRange(qb, prefix, 'prefix');
        }
      },
    });
  }

  /**
   * filterUser reads filter[user_id], or filter[username] looked up (its index is unique) so that
   * the (user_id, when, id) index serves it; an unknown name is refused in words.
   */
  private async filterUser(rawId: unknown, rawName: unknown): Promise<number | null> {
    const id = filterUserId(rawId);
    if (rawName === undefined || rawName === '') return id;
    if (typeof rawName !== 'string' || rawName.trim() === '')
      throw new GatewayError('bad-request/invalid-filter-param-value', 'filter[username] must be a username');
    if (id !== null)
      throw new GatewayError(
        'bad-request/invalid-filter-combination',
        'Give filter[user_id] or filter[username], not both',
      );
    const user = await this.ctx.db.read((em) =>
      em.findOneBy(UserEntity, { username_key: rawName.trim().toLowerCase() }),
    );
    if (!user)
      throw new GatewayError(
        'bad-request/invalid-filter-param-value',
        `There is no user named ${rawName.trim()} (filter[username])`,
      );
    return user.id;
  }

  /**
   * pathTest applies `test` (alternatives, ORed) to an action's path, source and destination,
   * each written so that its index (migration 0008) serves it: the source index holds the actions
   * that have one, the destination index those whose destination is not their path (a move's
   * destination is). The result is one flat OR of conjunctions, the shape SQLite can answer from
   * several indexes at once (its "MULTI-INDEX OR"); nested, it scans.
   */
  private pathTest(test: (col: string) => string[]): string {
    const arms = [
      ...test(this.binary('a.path')),
      ...test(this.binary('a.source')).map((t) => `a.source <> '' AND ${t}`),
      ...test(this.binary('a.destination')).map(
        (t) => `a.destination <> '' AND a.destination <> a.path AND ${t}`,
      ),
    ];
    return `(${arms.map((arm) => `(${arm})`).join(' OR ')})`;
  }

  /**
   * prefixRange adds the index range of the paths that start with `prefix` (from it up to the
   * prefix with its last character's successor) to a test that already says so exactly.
   */
  private prefixRange(qb: SelectQueryBuilder<ActionRow>, prefix: string, name: string): void {
    const chars = [...prefix];
    const last = chars.pop()!.codePointAt(0)!;
    const col = this.binary('a.path');
    qb.andWhere(`${col} >= :${name}Low`, { [`${name}Low`]: prefix });
    // The last code point has no successor, or its successor is a lone surrogate: no upper bound.
    if (last >= 0x10ffff || last === 0xd7ff) return;
    qb.andWhere(`${col} < :${name}High`, {
      [`${name}High`]: chars.join('') + String.fromCodePoint(last + 1),
    });
  }

  /** requireHistoryPermission lets a user see a path's history only with `list` on it. */
  private async requireHistoryPermission(p: Principal, path: string): Promise<void> {
    requireFullKey(p);
    if (isSiteAdmin(p)) return;
    const caps = await this.ctx.db.read((em) => rightsOn(em, p, path));
    if (!caps.has('list')) {
      throw new GatewayError(
        'not-authorized/history-permission-required',
        `You need list permission on /${path} to see its history`,
      );
    }
  }

  /**
   * list runs one listing: the common parameters, the 24-hour floor, the sort and the page. Sorts
   * on numbers (created_at, user_id) page by keyset: a cursor carries the sort key of the row its
   * page starts after, so page 1,000 reads what page 1 reads. Sorts on paths (/history only) page
   * by offset, since a path key (up to 5000 characters) would not fit a cursor in a URL.
   */
  private async list(q: HistoryQuery, listing: Listing): Promise<Page<Action>> {
    const start = parseTime(q.start_at, 'start_at');
    const end = parseTime(q.end_at, 'end_at');
    const display = parseDisplay(q.display);
    const sort = parseSort(q.sort_by, listing.sortFields, {
      field: 'created_at' as SortField,
      direction: 'desc' as SortDirection,
    });
    // The cursor names the selection (hashed: paths may be 5000 characters) and the sort, so a
    // cursor is refused by another listing, and by this one under another sort.
    const digest = createHash('sha256')
      .update(JSON.stringify([listing.name, start?.getTime() ?? null, end?.getTime() ?? null]))
      .digest('base64url')
      .slice(0, 22);
    const base = `history:${digest}:sort=`;
    const w = this.window(`${base}${sort.field}:${sort.direction}`, base, q);
    const floor = Date.now() - HISTORY_HOURS * 3_600_000;
    const terms = this.sortTerms(sort.field, sort.direction);
    const seekable = sort.field === 'created_at' || sort.field === 'user_id';
    const seek = seekable ? w.seek : undefined;
    const rows = await this.ctx.db.read(async (em) => {
      // Pin the newest action on the first page, so actions recorded while a client pages do not
      // shift the later pages; the cursor carries the pin.
      w.snapshot ??= await this.newestId(em);
      // A previous page reads backwards from the first row of the page the client is on.
      const ordered = seek?.before ? terms.map((t) => ({ ...t, asc: !t.asc })) : terms;
      // `by` names when and id in the window's terms: `+ 0` keeps an index from serving them.
      // `within` narrows the window's time range where a caller knows a tighter one. Each side
      // gets one bound, the tightest (times are whole milliseconds): given two, SQLite may seek
      // the (when, id) index by the looser.
      const select = (
        filtered: boolean,
        by = { when: 'a.when', id: 'a.id', terms: ordered },
        within: { after?: number; before?: number } = {},
      ) => {
        const low = Math.max(floor, within.after ?? floor, start ? start.getTime() - 1 : floor);
        const high = Math.min(within.before ?? Infinity, end ? end.getTime() : Infinity);
        const qb = em
          .createQueryBuilder(ActionEntity, 'a')
          .where(`${by.when} > :floor`, { floor: low })
          .andWhere(`${by.id} <= :snapshot`, { snapshot: w.snapshot });
        if (high !== Infinity) qb.andWhere(`${by.when} < :endAt`, { endAt: high });
        if (filtered) listing.where(qb);
        if (seek) afterKey(qb, by.terms, seek.key, 'seek');
        return qb;
      };
      const sorted = (qb: SelectQueryBuilder<ActionRow>, by = ordered) => {
        by.forEach((t, i) => qb[i === 0 ? 'orderBy' : 'addOrderBy'](t.expr, t.asc ? 'ASC' : 'DESC'));
        return qb;
      };
      if (listing.sparse && sort.field === 'created_at') {
        // A folder's actions may be most of the window or a sliver of it, and the planners guess
        // which from statistics that cannot see a folder's share: read the newest SPARSE_SCAN
        // actions in time order (cheap, whatever the share), and only if they do not fill the
        // page look the older ones up by the path indexes, sorted afterwards (`+ 0` keeps the
        // (when, id) index from being chosen for its order).
        const bounds = await sorted(select(false).select('a.when', 'w').addSelect('a.id', 'i'))
          .offset(SPARSE_SCAN - 1)
          .limit(2)
          .getRawMany<{ w: unknown; i: unknown }>();
        if (bounds.length === 2) {
          const key = (b: { w: unknown; i: unknown }) => [Number(b.w), Number(b.i)];
          const reversed = ordered.map((t) => ({ ...t, asc: !t.asc }));
          // The scan's boundary is also a time bound: SQLite does not seek by the row-value test,
          // so without it a rare folder read the whole window (10M Actions: 110-370 ms a page).
          const boundWhen = key(bounds[1]!)[0]!;
          const newest = select(
            true,
            undefined,
            ordered[0]!.asc ? { before: boundWhen + 1 } : { after: boundWhen - 1 },
          );
          afterKey(newest, reversed, key(bounds[1]!), 'scan');
          const found = await sorted(newest)
            .limit(w.perPage + 1)
            .getMany();
          if (found.length > w.perPage) return found;
          const byIndex = ordered.map((t) => ({ ...t, expr: `${t.expr} + 0` }));
          // SQLite, with statistics, would still take the (when, id) index for the window's
          // range and read most of it; PostgreSQL needs the when terms to seek the path indexes.
          const older =
            this.ctx.db.kind === 'sqlite'
              ? select(true, { when: 'a.when + 0', id: 'a.id + 0', terms: byIndex })
              : select(true);
          afterKey(older, this.ctx.db.kind === 'sqlite' ? byIndex : ordered, key(bounds[0]!), 'scan');
          return [
            ...found,
            ...(await sorted(older, byIndex)
              .limit(w.perPage + 1 - found.length)
              .getMany()),
          ];
        }
      }
      const qb = sorted(select(true));
      if (!seek && w.offset > 0) qb.offset(w.offset);
      return qb.limit(w.perPage + 1).getMany();
    });
    const actions = rows.map((r) => view(r, display));
    if (!seekable) return this.ctx.paginator.page(w, actions);
    return this.ctx.paginator.seekPage(w, actions, (a) =>
      sort.field === 'user_id' ? [a.user_id ?? 0, a.when.getTime(), a.id] : [a.when.getTime(), a.id],
    );
  }

  /** window reads the cursor; one made by this listing under another sort gets its own error type. */
  private window(list: string, base: string, q: HistoryQuery): PageWindow {
    // A repeated or bracketed parameter arrives as an array or object, never a cursor or a number.
    if (q.cursor !== undefined && typeof q.cursor !== 'string')
      throw new GatewayError('bad-request/invalid-cursor', 'Invalid cursor');
    if (q.per_page !== undefined && typeof q.per_page !== 'string' && typeof q.per_page !== 'number')
      throw new GatewayError('bad-request/request-params-invalid', 'per_page must be an integer');
    try {
      return this.ctx.paginator.window(list, { cursor: q.cursor, per_page: q.per_page });
    } catch (err) {
      if (err instanceof GatewayError && err.type === 'bad-request/invalid-cursor') {
        const madeFor = typeof q.cursor === 'string' ? this.ctx.paginator.listOf(q.cursor) : null;
        if (madeFor !== null && madeFor !== list && madeFor.startsWith(base)) {
          throw new GatewayError(
            'bad-request/invalid-cursor-type-for-sort',
            'This cursor was made for another sort_by; send the same sort_by on every page',
          );
        }
      }
      throw err;
    }
  }

  private async newestId(em: EntityManager): Promise<number> {
    const raw = await em
      .createQueryBuilder(ActionEntity, 'a')
      .select('MAX(a.id)', 'newest')
      .getRawOne<{ newest: unknown }>();
    return raw?.newest == null ? 0 : Number(raw.newest);
  }

  /**
   * sortTerms is the ORDER BY of a sort: the field, then newest first, then id, so every order is
   * total and stable. Each term is an indexed expression: (when, id) for created_at, (user_id,
   * when, id) within one user.
   */
  private sortTerms(field: SortField, direction: SortDirection): SortTerm[] {
    const asc = direction === 'asc';
    const newest: SortTerm[] = [
      { expr: 'a.when', asc: false },
      { expr: 'a.id', asc: false },
    ];
    switch (field) {
      case 'created_at':
        return [
          { expr: 'a.when', asc },
          { expr: 'a.id', asc },
        ];
      case 'user_id':
        // Actions without a user (site-wide keys, unknown usernames) sort as user 0.
        return [{ expr: 'COALESCE(a.user_id, 0)', asc }, ...newest];
      case 'path':
        return [{ expr: this.binary('a.path'), asc }, ...newest];
      case 'folder':
        return [
          { expr: this.binary(this.parentExpression()), asc },
          { expr: this.binary('a.path'), asc },
          ...newest,
        ];
    }
  }

  /** binary is bytewise (db/sql.ts) on this core's database: every path test uses the path indexes. */
  private binary(expr: string): string {
    return bytewise(this.ctx.db.kind, expr);
  }

  /**
   * parentExpression is the SQL of an action's folder with a trailing slash ('a/b/' for 'a/b/c',
   * '' for 'c'): rtrim strips every trailing character that is not a slash, on both databases.
   */
  private parentExpression(): string {
    return "rtrim(a.path, replace(a.path, '/', ''))";
  }
}

/** view turns a row into SPEC's Action; display=parent shows the folder the action happened in. */
function view(r: ActionRow, display: 'full' | 'parent'): Action {
  let targets: unknown[] = [];
  try {
    const parsed: unknown = JSON.parse(r.targets);
    if (Array.isArray(parsed)) targets = parsed;
  } catch {
    // A row written by hand with bad JSON shows no targets rather than failing the whole page.
  }
  return {
    id: r.id,
    path: r.path,
    when: r.when,
    destination: r.destination,
    source: r.source,
    display: display === 'parent' && r.path !== '' ? `/${parentOf(r.path)}` : r.display,
    ip: r.ip,
    targets,
    user_id: r.user_id,
    username: r.username,
    action: r.action,
    failure_type: r.failure_type,
    interface: r.interface,
  };
}

/** sitePath normalizes the path of a file or folder history request ('' is the root). */
function sitePath(input: string): string {
  const r = normalizeFolderPath(input, ACTION_PATH_MAX);
  if ('problem' in r) throw new GatewayError('bad-request/invalid-path', `The path ${r.problem}`);
  return r.path;
}

// ISO 8601 date or date-time. A space before the offset is read as '+': an unencoded '+' in a
// query string arrives as a space.
const ISO_TIME =
  /^(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2})(?::(\d{2})(\.\d{1,9})?)?(Z|[+\- ]\d{2}(?::?\d{2})?)?)?$/i;

/**
 * parseTime reads start_at or end_at: blank is none, anything but an ISO 8601 date-time is
 * `bad-request/datetime-parse`. A date-time without an offset is UTC, a date alone its midnight UTC.
 */
export function parseTime(raw: unknown, name: string): Date | null {
  if (raw === undefined || raw === null) return null;
  const bad = () =>
    new GatewayError(
      'bad-request/datetime-parse',
      `${name} must be an ISO 8601 date-time, like 2024-05-01T12:00:00Z`,
    );
  if (typeof raw !== 'string') throw bad();
  const s = raw.trim();
  if (s === '') return null;
  const m = ISO_TIME.exec(s);
  if (!m) throw bad();
  const [, y, mo, d, h = '00', mi = '00', sec = '00', frac = '', zone] = m;
  const year = Number(y);
  const month = Number(mo);
  const day = Number(d);
  const calendar = new Date(Date.UTC(year, month - 1, day));
  if (calendar.getUTCMonth() !== month - 1 || calendar.getUTCDate() !== day) throw bad();
  if (Number(h) > 23 || Number(mi) > 59 || Number(sec) > 59) throw bad();
  let offset = 'Z';
  if (zone && zone.toUpperCase() !== 'Z') {
    const sign = zone[0] === '-' ? '-' : '+';
    const digits = zone.slice(1).replace(':', '');
    const oh = digits.slice(0, 2);
    const om = digits.slice(2) || '00';
    if (Number(oh) > 23 || Number(om) > 59) throw bad();
    offset = `${sign}${oh}:${om}`;
  }
  const t = Date.parse(`${y}-${mo}-${d}T${h}:${mi}:${sec}${frac.slice(0, 4)}${offset}`);
  if (Number.isNaN(t)) throw bad();
  return new Date(t);
}

/** parseDisplay reads display: `full` (or blank) or `parent`. */
function parseDisplay(raw: unknown): 'full' | 'parent' {
  if (raw === undefined || raw === '' || raw === 'full') return 'full';
  if (raw === 'parent') return 'parent';
  throw new GatewayError('bad-request/request-params-invalid', 'display must be full, parent or blank');
}

/** parseFilter reads `filter` or `filter_prefix`: an object whose fields are all in `allowed`. */
function parseFilter(raw: unknown, name: string, allowed: readonly string[]): Record<string, unknown> {
  if (raw === undefined || raw === '') return {};
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) {
    throw new GatewayError(
      'bad-request/invalid-filter-param',
      `${name} must be an object such as ${name}[${allowed[0]}]=…`,
    );
  }
  for (const field of Object.keys(raw)) {
    if (!allowed.includes(field)) {
      throw new GatewayError(
        'bad-request/invalid-filter-field',
        `${name}[${field}] is not available; use ${allowed.map((f) => `${name}[${f}]`).join(', ')}`,
      );
    }
  }
  return raw as Record<string, unknown>;
}

/** filterUserId reads filter[user_id] (blank for none). */
function filterUserId(raw: unknown): number | null {
  if (raw === undefined || raw === '') return null;
  const text = typeof raw === 'number' ? String(raw) : raw;
  if (typeof text !== 'string' || !/^\d{1,15}$/.test(text.trim())) {
    throw new GatewayError('bad-request/invalid-filter-param-value', 'filter[user_id] must be a user id');
  }
  return Number(text.trim());
}

/** filterEnum reads filter[interface] or filter[action] (blank for none): one of `allowed`. */
function filterEnum<T extends string>(raw: unknown, name: string, allowed: readonly T[]): T | null {
  if (raw === undefined || raw === '') return null;
  if (typeof raw !== 'string' || !(allowed as readonly string[]).includes(raw)) {
    throw new GatewayError(
      'bad-request/invalid-filter-param-value',
      `${name} must be one of ${allowed.join(', ')}`,
    );
  }
  return raw as T;
}

/** filterPath reads filter[path] or filter[folder] (blank for none, `/` for the root). */
function filterPath(raw: unknown, name: string): string | null {
  if (raw === undefined || raw === '') return null;
  if (typeof raw !== 'string')
    throw new GatewayError('bad-request/invalid-filter-param-value', `${name} must be a path`);
  const r = normalizeFolderPath(raw, ACTION_PATH_MAX);
  if ('problem' in r)
    throw new GatewayError('bad-request/invalid-filter-param-value', `${name} ${r.problem}`);
  return r.path;
}

/** filterPrefix reads filter_prefix[path]: the text paths start with (a leading slash is dropped). */
function filterPrefix(raw: unknown): string | null {
  if (raw === undefined || raw === '') return null;
  if (typeof raw !== 'string')
    throw new GatewayError('bad-request/invalid-filter-param-value', 'filter_prefix[path] must be text');
  const prefix = raw.replace(/^\/+/, '');
  if (prefix === '') return null;
  if ([...prefix].length > ACTION_PATH_MAX) {
    throw new GatewayError(
      'bad-request/invalid-filter-param-value',
      `filter_prefix[path] is too long (maximum is ${ACTION_PATH_MAX} characters)`,
    );
  }
  return prefix;
}
