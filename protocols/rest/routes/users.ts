/** SPEC "Users (site admin)". */
import type { Core } from '../../../src/core/index.ts';
import {
  body,
  header,
  idParam,
  principal,
  query,
  send,
  sendEmpty,
  sendPage,
  type RestContext,
  type RestRouter,
} from '../http.ts';

/** userRoutes registers /users. */
export function userRoutes(router: RestRouter, core: Core): void {
  router.get('/users', async (ctx: RestContext) => {
    sendPage(ctx, await core.users.list(principal(ctx), query(ctx)), 'users');
  });
  router.get('/users/:id', async (ctx: RestContext) => {
    send(ctx, 200, await core.users.get(principal(ctx), idParam(ctx, 'not-found/user-not-found')), 'user');
  });
  router.post('/users', async (ctx: RestContext) => {
    send(ctx, 201, await core.users.create(principal(ctx), await body(ctx, core)), 'user');
  });
  const update = async (ctx: RestContext) => {
    const id = idParam(ctx, 'not-found/user-not-found');
    const user = await core.users.update(
      principal(ctx),
      id,
      await body(ctx, core),
      header(ctx, 'X-Svc-Reauthentication'),
    );
    send(ctx, 200, user, 'user');
  };
  router.put('/users/:id', update);
  router.patch('/users/:id', update);
  router.post('/users/:id/unlock', async (ctx: RestContext) => {
    send(ctx, 200, await core.users.unlock(principal(ctx), idParam(ctx, 'not-found/user-not-found')), 'user');
  });
  router.delete('/users/:id', async (ctx: RestContext) => {
    await core.users.remove(principal(ctx), idParam(ctx, 'not-found/user-not-found'));
    sendEmpty(ctx);
  });
}
