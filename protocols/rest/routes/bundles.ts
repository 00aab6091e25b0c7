/** Share links (our fields for SPEC's "bundles"): list, show, create, update, delete (= revoke). */
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

/** bundleRoutes registers /bundles. */
export function bundleRoutes(router: RestRouter, core: Core): void {
  const id = (ctx: RestContext) => idParam(ctx, 'not-found/bundle-not-found');
  router.get('/bundles', async (ctx: RestContext) => {
    sendPage(ctx, await core.bundles.list(principal(ctx), query(ctx)), 'bundles');
  });
  router.get('/bundles/:id', async (ctx: RestContext) => {
    send(ctx, 200, await core.bundles.get(principal(ctx), id(ctx)), 'bundle');
  });
  router.post('/bundles', async (ctx: RestContext) => {
    send(ctx, 201, await core.bundles.create(principal(ctx), await body(ctx, core)), 'bundle');
  });
  const update = async (ctx: RestContext) => {
    send(ctx, 200, await core.bundles.update(principal(ctx), id(ctx), await body(ctx, core)), 'bundle');
  };
  router.patch('/bundles/:id', update);
  router.put('/bundles/:id', update);
  router.delete('/bundles/:id', async (ctx: RestContext) => {
    await core.bundles.remove(principal(ctx), id(ctx));
    sendEmpty(ctx);
  });
}
