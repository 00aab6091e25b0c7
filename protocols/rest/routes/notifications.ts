/** SPEC "Notifications". */
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

/** notificationRoutes registers /notifications. */
export function notificationRoutes(router: RestRouter, core: Core): void {
  router.get('/notifications', async (ctx: RestContext) => {
    sendPage(ctx, await core.notifications.list(principal(ctx), query(ctx)), 'notifications');
  });
  router.post('/notifications', async (ctx: RestContext) => {
    send(ctx, 201, await core.notifications.create(principal(ctx), await body(ctx, core)), 'notification');
  });
  router.delete('/notifications/:id', async (ctx: RestContext) => {
    await core.notifications.remove(principal(ctx), idParam(ctx, 'not-found/notification-not-found'));
    sendEmpty(ctx);
  });
}
