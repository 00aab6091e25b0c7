/** SPEC "API keys": list, show, the key in use, create (the key is shown once), delete. */
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

/** apiKeyRoutes registers /api_keys and /api_key. */
export function apiKeyRoutes(router: RestRouter, core: Core): void {
  router.get('/api_keys', async (ctx: RestContext) => {
    sendPage(ctx, await core.apiKeys.list(principal(ctx), query(ctx)), 'api_keys');
  });
  router.get('/api_key', (ctx: RestContext) => {
    send(ctx, 200, core.apiKeys.current(principal(ctx)), 'api_key');
  });
  router.get('/api_keys/:id', async (ctx: RestContext) => {
    send(
      ctx,
      200,
      await core.apiKeys.get(principal(ctx), idParam(ctx, 'not-found/api-key-not-found')),
      'api_key',
    );
  });
  router.post('/api_keys', async (ctx: RestContext) => {
    const key = await core.apiKeys.create(
      principal(ctx),
      await body(ctx, core),
      header(ctx, 'X-Svc-Reauthentication'),
    );
    send(ctx, 201, key, 'api_key');
  });
  router.delete('/api_keys/:id', async (ctx: RestContext) => {
    await core.apiKeys.remove(principal(ctx), idParam(ctx, 'not-found/api-key-not-found'));
    sendEmpty(ctx);
  });
}
