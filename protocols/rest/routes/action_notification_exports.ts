/**
 * SPEC "Action notification exports": `POST /action_notification_exports`,
 * `GET /action_notification_exports/{id}`, `GET /action_notification_export_results` (a next
 * cursor only), and the signed CSV download their `results_url` names.
 */
import type { Core } from '../../../src/core/index.ts';
import {
  body,
  idParam,
  principal,
  query,
  send,
  sendPage,
  type RestContext,
  type RestRouter,
} from '../http.ts';

/** actionNotificationExportRoutes registers the export resource and its results. */
export function actionNotificationExportRoutes(router: RestRouter, core: Core): void {
  router.post('/action_notification_exports', async (ctx: RestContext) => {
    const created = await core.events.exports.create(principal(ctx), await body(ctx, core));
    send(ctx, 201, created, 'action-notification-export');
  });
  router.get('/action_notification_exports/:id', async (ctx: RestContext) => {
    const id = idParam(ctx, 'not-found/action-notification-export-not-found');
    send(ctx, 200, await core.events.exports.get(principal(ctx), id), 'action-notification-export');
  });
  router.get('/action_notification_export_results', async (ctx: RestContext) => {
    const q = query(ctx);
    const page = await core.events.exports.results(principal(ctx), q.action_notification_export_id, {
      cursor: typeof q.cursor === 'string' ? q.cursor : undefined,
      per_page: typeof q.per_page === 'string' ? q.per_page : undefined,
    });
    sendPage(ctx, page, 'action-notification-export-results');
  });
}

/** exportDownloadRoutes serves `GET /exports/<token>`: the token is the credential. */
export function exportDownloadRoutes(router: RestRouter, core: Core): void {
  router.get('/exports/:token', async (ctx: RestContext) => {
    const doc = await core.events.exports.csv(ctx.params.token ?? '');
    ctx.set('Content-Disposition', `attachment; filename="${doc.name}"`);
    ctx.set('Cache-Control', 'private, no-store');
    ctx.type = 'text/csv; charset=utf-8';
    ctx.length = doc.size;
    ctx.body = doc.stream;
  });
}
