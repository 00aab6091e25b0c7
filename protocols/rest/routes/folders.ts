/** SPEC "Folders": list a folder's contents (paged, sorted, searched), create a folder. */
import { GatewayError, type Core } from '../../../src/core/index.ts';
import { principal, query, send, sendEmpty, type RestContext, type RestRouter } from '../http.ts';
import { urlPath } from '../paths.ts';
import { pageParams } from '../../shared/url-params.ts';

const sortKeys = { path: 'path', size: 'size', modified_at_datetime: 'mtime' } as const;

function listOptions(q: Record<string, unknown>) {
  let sort: 'path' | 'size' | 'mtime' = 'path';
  let direction: 'asc' | 'desc' = 'asc';
  const sortBy = q.sort_by;
  if (sortBy !== undefined) {
    const entries = typeof sortBy === 'object' && sortBy !== null ? Object.entries(sortBy) : [];
    const [field, dir] = entries[0] ?? [];
    if (entries.length !== 1 || !(field! in sortKeys) || (dir !== 'asc' && dir !== 'desc')) {
      throw new GatewayError(
        'bad-request/invalid-filter-field',
        'sort_by takes one of path, size, modified_at_datetime with asc or desc',
      );
    }
    sort = sortKeys[field as keyof typeof sortKeys];
    direction = dir;
  }
  const search = typeof q.search === 'string' && q.search !== '' ? q.search : undefined;
  return { sort, direction, search, ...pageParams(q) };
}

/** folderRoutes registers /folders. */
export function folderRoutes(router: RestRouter, core: Core): void {
  const list = async (ctx: RestContext) => {
    const session = core.files.session(principal(ctx));
    const path = urlPath(ctx, '/folders');
    // Our extension: what the caller may do in this folder, so a client offers only that. Set
    // first, so a refused listing says it too (a writeonly folder still takes uploads).
    ctx.set('X-Svc-Rights', (await session.rights(path)).join(', '));
    const entries = await session.list(path, listOptions(query(ctx)));
    send(ctx, 200, entries, 'files');
  };
  router.get('/folders{/*path}', list);
  router.post('/folders{/*path}', async (ctx: RestContext) => {
    await core.files.session(principal(ctx)).mkdir(urlPath(ctx, '/folders'), { parents: true });
    sendEmpty(ctx, 201);
  });
}
