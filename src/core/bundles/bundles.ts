/**
 * Share links (issue 14; SPEC names "bundles" among its further resources, fields ours). A bundle
 * is one user's link to one or more paths, opened without an account through a random code in
 * its URL. Its kind says what recipients may do:
 *
 *   download  list the shared items and what is inside them, download files, or all as one zip
 *   preview   list names, sizes and dates only; every download is `bundle-only-allows-previews`
 *   upload    upload files into the one shared folder; nothing is listed or downloaded
 *
 * Every use runs as the sharer, through the same access rules as their own requests (a
 * FileSession of a principal with the sharer's user, interface `web` and the recipient's client
 * address): a sharer who loses the right on a path, loses `attachments_permission` or is deleted
 * takes the link down with them at its next use. What counts as a use (`uses`, `max_uses`): each
 * file downloaded, each zip, each file uploaded, and for a preview link (where there is nothing
 * else to do) each opening. Opening a download or upload link is recorded but not counted.
 */
import { createHash, randomBytes } from 'node:crypto';
import type { Readable } from 'node:stream';
import type { EntityManager } from 'typeorm';
import { z } from 'zod';
import { BundleEntity, UserEntity, type BundleKind, type BundleRow } from '../../db/entities.ts';
import { hashPassword, PASSWORD_MAX_BYTES, verifyPassword } from '../accounts/passwords.ts';
import { clientIp } from '../access/allowed-ips.ts';
import { requireFullKey } from '../access/guards.ts';
import { rightsOnEach } from '../access/rights.ts';
import { failedLoginsFrom } from '../actions/failed-logins.ts';
import { recordAction } from '../actions/record.ts';
import type { CoreContext } from '../context.ts';
import { GatewayError, modelSaveError } from '../errors.ts';
import type { Files } from '../files/files.ts';
import { getRow, toEntry, type Entry, type ListOptions } from '../files/namespace.ts';
import type { FileSession } from '../files/session.ts';
import { Signer } from '../files/signed.ts';
import type { Page, PageRequest } from '../pagination.ts';
import { baseName, joinPath, MAX_PATH, normalizeFilePath } from '../paths.ts';
import { isSiteAdmin, type Principal } from '../principal.ts';
import { dateTime, int, parseFields, text } from '../validation.ts';

/** bundleKinds are the kinds of share link. */
export const bundleKinds = ['download', 'preview', 'upload'] as const satisfies readonly BundleKind[];

/** MAX_BUNDLE_PATHS is how many paths one share link may name. */
export const MAX_BUNDLE_PATHS = 100;
/** GRANT_TTL_S is how long an accepted password opens its link (the recipient's cookie). */
export const GRANT_TTL_S = 3600;

const password = text()
  .refine((v) => v.length > 0, { error: "can't be blank (leave it out for a link without password)" })
  .refine((v) => Buffer.byteLength(v) <= PASSWORD_MAX_BYTES, {
    error: `is too long (maximum is ${PASSWORD_MAX_BYTES} bytes)`,
  });
const maxUses = z
  .union([z.null(), z.literal('').transform(() => null), int])
  .refine((v) => v === null || v >= 1, {
    error: 'must be at least 1 (or null for no limit)',
  });
const sitePath = text(MAX_PATH);

/** bundleCreateSchema is the request body of POST /bundles. */
export const bundleCreateSchema = z.object({
  /** the site paths to share: an array, or one path as a string */
  paths: z.union([z.array(sitePath).min(1, { error: "can't be blank" }), sitePath.transform((v) => [v])], {
    error: 'must be a path or an array of paths',
  }),
  kind: z.enum(bundleKinds, { error: `must be one of ${bundleKinds.join(', ')}` }).optional(),
  password: password.optional(),
  expires_at: dateTime.optional(),
  max_uses: maxUses.optional(),
  description: text(1000).optional(),
});

/** bundleUpdateSchema is the request body of PATCH /bundles/:id (a password of '' removes it). */
export const bundleUpdateSchema = z.object({
  expires_at: dateTime.optional(),
  max_uses: maxUses.optional(),
  uses: int.refine((v) => v >= 0, { error: 'must not be negative' }).optional(),
  description: text(1000).optional(),
  password: z.union([z.literal(''), password]).optional(),
});

const listSchema = z.object({ user_id: int.optional() });

/** Bundle is a share link as the API shows it to its owner (and site admins). */
export interface Bundle {
  id: number;
  code: string;
  url: string;
  paths: string[];
  kind: BundleKind;
  description: string;
  expires_at: Date | null;
  max_uses: number | null;
  uses: number;
  has_password: boolean;
  created_at: Date;
  user_id: number;
}

/** BundleSummary is what a recipient learns of a link when opening it. */
export interface BundleSummary {
  kind: BundleKind;
  description: string;
  expires_at: Date | null;
  /** uses left before the link is used up, or null for no limit */
  uses_left: number | null;
  /** the shared items, by name (an upload link: its folder's name only) */
  entries: Entry[];
}

const needed: Record<BundleKind, 'read' | 'list' | 'write'> = {
  download: 'read',
  // A preview shows the bytes (an image, a PDF, text): sharing one needs read, as a download does.
  preview: 'read',
  upload: 'write',
};
const missingType = {
  read: 'not-authorized/read-permission-required',
  list: 'not-authorized/read-permission-required',
  write: 'not-authorized/write-permission-required',
} as const;

/**
 * requireBundleKey lets through full keys and, as SPEC says of them, desktop-app keys (which do
 * "the desktop application's file and share-link functions"); other restricted keys are refused.
 */
function requireBundleKey(p: Principal): void {
  if (p.apiKey?.permission_set !== 'desktop_app') requireFullKey(p);
}

/** Bundles creates, lists, changes and revokes share links, and opens them for recipients. */
export class Bundles {
  private readonly grants: Signer;

  constructor(
    private readonly ctx: CoreContext,
    private readonly files: Files,
  ) {
    this.grants = new Signer(ctx.secret, 'bundle-grant');
  }

  /**
   * create makes a share link of the caller's: they need `attachments_permission` (or to be a
   * site admin), and the right the kind uses on every path (read; list for preview; write on the
   * one folder of an upload link).
   */
  async create(p: Principal, input: unknown): Promise<Bundle> {
    requireBundleKey(p);
    const owner = p.user;
    if (!owner || !(owner.attachments_permission || owner.site_admin))
      throw new GatewayError(
        'not-authorized/not-allowed-to-create-bundle',
        owner
          ? 'You need the attachments permission to share files'
          : 'A share link belongs to a user: use a user’s key or session',
      );
    const data = parseFields(bundleCreateSchema, input);
    const kind = data.kind ?? 'download';
    const paths = await this.checkPaths(p, data.paths, kind);
    if (data.expires_at && data.expires_at.getTime() <= Date.now())
      throw modelSaveError({ expires_at: ['must be in the future'] });
    const hash = data.password
      ? await hashPassword(data.password, this.ctx.config.accounts.bcrypt_rounds)
      : null;
    return this.ctx.db.work(async (em) => {
      const row = await em.save(
        BundleEntity,
        em.create(BundleEntity, {
          user_id: owner.id,
          // 16 random bytes: 22 base64url characters, not guessable.
          code: randomBytes(16).toString('base64url'),
          kind,
          paths: JSON.stringify(paths),
          password_hash: hash,
          description: data.description ?? '',
          expires_at: data.expires_at ?? null,
          max_uses: data.max_uses ?? null,
          uses: 0,
          created_at: new Date(),
        }),
      );
      await recordAction(em, p, {
        action: 'bundle_create',
        path: paths[0],
        display: `Created ${kind} share link ${row.id} of ${paths.map((x) => `/${x}`).join(', ')}`,
        targets: [{ type: 'bundle', id: row.id, kind, paths }],
      });
      return this.view(row);
    });
  }

  /** checkPaths normalizes the paths to share and checks they exist and the caller may share them. */
  private async checkPaths(p: Principal, given: string[], kind: BundleKind): Promise<string[]> {
    if (given.length > MAX_BUNDLE_PATHS)
      throw modelSaveError({ paths: [`may name at most ${MAX_BUNDLE_PATHS} paths`] });
    const paths = [...new Set(given.map((x) => normalizeFilePath(x)))];
    if (paths.includes(''))
      throw modelSaveError({ paths: ['must not be the site root: share the folders or files in it'] });
    const names = new Set(paths.map(baseName));
    if (names.size !== paths.length)
      throw modelSaveError({ paths: ['must have different names: recipients see each by its name'] });
    if (kind === 'upload' && paths.length !== 1)
      throw new GatewayError(
        'processing-failure/bundle-operation-requires-subfolder',
        'An upload link shares exactly one folder',
      );
    const cap = needed[kind];
    await this.ctx.db.read(async (em) => {
      const rights = await rightsOnEach(em, p, paths);
      for (const path of paths) {
        if (!rights.get(path)!.has(cap))
          throw new GatewayError(missingType[cap], `You need ${cap} permission on /${path} to share it`);
        const row = await getRow(em, path);
        if (!row) throw new GatewayError('not-found/bundle-path-not-found', `/${path} does not exist`);
        if (kind === 'upload' && row.type !== 'directory')
          throw new GatewayError(
            'processing-failure/bundle-operation-requires-subfolder',
            `/${path} is a file: an upload link shares a folder`,
          );
      }
    });
    return paths;
  }

  /** list shows the caller's links (a site admin: everyone's, or one user's with `user_id`). */
  async list(p: Principal, req: PageRequest & Record<string, unknown>): Promise<Page<Bundle>> {
    requireBundleKey(p);
    const q = parseFields(listSchema, req);
    let owner: number | null;
    if (isSiteAdmin(p)) owner = q.user_id ?? null;
    else {
      if (q.user_id !== undefined && q.user_id !== p.user?.id)
        throw new GatewayError(
          'not-authorized/cant-act-for-other-user',
          'Only site admins list others’ links',
        );
      owner = p.user!.id;
    }
    const w = this.ctx.paginator.window(`bundles:${owner ?? 'all'}`, req);
    const rows = await this.ctx.db.read((em) =>
      em.find(BundleEntity, {
        where: owner === null ? {} : { user_id: owner },
        order: { id: 'ASC' },
        skip: w.offset,
        take: w.perPage + 1,
      }),
    );
    return this.ctx.paginator.page(
      w,
      rows.map((r) => this.view(r)),
    );
  }

  /** get shows one of the caller's links (any link to a site admin). */
  async get(p: Principal, id: number): Promise<Bundle> {
    requireBundleKey(p);
    return this.view(await this.ctx.db.read((em) => this.own(em, p, id)));
  }

  private async own(em: EntityManager, p: Principal, id: number): Promise<BundleRow> {
    const row = await em.findOneBy(BundleEntity, { id });
    if (!row || (!isSiteAdmin(p) && row.user_id !== p.user?.id))
      throw new GatewayError('not-found/bundle-not-found', `Share link ${id} not found`);
    return row;
  }

  /** update changes a link's expiry, maximum uses, use count, description or password. */
  async update(p: Principal, id: number, input: unknown): Promise<Bundle> {
    requireBundleKey(p);
    const data = parseFields(bundleUpdateSchema, input);
    const hash =
      data.password === undefined
        ? undefined
        : data.password === ''
          ? null
          : await hashPassword(data.password, this.ctx.config.accounts.bcrypt_rounds);
    return this.ctx.db.work(async (em) => {
      const row = await this.own(em, p, id);
      const changes: Partial<BundleRow> = {};
      if (data.expires_at !== undefined) changes.expires_at = data.expires_at;
      if (data.max_uses !== undefined) changes.max_uses = data.max_uses;
      if (data.uses !== undefined) changes.uses = data.uses;
      if (data.description !== undefined) changes.description = data.description;
      if (hash !== undefined) changes.password_hash = hash;
      if (Object.keys(changes).length) await em.update(BundleEntity, { id }, changes);
      await recordAction(em, p, {
        action: 'bundle_update',
        path: (JSON.parse(row.paths) as string[])[0] ?? '',
        display: `Changed share link ${id}: ${Object.keys(data).join(', ') || 'nothing'}`,
        targets: [{ type: 'bundle', id }],
      });
      return this.view({ ...row, ...changes });
    });
  }

  /** remove revokes a link: its URL stops working at once. */
  async remove(p: Principal, id: number): Promise<void> {
    requireBundleKey(p);
    await this.ctx.db.work(async (em) => {
      const row = await this.own(em, p, id);
      await em.delete(BundleEntity, { id });
      await recordAction(em, p, {
        action: 'bundle_destroy',
        path: (JSON.parse(row.paths) as string[])[0] ?? '',
        display: `Revoked share link ${id}`,
        targets: [{ type: 'bundle', id }],
      });
    });
  }

  /**
   * unlock checks a link's password for a recipient and returns a grant (the recipient's
   * short-lived cookie) that opens it for GRANT_TTL_S. A wrong password is `invalid-credentials`
   * and recorded as a `failedlogin` from the client address, which counts toward that address's
   * login rate limit (`too-many-login-attempts`) like any failed login.
   */
  async unlock(code: string, ip: string, given: string): Promise<string> {
    const addr = clientIp(ip);
    const { row } = await this.live(code);
    if (!row.password_hash) return this.grant(row);
    const { lockout } = this.ctx.config;
    const failures = await this.ctx.db.read((em) =>
      failedLoginsFrom(em, addr, new Date(Date.now() - lockout.ip_window_minutes * 60_000)),
    );
    if (failures >= lockout.ip_max_failures)
      throw new GatewayError(
        'rate-limited/too-many-login-attempts',
        `Passwords from this address are refused for up to ${lockout.ip_window_minutes} minutes after repeated failures`,
      );
    if (await verifyPassword(given, row.password_hash, this.ctx.config.accounts.bcrypt_rounds))
      return this.grant(row);
    await this.ctx.db.work((em) =>
      recordAction(em, null, {
        action: 'failedlogin',
        failure_type: 'password_mismatch',
        interface: 'web',
        ip: addr,
        display: `Wrong password for share link ${row.id}`,
        targets: [{ type: 'bundle', id: row.id }],
      }),
    );
    throw new GatewayError('not-authenticated/invalid-credentials', 'That password is not right');
  }

  private grant(row: BundleRow): string {
    return this.grants.sign({ b: row.id, h: passwordTag(row.password_hash) }, GRANT_TTL_S);
  }

  /**
   * visit opens a link for one recipient request: the code must name a live link (not revoked,
   * not expired, its sharer still allowed to share), and a link with a password needs the grant
   * `unlock` gave. Every operation of the visit then runs as the sharer.
   */
  async visit(code: string, ip: string, grant?: string): Promise<BundleVisit> {
    const { row, sharer } = await this.live(code);
    if (row.password_hash && !this.granted(row, grant))
      throw new GatewayError(
        'not-authenticated/authentication-required',
        'This share link needs its password',
      );
    const principal: Principal = {
      user: sharer,
      apiKey: null,
      sessionDigest: null,
      interface: 'web',
      ip: clientIp(ip),
    };
    return new BundleVisit(this.ctx, row, this.files.session(principal));
  }

  private granted(row: BundleRow, grant: string | undefined): boolean {
    if (!grant) return false;
    try {
      const c = this.grants.verify<{ b: number; h: string }>(grant);
      return c.b === row.id && c.h === passwordTag(row.password_hash);
    } catch {
      return false;
    }
  }

  /** live finds the link of `code` and its sharer, or says why the link does not work. */
  private async live(code: string) {
    if (!/^[A-Za-z0-9_-]{16,64}$/.test(code))
      throw new GatewayError('processing-failure/invalid-bundle-code', 'This is not a share link');
    const found = await this.ctx.db.read(async (em) => {
      const row = await em.findOneBy(BundleEntity, { code });
      const sharer = row ? await em.findOneBy(UserEntity, { id: row.user_id }) : null;
      return row && sharer ? { row, sharer } : null;
    });
    if (!found)
      throw new GatewayError(
        'processing-failure/invalid-bundle-code',
        'This share link does not exist or was revoked',
      );
    if (found.row.expires_at && found.row.expires_at.getTime() <= Date.now())
      throw new GatewayError('processing-failure/invalid-bundle-code', 'This share link has expired');
    if (!found.sharer.attachments_permission && !found.sharer.site_admin)
      throw new GatewayError(
        'not-authorized/not-allowed-to-create-bundle',
        'The person who shared this link may no longer share files',
      );
    return found;
  }

  private view(r: BundleRow): Bundle {
    return {
      id: r.id,
      code: r.code,
      url: `${this.ctx.config.public_url}/s/${r.code}`,
      paths: JSON.parse(r.paths) as string[],
      kind: r.kind,
      description: r.description,
      expires_at: r.expires_at,
      max_uses: r.max_uses,
      uses: r.uses,
      has_password: r.password_hash !== null,
      created_at: r.created_at,
      user_id: r.user_id,
    };
  }
}

/** passwordTag ties a grant to the password it was given for: a new password ends old grants. */
function passwordTag(hash: string | null): string {
  return createHash('sha256')
    .update(hash ?? '')
    .digest('base64url')
    .slice(0, 16);
}

/**
 * BundleVisit is one recipient request on a live link. Paths are the recipient's: each shared
 * item by its name, and what is inside it below that name. Errors never show the sharer's paths.
 */
export class BundleVisit {
  private readonly paths: string[];
  /** set once a zip counted its use: the walk that follows needs no further use */
  private paid = false;

  constructor(
    private readonly ctx: CoreContext,
    private readonly row: BundleRow,
    private readonly session: FileSession,
  ) {
    this.paths = JSON.parse(row.paths) as string[];
  }

  /** kind is what this link lets its recipients do. */
  get kind(): BundleKind {
    return this.row.kind;
  }

  /** name is what a zip of everything is called. */
  get name(): string {
    return this.paths.length === 1 ? baseName(this.paths[0]!) : 'shared-files';
  }

  /**
   * open describes the link to its recipient (recorded as a `read` Action; counted as a use of a
   * preview link). A used-up link is refused here already, so the page says so at once.
   */
  async open(): Promise<BundleSummary> {
    this.requireUsesLeft();
    const entries =
      this.row.kind === 'upload'
        ? [await this.uploadFolder()]
        : await this.guard(() => Promise.all(this.paths.map((p) => this.session.stat(p))));
    // Counted only once the link proved to work, so a refused opening spends nothing.
    if (this.row.kind === 'preview') await this.use('Opened');
    else await this.record('Opened');
    return {
      kind: this.row.kind,
      description: this.row.description,
      expires_at: this.row.expires_at,
      uses_left: this.row.max_uses === null ? null : Math.max(0, this.row.max_uses - this.row.uses),
      entries: entries.map((e) => this.shown(e)),
    };
  }

  /** list lists a folder of the link ('' for the shared items themselves). Not on upload links. */
  async list(path: string, opts: ListOptions): Promise<Entry[]> {
    if (this.row.kind === 'upload')
      throw new GatewayError('not-authorized/read-permission-required', 'This link only accepts uploads');
    this.requireUsesLeft();
    const rel = normalizeFilePath(path);
    if (rel === '') {
      const all = await this.guard(() => Promise.all(this.paths.map((p) => this.session.stat(p))));
      return all.map((e) => this.shown(e)).slice(opts.offset, opts.offset + opts.limit);
    }
    const site = this.site(rel);
    const entries = await this.guard(() => this.session.list(site, opts));
    if (!this.paid) await this.record('Listed', site);
    return entries.map((e) => this.shown(e));
  }

  /**
   * listAll reads every entry of a folder of the link a page at a time (the session's listAll,
   * keyset-paged), for a zip of everything; '' is the shared items themselves.
   */
  async *listAll(path: string, pageSize: number): AsyncGenerator<Entry[]> {
    if (this.row.kind === 'upload')
      throw new GatewayError('not-authorized/read-permission-required', 'This link only accepts uploads');
    this.requireUsesLeft();
    const rel = normalizeFilePath(path);
    if (rel === '') {
      const all = await this.guard(() => Promise.all(this.paths.map((p) => this.session.stat(p))));
      for (let i = 0; i < all.length; i += pageSize)
        yield all.slice(i, i + pageSize).map((e) => this.shown(e));
      return;
    }
    const site = this.site(rel);
    const pages = this.session.listAll(site, pageSize);
    if (!this.paid) await this.record('Listed', site);
    for (;;) {
      const next = await this.guard(() => pages.next());
      if (next.done) return;
      yield next.value.map((e) => this.shown(e));
    }
  }

  /**
   * openRead opens one file of a download link, counted as a use; preview links refuse with
   * `bundle-only-allows-previews`. With `preview` (the page shows the file in place) both kinds
   * may read it: counted as a use on a download link, not again on a preview link.
   */
  async openRead(path: string, opts: { signal?: AbortSignal; count?: boolean; preview?: boolean } = {}) {
    // A preview link's previews were paid for when it was opened; on a download link a preview
    // is a download.
    const counted = opts.count !== false && !(opts.preview && this.row.kind === 'preview');
    if (!opts.preview) this.requireDownloads();
    else if (this.row.kind === 'upload')
      throw new GatewayError('not-authorized/read-permission-required', 'This link only accepts uploads');
    const site = this.site(normalizeFilePath(path));
    if (counted) this.requireUsesLeft();
    const d = await this.guard(() => this.session.openRead(site, opts.signal ? { signal: opts.signal } : {}));
    if (counted) {
      try {
        // The file's own `read` Action is recorded by openRead.
        await this.use('Downloaded', site, false);
      } catch (err) {
        d.stream.destroy();
        throw err;
      }
    }
    return { ...d, entry: this.shown(d.entry) };
  }

  /**
   * startZip authorizes a zip of everything shared (read on each path, before the first byte) and
   * counts it as one use; the files are then opened with openRead(…, { count: false }).
   */
  async startZip(): Promise<void> {
    this.requireDownloads();
    this.requireUsesLeft();
    await this.guard(async () => {
      for (const p of this.paths) await this.session.requireDownload(p);
    });
    await this.use('Downloaded everything as a zip');
    this.paid = true;
  }

  /**
   * upload writes one file of an upload link into its folder, counted as a use. It never
   * replaces a file: the recipient cannot see what is there, so cannot mean to overwrite it.
   */
  async upload(name: string, body: Readable, signal?: AbortSignal): Promise<Entry> {
    if (this.row.kind !== 'upload') {
      body.resume();
      throw new GatewayError('not-authorized/write-permission-required', 'This link does not accept uploads');
    }
    const rel = normalizeFilePath(name);
    if (rel === '' || rel.includes('/')) {
      body.resume();
      throw new GatewayError('bad-request/invalid-path', 'Upload a file by its name only');
    }
    const site = joinPath(this.paths[0]!, rel);
    try {
      this.requireUsesLeft();
      const handle = await this.guard(() => this.session.openWrite(site));
      if (handle.existing) {
        await handle.abort();
        throw new GatewayError(
          'processing-failure/destination-exists',
          `A file named ${rel} is already there: rename yours and send it again`,
        );
      }
      try {
        // The upload's own `create` Action is recorded by the write pipeline at its commit.
        await this.use('Uploaded', site, false);
      } catch (err) {
        await handle.abort();
        throw err;
      }
      const entry = await handle.send(body, signal ? { signal } : {});
      return { ...entry, path: rel };
    } catch (err) {
      body.resume();
      throw err;
    }
  }

  private requireDownloads(): void {
    if (this.row.kind === 'preview')
      throw new GatewayError(
        'processing-failure/bundle-only-allows-previews',
        'This link lets you see the files, not download them',
      );
    if (this.row.kind === 'upload')
      throw new GatewayError('not-authorized/read-permission-required', 'This link only accepts uploads');
  }

  private requireUsesLeft(): void {
    if (this.paid) return;
    if (this.row.max_uses !== null && this.row.uses >= this.row.max_uses)
      throw new GatewayError(
        'not-authorized/bundle-maximum-uses-reached',
        'This share link has been used up',
      );
  }

  /**
   * use counts one use, if one is left (one conditional UPDATE, so simultaneous recipients never
   * pass the limit together), and records it as a `read` Action of the link.
   */
  private async use(what: string, site?: string, record = true): Promise<void> {
    const ok = await this.ctx.db.work(async (em) => {
      const r = await em
        .createQueryBuilder()
        .update(BundleEntity)
        .set({ uses: () => 'uses + 1' })
        .where('id = :id AND (max_uses IS NULL OR uses < max_uses)', { id: this.row.id })
        .execute();
      if (!r.affected) return false;
      if (record) await this.recordIn(em, what, site);
      return true;
    });
    if (!ok)
      throw new GatewayError(
        'not-authorized/bundle-maximum-uses-reached',
        'This share link has been used up',
      );
    this.row.uses += 1;
  }

  private record(what: string, site?: string): Promise<void> {
    return this.ctx.db.work((em) => this.recordIn(em, what, site));
  }

  private recordIn(em: EntityManager, what: string, site?: string): Promise<void> {
    return recordAction(em, this.session.principal, {
      action: 'read',
      path: site ?? this.paths[0] ?? '',
      display: `${what} through share link ${this.row.id}`,
      targets: [{ type: 'bundle', id: this.row.id }],
    });
  }

  /** uploadFolder checks the sharer may still write into the folder of an upload link. */
  private async uploadFolder(): Promise<Entry> {
    const folder = this.paths[0]!;
    return this.guard(async () => {
      const caps = await this.session.rights(folder);
      if (!caps.includes('write'))
        throw new GatewayError('not-authorized/write-permission-required', 'no write');
      const row = await this.ctx.db.read((em) => getRow(em, folder));
      if (row?.type !== 'directory') throw new GatewayError('not-found/folder-not-found', 'gone');
      return toEntry(row, folder);
    });
  }

  /** site maps a recipient's path (`name/inside`) to the site path. */
  private site(rel: string): string {
    const slash = rel.indexOf('/');
    const name = slash < 0 ? rel : rel.slice(0, slash);
    const top = this.paths.find((p) => baseName(p) === name);
    if (!top || rel === '')
      throw new GatewayError(
        'not-found/bundle-path-not-found',
        `${rel || '/'} is not part of this share link`,
      );
    return slash < 0 ? top : joinPath(top, rel.slice(slash + 1));
  }

  /** shown maps an entry's site path to the recipient's path. */
  private shown(e: Entry): Entry {
    const top = this.paths.find((p) => e.path === p || e.path.startsWith(`${p}/`));
    return { ...e, path: top === undefined ? baseName(e.path) : baseName(top) + e.path.slice(top.length) };
  }

  /**
   * guard runs a file operation as the sharer and rewords its refusals: the recipient learns that
   * the link no longer reaches the item, never the sharer's paths or rights.
   */
  private async guard<T>(fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      if (!(err instanceof GatewayError)) throw err;
      if (err.family === 'not-authorized')
        throw new GatewayError(err.type, 'The person who shared this link no longer has access to it');
      if (err.type === 'not-found/file-not-found' || err.type === 'not-found/folder-not-found')
        throw new GatewayError('not-found/bundle-path-not-found', 'This item is no longer shared here');
      throw err;
    }
  }
}
