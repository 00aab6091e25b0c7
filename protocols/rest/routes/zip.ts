/**
 * Our extension: GET /zip/<folder> streams the folder (or, with `entries[]=<name>`, some of its
 * entries) as one zip (protocols/shared/zip.ts): each file through the core (read permission, a
 * `read` Action per file), written as the client takes it.
 */
import contentDisposition from 'content-disposition';
import { GatewayError, type Core } from '../../../src/core/index.ts';
import { streamZip } from '../../shared/zip.ts';
import { principal, query, type RestContext, type RestRouter } from '../http.ts';
import { urlPath } from '../paths.ts';

const nameOf = (path: string) => path.slice(path.lastIndexOf('/') + 1);

/** entriesParam reads `entries[]` (names inside the folder), or null for the whole folder. */
function entriesParam(q: Record<string, unknown>): string[] | null {
  const raw = q.entries;
  if (raw === undefined) return null;
  const list = Array.isArray(raw) ? raw : typeof raw === 'object' && raw ? Object.values(raw) : [raw];
  if (list.length === 0 || list.some((n) => typeof n !== 'string' || n === '' || n.includes('/')))
    throw new GatewayError('bad-request/request-params-invalid', 'entries[] takes names inside the folder');
  return [...new Set(list as string[])];
}

/** zipRoutes registers /zip. */
export function zipRoutes(router: RestRouter, core: Core): void {
  router.get('/zip{/*path}', async (ctx: RestContext) => {
    const session = core.files.session(principal(ctx));
    const folder = urlPath(ctx, '/zip').replace(/\/+$/, '');
    const names = entriesParam(query(ctx));
    // Refusals come before the first byte, while they can still be an error status.
    if (folder && (await session.stat(folder)).type !== 'directory')
      throw new GatewayError('bad-request/folder-must-not-be-a-file', `/${folder} is a file, not a folder`);
    await session.requireDownload(folder);
    const top = names && (await Promise.all(names.map((n) => session.stat(folder ? `${folder}/${n}` : n))));

    const abort = new AbortController();
    ctx.req.once('close', () => abort.abort());
    const source = {
      listAll: session.listAll.bind(session),
      openRead: async (path: string, signal: AbortSignal) =>
        (await session.openRead(path, { signal })).stream,
    };
    const zip = await streamZip(source, {
      folder,
      top,
      prefix: folder ? `${folder}/` : '',
      signal: abort.signal,
    });
    ctx.status = 200;
    ctx.type = 'application/zip';
    ctx.set('Content-Disposition', contentDisposition(`${folder ? nameOf(folder) : 'files'}.zip`));
    ctx.set('Cache-Control', 'no-store');
    ctx.body = zip;
  });
}
