/** SSH public keys: list, show, add (validated OpenSSH format), delete; users their own, site admins anyone's. */
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

/** publicKeyRoutes registers /public_keys. */
export function publicKeyRoutes(router: RestRouter, core: Core): void {
  router.get('/public_keys', async (ctx: RestContext) => {
    sendPage(ctx, await core.publicKeys.list(principal(ctx), query(ctx)), 'public_keys');
  });
  router.get('/public_keys/:id', async (ctx: RestContext) => {
    send(
      ctx,
      200,
      await core.publicKeys.get(principal(ctx), idParam(ctx, 'not-found/public-key-not-found')),
      'public_key',
    );
  });
  router.post('/public_keys', async (ctx: RestContext) => {
    send(ctx, 201, await core.publicKeys.create(principal(ctx), await body(ctx, core)), 'public_key');
  });
  router.delete('/public_keys/:id', async (ctx: RestContext) => {
    await core.publicKeys.remove(principal(ctx), idParam(ctx, 'not-found/public-key-not-found'));
    sendEmpty(ctx);
  });
}
