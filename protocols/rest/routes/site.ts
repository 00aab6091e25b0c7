/**
 * `GET /site` (an extension; site admins only): what this gateway runs and the problems its
 * operator should fix, as the core reports them (the Site admin page reads it).
 */
import type { Core } from '../../../src/core/index.ts';
import { principal, send, type RestContext, type RestRouter } from '../http.ts';

/** siteRoutes registers GET /site. */
export function siteRoutes(router: RestRouter, core: Core): void {
  router.get('/site', async (ctx: RestContext) => {
    send(ctx, 200, await core.site.report(principal(ctx)), 'site');
  });
}
