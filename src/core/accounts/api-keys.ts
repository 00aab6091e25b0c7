/**
 * API keys (SPEC "ApiKey", "API keys"). A key is 32 random bytes (64 hex characters); only its
 * SHA-256 digest is stored, so checking a key is one indexed lookup and never runs bcrypt (a
 * high-entropy key needs no slow hash). The key itself is shown once, in the create response.
 */
import { createHash, randomBytes } from 'node:crypto';
import {
  IsNull,
  LessThan,
  LessThanOrEqual,
  MoreThan,
  MoreThanOrEqual,
  type EntityManager,
  type FindOperator,
  type FindOptionsOrder,
  type FindOptionsWhere,
} from 'typeorm';
import { z } from 'zod';
import { ApiKeyEntity, UserEntity, type ApiKeyRow } from '../../db/entities.ts';
import { requireFullKey } from '../access/guards.ts';
import { recordAction } from '../actions/record.ts';
import type { CoreContext } from '../context.ts';
import { GatewayError, modelSaveError } from '../errors.ts';
import type { Page, PageRequest } from '../pagination.ts';
import { isSiteAdmin, type Principal } from '../principal.ts';
import { dateTime, int, parseFields, text } from '../validation.ts';
import type { CachedKey } from './credential-cache.ts';
import { checkReauthentication } from './reauthentication.ts';

/** ApiKey is a key as the API shows it; `key` only in the response that created it. */
export interface ApiKey {
  id: number;
  descriptive_label: string;
  description: string;
  created_at: Date;
  expires_at: Date | null;
  key?: string;
  last_use_at: Date | null;
  name: string;
  permission_set: string;
  platform: string;
  url: string;
  user_id: number | null;
}

const permissionSets = [
  'none',
  'full',
  'desktop_app',
  'sync_app',
  'office_integration',
  'mobile_app',
] as const;
// SPEC: last_use_at is refreshed at most once per 3 hours, which keeps key checks read-only.
const LAST_USE_REFRESH_MS = 3 * 60 * 60 * 1000;

/** apiKeyCreateSchema is what POST /api_keys accepts. */
export const apiKeyCreateSchema = z.object({
  user_id: int.optional(),
  name: text(100).optional(),
  description: text().optional(),
  expires_at: dateTime.optional(),
  permission_set: z.enum(permissionSets, { error: `must be one of ${permissionSets.join(', ')}` }).optional(),
  platform: text(50).optional(),
});

const filterValue = z.object({ expires_at: dateTime.optional() }).optional();
/** apiKeyListSchema is the query GET /api_keys accepts (besides cursor and per_page). */
export const apiKeyListSchema = z.object({
  user_id: int.optional(),
  sort_by: z
    .object({ expires_at: z.enum(['asc', 'desc'], { error: 'must be asc or desc' }).optional() })
    .optional(),
  filter: filterValue,
  filter_gt: filterValue,
  filter_gteq: filterValue,
  filter_lt: filterValue,
  filter_lteq: filterValue,
});

/** digestKey is the stored form of a key. */
export function digestKey(key: string): string {
  return createHash('sha256').update(key).digest('hex');
}

/** ApiKeys issues, lists and checks API keys. */
export class ApiKeys {
  constructor(private readonly ctx: CoreContext) {}

  /**
   * list shows keys of one user (`user_id`, 0 or absent for the caller). Site admins may name any
   * user; filters and sort apply to expires_at.
   */
  async list(p: Principal, req: PageRequest & Record<string, unknown>): Promise<Page<ApiKey>> {
    requireFullKey(p);
    const q = parseFields(apiKeyListSchema, req);
    const owner = q.user_id && q.user_id !== 0 ? q.user_id : (p.user?.id ?? null);
    if (owner !== (p.user?.id ?? null) && !isSiteAdmin(p)) {
      throw new GatewayError(
        'not-authorized/cant-act-for-other-user',
        'Only site admins list keys of other users',
      );
    }
    const where: FindOptionsWhere<ApiKeyRow> = { user_id: owner ?? IsNull() };
    const ops: [keyof typeof q, (d: Date) => FindOperator<Date>][] = [
      ['filter_gt', MoreThan],
      ['filter_gteq', MoreThanOrEqual],
      ['filter_lt', LessThan],
      ['filter_lteq', LessThanOrEqual],
    ];
    const given = [q.filter, ...ops.map(([k]) => q[k])].filter(
      (f) => (f as { expires_at?: unknown })?.expires_at,
    );
    if (given.length > 1)
      throw new GatewayError(
        'bad-request/invalid-filter-combination',
        'Use one filter on expires_at at a time',
      );
    if (q.filter?.expires_at) where.expires_at = q.filter.expires_at;
    for (const [k, op] of ops) {
      const d = (q[k] as { expires_at?: Date | null } | undefined)?.expires_at;
      if (d) where.expires_at = op(d);
    }
    const sortKey = q.sort_by?.expires_at ? `expires_at:${q.sort_by.expires_at}` : 'id';
    const w = this.ctx.paginator.window(
      `api_keys:${owner ?? 'site'}:${sortKey}:${JSON.stringify(where)}`,
      req,
    );
    const order: FindOptionsOrder<ApiKeyRow> = q.sort_by?.expires_at
      ? {
          // A key that never expires sorts after every date. Explicit, because SQLite and
          // PostgreSQL place NULLs at opposite ends by default.
          expires_at:
            q.sort_by.expires_at === 'asc'
              ? { direction: 'ASC', nulls: 'LAST' }
              : { direction: 'DESC', nulls: 'FIRST' },
          id: 'ASC',
        }
      : { id: 'ASC' };
    const rows = await this.ctx.db.read((em) =>
      em.find(ApiKeyEntity, { where, order, skip: w.offset, take: w.perPage + 1 }),
    );
    return this.ctx.paginator.page(
      w,
      rows.map((r) => this.view(r)),
    );
  }

  /** get shows one key of the caller (any key to site admins). */
  async get(p: Principal, id: number): Promise<ApiKey> {
    requireFullKey(p);
    const row = await this.ctx.db.read((em) => em.findOneBy(ApiKeyEntity, { id }));
    if (!row || (!isSiteAdmin(p) && row.user_id !== p.user?.id))
      throw new GatewayError('not-found/api-key-not-found', `API key ${id} not found`);
    return this.view(row);
  }

  /** current shows the key the request authenticated with (SPEC GET /api_key). */
  current(p: Principal): ApiKey {
    if (!p.apiKey)
      throw new GatewayError(
        'not-authorized/must-authenticate-with-api-key',
        'This request must use an API key',
      );
    return this.view(p.apiKey);
  }

  /**
   * create issues a key for the caller, or for `user_id` when a site admin names one. Sessions
   * must reauthenticate. The returned view carries `key`, never shown again.
   */
  async create(p: Principal, input: unknown, reauthentication?: string): Promise<ApiKey> {
    requireFullKey(p);
    const data = parseFields(apiKeyCreateSchema, input);
    const owner = data.user_id && data.user_id !== 0 ? data.user_id : (p.user?.id ?? null);
    if (owner === null) {
      throw modelSaveError({
        user_id: ["can't be blank: site-wide keys are made with svc-gateway api-keys create --site-wide"],
      });
    }
    if (owner !== p.user?.id && !isSiteAdmin(p)) {
      throw new GatewayError(
        'not-authorized/user-id-without-site-admin',
        'Only site admins create keys for other users',
      );
    }
    await checkReauthentication(this.ctx, p, reauthentication);
    return this.ctx.db.work(async (em) => {
      if (!(await em.existsBy(UserEntity, { id: owner })))
        throw modelSaveError({ user_id: ['does not name an existing user'] });
      const { row, key } = await this.insert(em, owner, data);
      await recordAction(em, p, {
        action: 'api_key_create',
        display: `Created API key ${row.descriptive_label}`,
        targets: [{ type: 'api_key', id: row.id, user_id: owner }],
      });
      return { ...this.view(row), key };
    });
  }

  /** createSiteWide issues a key with no owner and full permissions (the CLI's --site-wide). */
  async createSiteWide(name: string): Promise<ApiKey> {
    return this.ctx.db.work(async (em) => {
      const { row, key } = await this.insert(em, null, { name, permission_set: 'full' });
      await recordAction(em, null, {
        action: 'api_key_create',
        interface: 'restapi',
        display: `Created site-wide API key ${row.descriptive_label}`,
      });
      return { ...this.view(row), key };
    });
  }

  /** remove deletes a key (owner or site admin). */
  async remove(p: Principal, id: number): Promise<void> {
    requireFullKey(p);
    await this.ctx.db.work(async (em) => {
      const row = await em.findOneBy(ApiKeyEntity, { id });
      if (!row || (!isSiteAdmin(p) && row.user_id !== p.user?.id))
        throw new GatewayError('not-found/api-key-not-found', `API key ${id} not found`);
      await em.delete(ApiKeyEntity, { id });
      await recordAction(em, p, {
        action: 'api_key_destroy',
        display: `Deleted API key ${row.descriptive_label}`,
        targets: [{ type: 'api_key', id }],
      });
    });
    this.ctx.credentials.clear();
  }

  /**
   * lookup finds a live key by its text with its owner, refreshing last_use_at at most once per
   * 3 hours. Verified keys are kept in the credential cache for a few seconds.
   */
  async lookup(key: string): Promise<CachedKey | null> {
    if (!/^[0-9a-f]{64}$/.test(key)) return null;
    const digest = digestKey(key);
    const now = Date.now();
    const cached = this.ctx.credentials.get(digest);
    if (cached) return cached.row.expires_at && cached.row.expires_at.getTime() <= now ? null : cached;
    const generation = this.ctx.credentials.generation;
    const found = await this.ctx.db.read(async (em) => {
      const r = await em.findOneBy(ApiKeyEntity, { key_digest: digest });
      const o = r?.user_id != null ? await em.findOneBy(UserEntity, { id: r.user_id }) : null;
      return r ? { row: r, owner: o } : null;
    });
    // A key whose owner is gone is no key (the row cascades away; this covers the race).
    if (!found || (found.row.user_id !== null && !found.owner)) return null;
    const row = found.row;
    if (row.expires_at && row.expires_at.getTime() <= now) return null;
    if (!row.last_use_at || now - row.last_use_at.getTime() > LAST_USE_REFRESH_MS) {
      row.last_use_at = new Date(now);
      await this.ctx.db.work((em) =>
        em.update(ApiKeyEntity, { id: row.id }, { last_use_at: row.last_use_at }),
      );
    }
    this.ctx.credentials.set(digest, found, generation);
    return found;
  }

  private async insert(
    em: EntityManager,
    owner: number | null,
    data: {
      name?: string | undefined;
      description?: string | undefined;
      expires_at?: Date | null | undefined;
      permission_set?: string | undefined;
      platform?: string | undefined;
    },
  ): Promise<{ row: ApiKeyRow; key: string }> {
    const key = randomBytes(32).toString('hex');
    const row = await em.save(
      ApiKeyEntity,
      em.create(ApiKeyEntity, {
        user_id: owner,
        key_digest: digestKey(key),
        key_prefix: key.slice(0, 8),
        // Unique and recognisable without revealing the key: its first and last characters.
        descriptive_label: `${key.slice(0, 6)}...${key.slice(-4)}`,
        description: data.description ?? '',
        name: data.name ?? '',
        permission_set: data.permission_set ?? 'full',
        platform: data.platform ?? '',
        created_at: new Date(),
        expires_at: data.expires_at ?? null,
        last_use_at: null,
      }),
    );
    return { row, key };
  }

  private view(r: ApiKeyRow): ApiKey {
    return {
      id: r.id,
      descriptive_label: r.descriptive_label,
      description: r.description,
      created_at: r.created_at,
      expires_at: r.expires_at,
      last_use_at: r.last_use_at,
      name: r.name,
      permission_set: r.permission_set,
      platform: r.platform,
      url: this.ctx.config.public_url,
      user_id: r.user_id,
    };
  }
}
