/** SPEC "History (recent actions)": the last 24 hours of Actions by file, folder, user, login, or all. */
import type { Core } from '../../../src/core/index.ts';
import { idParam, principal, query, sendPage, type RestContext, type RestRouter } from '../http.ts';

/** historyRoutes registers /history and its file, folder, user and login forms. */
export function historyRoutes(router: RestRouter, core: Core): void {
  // The rest of the URL is the path, percent-decoded by the router; none is the site root. server.ts
  // keeps a `.json`/`.xml` there as part of the name, as on /files and /folders.
  router.get('/history/files{/*path}', async (ctx: RestContext) => {
    sendPage(ctx, await core.history.files(principal(ctx), ctx.params.path ?? '', query(ctx)), 'actions');
  });
  router.get('/history/folders{/*path}', async (ctx: RestContext) => {
    sendPage(ctx, await core.history.folders(principal(ctx), ctx.params.path ?? '', query(ctx)), 'actions');
  });
  router.get('/history/users/:id', async (ctx: RestContext) => {
    const id = idParam(ctx, 'not-found/user-not-found');
    sendPage(ctx, await core.history.users(principal(ctx), id, query(ctx)), 'actions');
  });
  router.get('/history/login', async (ctx: RestContext) => {
    sendPage(ctx, await core.history.login(principal(ctx), query(ctx)), 'actions');
  });
  router.get('/history', async (ctx: RestContext) => {
    sendPage(ctx, await core.history.all(principal(ctx), query(ctx)), 'actions');
  });
}
