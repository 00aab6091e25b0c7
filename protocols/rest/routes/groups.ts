/** SPEC "Groups". */
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

/** groupRoutes registers /groups. */
export function groupRoutes(router: RestRouter, core: Core): void {
  router.get('/groups', async (ctx: RestContext) => {
    sendPage(ctx, await core.groups.list(principal(ctx), query(ctx)), 'groups');
  });
  router.get('/groups/:id', async (ctx: RestContext) => {
    send(ctx, 200, await core.groups.get(principal(ctx), idParam(ctx, 'not-found/group-not-found')), 'group');
  });
  router.post('/groups', async (ctx: RestContext) => {
    send(ctx, 201, await core.groups.create(principal(ctx), await body(ctx, core)), 'group');
  });
  const update = async (ctx: RestContext) => {
    const id = idParam(ctx, 'not-found/group-not-found');
    send(ctx, 200, await core.groups.update(principal(ctx), id, await body(ctx, core)), 'group');
  };
  router.put('/groups/:id', update);
  router.patch('/groups/:id', update);
  router.delete('/groups/:id', async (ctx: RestContext) => {
    await core.groups.remove(principal(ctx), idParam(ctx, 'not-found/group-not-found'));
    sendEmpty(ctx);
  });
}
