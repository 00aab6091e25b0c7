/** SPEC "Groups". */
import { GatewayError, type Core } from '../../../src/core/index.ts';
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
  // Our extension: a group's members one page at a time, added and removed one by one.
  router.get('/groups/:id/members', async (ctx: RestContext) => {
    const id = idParam(ctx, 'not-found/group-not-found');
    sendPage(ctx, await core.groups.members(principal(ctx), id, query(ctx)), 'group-members');
  });
  router.post('/groups/:id/members', async (ctx: RestContext) => {
    const id = idParam(ctx, 'not-found/group-not-found');
    send(ctx, 201, await core.groups.addMember(principal(ctx), id, await body(ctx, core)), 'group-member');
  });
  router.delete('/groups/:id/members/:user_id', async (ctx: RestContext) => {
    const id = idParam(ctx, 'not-found/group-not-found');
    const raw = ctx.params.user_id ?? '';
    if (!/^\d{1,10}$/.test(raw) || Number(raw) > 2147483647)
      throw new GatewayError('not-found/user-not-found', `${raw} is not an id`);
    await core.groups.removeMember(principal(ctx), id, Number(raw));
    sendEmpty(ctx);
  });
}
