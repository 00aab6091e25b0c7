/** SPEC "Sessions": POST /sessions logs in through the core's gate; DELETE /sessions logs out. */
import type { Core } from '../../../src/core/index.ts';
import { SESSION_COOKIE } from '../auth.ts';
import { body, send, sendEmpty, type RestContext, type RestRouter } from '../http.ts';

/** sessionRoutes registers the session endpoints (no credentials needed). */
export function sessionRoutes(router: RestRouter, core: Core): void {
  router.post('/sessions', async (ctx: RestContext) => {
    const fields = await body(ctx, core);
    const username = typeof fields.username === 'string' ? fields.username : '';
    const password = typeof fields.password === 'string' ? fields.password : '';
    const { id } = await core.sessions.create({
      interface: 'restapi',
      ip: ctx.request.ip,
      username,
      password,
    });
    // The earlier form of the API reads the session from this cookie.
    ctx.cookies.set(SESSION_COOKIE, id, {
      secure: true,
      httpOnly: true,
      sameSite: 'strict',
      path: '/',
      overwrite: true,
    });
    send(ctx, 200, { id }, 'session');
  });

  router.delete('/sessions', async (ctx: RestContext) => {
    const id = ctx.get('X-SvcAPI-Auth') || ctx.cookies.get(SESSION_COOKIE);
    if (id) await core.sessions.destroy(id);
    ctx.cookies.set(SESSION_COOKIE, null, { secure: true, httpOnly: true, path: '/' });
    sendEmpty(ctx);
  });
}
