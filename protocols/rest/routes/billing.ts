/**
 * SPEC "Billing": `GET /invoices`, `/payments`, `/invoices/{id}`, `/payments/{id}` (any
 * authenticated caller), and the signed printable document their `download_uri` names.
 */
import type { Core } from '../../../src/core/index.ts';
import { idParam, principal, query, send, sendPage, type RestContext, type RestRouter } from '../http.ts';

/** billingRoutes registers the invoice and payment lists and items. */
export function billingRoutes(router: RestRouter, core: Core): void {
  for (const [plural, type] of [
    ['invoices', 'invoice'],
    ['payments', 'payment'],
  ] as const) {
    router.get(`/${plural}`, async (ctx: RestContext) => {
      const q = query(ctx);
      const page = await core.billing.list(principal(ctx), type, {
        cursor: typeof q.cursor === 'string' ? q.cursor : undefined,
        per_page: typeof q.per_page === 'string' ? q.per_page : undefined,
      });
      sendPage(ctx, page, 'account-line-items');
    });
    router.get(`/${plural}/:id`, async (ctx: RestContext) => {
      const id = idParam(ctx, `not-found/${type}-not-found`);
      send(ctx, 200, await core.billing.get(principal(ctx), type, id), 'account-line-item');
    });
  }
}

/** billingDocumentRoutes serves `GET /billing/<token>`: the token is the credential. */
export function billingDocumentRoutes(router: RestRouter, core: Core): void {
  router.get('/billing/:token', async (ctx: RestContext) => {
    const doc = await core.billing.document(ctx.params.token ?? '');
    ctx.set('Content-Disposition', `inline; filename="${doc.name}"`);
    ctx.set('Cache-Control', 'private, no-store');
    ctx.type = 'text/html; charset=utf-8';
    ctx.body = doc.html;
  });
}
