/**
 * Credentials of a REST request (SPEC "Authentication"): `X-SvcAPI-Key`, HTTP Basic with the key
 * as username, `X-SvcAPI-Auth` with a session id, or the `SvcAPI` cookie. The core checks them.
 * The web interface's cookie (protocols/shared/web-session.ts) is a session of interface `web`,
 * and a change made with it needs the page's CSRF token as well.
 */
import type { Next } from 'koa';
import { GatewayError, type Core, type Principal } from '../../src/core/index.ts';
import { holdSession } from '../shared/listener.ts';
import { CSRF_HEADER, WEB_COOKIE, requireCsrf } from '../shared/web-session.ts';
import type { RestContext } from './http.ts';

/** SESSION_COOKIE is the earlier form's session cookie. */
export const SESSION_COOKIE = 'SvcAPI';

function basicUsername(ctx: RestContext): string | undefined {
  const auth = ctx.get('Authorization');
  const m = /^Basic\s+([A-Za-z0-9+/=]+)\s*$/i.exec(auth);
  if (!m) return undefined;
  const decoded = Buffer.from(m[1]!, 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  return colon < 0 ? decoded : decoded.slice(0, colon);
}

/**
 * authenticate admits the request through the core or answers 401; it leaves the Principal on
 * ctx.state, and the request counts as one of its user's sessions until it is answered.
 */
export function authenticate(core: Core) {
  const admitted = (ctx: RestContext, principal: Principal): void => {
    ctx.state.principal = principal;
    holdSession(core, 'restapi', principal, ctx.res, ctx.request.ip);
  };
  return async (ctx: RestContext, next: Next): Promise<void> => {
    const ip = ctx.request.ip;
    if (ctx.state.legacy) {
      // The earlier form takes HTTP Basic with a site-wide key only (SPEC "Versioning").
      const key = basicUsername(ctx);
      if (!key)
        throw new GatewayError(
          'not-authenticated/authentication-required',
          'Send a site-wide API key by HTTP Basic authentication',
        );
      const p = await core.authenticateApiKey(key, 'restapi', ip);
      if (p.user)
        throw new GatewayError(
          'not-authorized/must-authenticate-with-api-key',
          'The legacy API takes a site-wide API key only',
        );
      admitted(ctx, p);
      return next();
    }
    const key = ctx.get('X-SvcAPI-Key') || basicUsername(ctx);
    if (key) {
      admitted(ctx, await core.authenticateApiKey(key, 'restapi', ip));
      return next();
    }
    const webSession = ctx.get('X-SvcAPI-Auth') ? undefined : ctx.cookies.get(WEB_COOKIE);
    if (webSession) {
      requireCsrf(ctx.method, ctx.get(CSRF_HEADER), webSession);
      admitted(ctx, await core.sessions.authenticate(webSession, 'web', ip));
      ctx.state.sessionId = webSession;
      return next();
    }
    const session = ctx.get('X-SvcAPI-Auth') || ctx.cookies.get(SESSION_COOKIE);
    if (session) {
      admitted(ctx, await core.sessions.authenticate(session, 'restapi', ip));
      ctx.state.sessionId = session;
      return next();
    }
    throw new GatewayError(
      'not-authenticated/authentication-required',
      'Send an API key (X-SvcAPI-Key) or a session (X-SvcAPI-Auth)',
    );
  };
}
