/**
 * WebDAV dead properties (RFC 4918 §4, PROPPATCH), kept in the database by site path so every
 * instance sees them. They follow their file through MOVE and COPY and go with it on DELETE, in
 * the same unit of work as the namespace change (FileSession calls the hooks below).
 */
import type { EntityManager } from 'typeorm';
import { DavPropertyEntity, FileEntity } from '../../db/entities.ts';
import { bytewise, inside, insideMarked, kindOf, marks, sql } from '../../db/sql.ts';
import { requireCapability } from '../access/rights.ts';
import type { CoreContext } from '../context.ts';
import type { BlobStore } from './blobstore.ts';
import { GatewayError } from '../errors.ts';
import { joinPath } from '../paths.ts';
import { deleteLocksUnder, requireUnlocked } from './locks.ts';
import { getRow, inSubtree } from './namespace.ts';
import { ownerOf, pendingBytes } from './pending.ts';
import type { SessionScope } from './scope.ts';

/** DeadProperty is one stored property: its qualified name and its content as XML. */
export interface DeadProperty {
  namespace: string;
  name: string;
  value: string;
}

/** PropertyChange is one instruction of a PROPPATCH, applied in document order. */
export type PropertyChange =
  | { op: 'set'; namespace: string; name: string; value: string }
  | { op: 'remove'; namespace: string; name: string };

/** MAX_PROPERTY_BYTES bounds one property's value. */
export const MAX_PROPERTY_BYTES = 64 * 1024;

/** forgetDav drops the dead properties and locks of `site` and below (DELETE, overwritten destination). */
export async function forgetDav(em: EntityManager, site: string): Promise<void> {
  await em.delete(DavPropertyEntity, { path: site });
  await em
    .createQueryBuilder()
    .delete()
    .from(DavPropertyEntity)
    .where(...inside(em, 'path', site))
    .execute();
  await deleteLocksUnder(em, site);
}

/** moveDav carries the dead properties of a moved subtree to its new paths; its locks stay behind and go. */
export async function moveDav(em: EntityManager, from: string, to: string): Promise<void> {
  await em.update(DavPropertyEntity, { path: from }, { path: to });
  const n = [...`${from}/`].length;
  await em
    .createQueryBuilder()
    .update(DavPropertyEntity)
    .set({ path: () => `:toPrefix || substr(path, ${n + 1})` })
    .where(...inside(em, 'path', from))
    .setParameters({ toPrefix: `${to}/` })
    .execute();
  await deleteLocksUnder(em, from);
}

/**
 * copyDav copies the dead properties of a copied subtree (locks are never copied), inside the
 * database: one INSERT … SELECT for the folder's own and one for everything below it.
 */
export async function copyDav(em: EntityManager, from: string, to: string): Promise<void> {
  await sql(
    em,
    'INSERT INTO dav_properties (path, namespace, name, value) ' +
      'SELECT ?, namespace, name, value FROM dav_properties WHERE path = ?',
    [to, from],
  );
  const n = [...`${from}/`].length;
  const [test, bounds] = insideMarked(em, 'path', from);
  await sql(
    em,
    'INSERT INTO dav_properties (path, namespace, name, value) ' +
      `SELECT ? || substr(path, ${n + 1}), namespace, name, value FROM dav_properties WHERE ${test}`,
    [`${to}/`, ...bounds],
  );
}

/** Properties reads and changes dead properties, and tells a session's quota figures (RFC 4331). */
export class Properties {
  constructor(
    private readonly ctx: CoreContext,
    private readonly store: BlobStore,
  ) {}

  /**
   * anyInside tells whether anything inside a folder of the session, at any depth, has dead
   * properties: one probe of a path index (migration 0015), so that PROPFIND reads them page by
   * page (getMany) only for folders where some clients stored any.
   */
  async anyInside(session: SessionScope, folder: string): Promise<boolean> {
    const site = joinPath(session.root, folder);
    const rows = await this.ctx.db.read((em) => {
      // Inside the root: every path but ''.
      const [where, params] =
        site === '' ? [`${bytewise(kindOf(em), 'path')} > ?`, ['']] : insideMarked(em, 'path', site);
      return sql(em, `SELECT 1 AS found FROM dav_properties WHERE ${where} LIMIT 1`, params);
    });
    return rows.length > 0;
  }

  /**
   * getMany reads the dead properties of several entries of one session (a PROPFIND page): their
   * paths as entries carry them, already normalized, so each is only joined to the session's root.
   */
  async getMany(session: SessionScope, paths: string[]): Promise<Map<string, DeadProperty[]>> {
    const bySite = new Map(paths.map((p) => [joinPath(session.root, p), p]));
    const out = new Map<string, DeadProperty[]>(paths.map((p) => [p, []]));
    if (!paths.length) return out;
    const sites = [...bySite.keys()];
    const rows = await this.ctx.db.read((em) =>
      sql<{ path: string; namespace: string; name: string; value: string }>(
        em,
        `SELECT path, namespace, name, value FROM dav_properties WHERE path IN (${marks(sites.length)}) ORDER BY id`,
        sites,
      ),
    );
    for (const r of rows)
      out.get(bySite.get(r.path)!)!.push({ namespace: r.namespace, name: r.name, value: r.value });
    return out;
  }

  /**
   * patch applies PROPPATCH's changes in order, all or none, to an existing file or folder; it
   * needs write permission, and a WebDAV lock on the path binds it as it binds any write.
   */
  async patch(session: SessionScope, path: string, changes: PropertyChange[]): Promise<void> {
    for (const c of changes) {
      if (c.name.length > 255 || c.namespace.length > 1024)
        throw new GatewayError('bad-request/request-params-invalid', 'The property name is too long');
      if (c.op === 'set' && Buffer.byteLength(c.value) > MAX_PROPERTY_BYTES)
        throw new GatewayError('bad-request/request-params-invalid', 'The property value is too large');
    }
    const site = session.site(path);
    await this.ctx.db.work(async (em) => {
      await requireCapability(em, session.principal, 'write', site);
      await requireUnlocked(em, session.principal, session.lockTokens, site, {
        show: (s) => session.visible(s),
      });
      if (!(await getRow(em, site)))
        throw new GatewayError('not-found/file-not-found', `/${session.visible(site)} does not exist`);
      for (const c of changes) {
        const key = { path: site, namespace: c.namespace, name: c.name };
        await em.delete(DavPropertyEntity, key);
        if (c.op === 'set') await em.insert(DavPropertyEntity, { ...key, value: c.value });
      }
    });
  }

  /**
   * quota is RFC 4331's pair for a session's tree: the bytes its files hold, and the bytes that
   * can still be stored (the blob store's free space), or null when the store cannot tell.
   */
  async quota(session: SessionScope): Promise<{ used: number; available: number | null }> {
    const root = session.root;
    const used = await this.ctx.db.read(async (em) => {
      const qb = inSubtree(
        em.getRepository(FileEntity).createQueryBuilder('f').select('COALESCE(SUM(f.size), 0)', 'total'),
        'f',
        root,
      );
      const raw = await qb.getRawOne<{ total: string | number }>();
      // The user's pending versions (cut uploads kept for resuming) take space too.
      return Number(raw?.total ?? 0) + (await pendingBytes(em, ownerOf(session.principal), root));
    });
    return { used, available: (await this.store.freeBytes?.()) ?? null };
  }
}
