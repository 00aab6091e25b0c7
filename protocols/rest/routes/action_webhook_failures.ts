/** SPEC "Action notification exports": `POST /action_webhook_failures/{id}/retry` (site admin). */
import type { Core } from '../../../src/core/index.ts';
import { idParam, principal, type RestContext, type RestRouter } from '../http.ts';

/** actionWebhookFailureRoutes registers the retry of a failed webhook delivery. */
export function actionWebhookFailureRoutes(router: RestRouter, core: Core): void {
  router.post('/action_webhook_failures/:id/retry', async (ctx: RestContext) => {
    const id = idParam(ctx, 'not-found/action-webhook-failure-not-found');
    await core.events.webhooks.retry(principal(ctx), id);
    // SPEC: no response body.
    ctx.status = 204;
  });
}
