/** Live connections of every instance (issue 15): list them, end one. Site admins only (the core checks). */
import { GatewayError, type Core } from '../../../src/core/index.ts';
import { principal, query, sendEmpty, sendPage, type RestContext, type RestRouter } from '../http.ts';

/** connectionRoutes registers /connections. */
export function connectionRoutes(router: RestRouter, core: Core): void {
  router.get('/connections', async (ctx: RestContext) => {
    sendPage(ctx, await core.connections.list(principal(ctx), query(ctx)), 'connections');
  });
  router.delete('/connections/:id', async (ctx: RestContext) => {
    // A connection's id is a 48-bit number its instance chose (not a 32-bit row id).
    const raw = ctx.params.id ?? '';
    if (!/^\d{1,15}$/.test(raw))
      throw new GatewayError('not-found/connection-not-found', `${raw} is not a connection id`);
    await core.connections.end(principal(ctx), Number(raw));
    sendEmpty(ctx);
  });
}
