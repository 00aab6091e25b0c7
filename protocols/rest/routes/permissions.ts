/** SPEC "Permissions". */
import type { Core } from '../../../src/core/index.ts';
import {
  body,
  idParam,
  principal,
  query,
  send,
  sendEmpty,
  sendPage,
  type RestContext,
  type RestRouter,
} from '../http.ts';

/** permissionRoutes registers /permissions. */
export function permissionRoutes(router: RestRouter, core: Core): void {
  router.get('/permissions', async (ctx: RestContext) => {
    sendPage(ctx, await core.permissions.list(principal(ctx), query(ctx)), 'permissions');
  });
  // Our extension: what a user may do on a path, with the grant that gives each capability.
  router.get('/permissions/effective', async (ctx: RestContext) => {
    send(ctx, 200, await core.permissions.effective(principal(ctx), query(ctx)), 'effective-rights');
  });
  router.post('/permissions', async (ctx: RestContext) => {
    send(ctx, 201, await core.permissions.create(principal(ctx), await body(ctx, core)), 'permission');
  });
  router.delete('/permissions/:id', async (ctx: RestContext) => {
    await core.permissions.remove(principal(ctx), idParam(ctx, 'not-found/permission-not-found'));
    sendEmpty(ctx);
  });
}
