/**
 * The web interface's session, as both the web pages (sign-in, sign-out) and the REST API (every
 * call the page makes) see it: an HttpOnly cookie holding a core session opened with interface
 * `web`, and a CSRF token the page sends in a header on every state-changing request. The token
 * is derived from the session id, which only the cookie holds, so another site can neither read
 * nor compute it; the cookie is also SameSite=Strict.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { GatewayError } from '../../src/core/index.ts';

/** WEB_COOKIE names the web interface's session cookie. */
export const WEB_COOKIE = 'SvcWeb';
/** CSRF_HEADER is the header in which the page repeats its CSRF token. */
export const CSRF_HEADER = 'X-Svc-CSRF';

/**
 * wantsChallenge tells whether a 401 may carry `WWW-Authenticate: Basic`: not to the web page
 * (its calls send X-Requested-With, and /web/* is its own), where the browser would put up its
 * own password prompt instead of letting the page show its sign-in.
 */
export function wantsChallenge(path: string, requestedWith: string): boolean {
  return requestedWith === '' && !path.startsWith('/web/') && !path.startsWith('/s/');
}

/** WEB_COOKIE_OPTIONS are the cookie's attributes (Koa's cookies.set options). */
export const WEB_COOKIE_OPTIONS = {
  secure: true,
  httpOnly: true,
  sameSite: 'strict',
  path: '/',
  overwrite: true,
} as const;

/** csrfToken is the session's CSRF token: a digest of the id, apart from the stored digest. */
export function csrfToken(sessionId: string): string {
  return createHash('sha256').update(`svc-web-csrf:${sessionId}`).digest('base64url');
}

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/**
 * requireCsrf refuses a state-changing request whose CSRF header does not match the session's
 * token: the cookie alone does not authenticate a change.
 */
export function requireCsrf(method: string, sent: string, sessionId: string): void {
  if (SAFE_METHODS.has(method.toUpperCase())) return;
  const want = Buffer.from(csrfToken(sessionId));
  const got = Buffer.from(sent);
  if (got.length !== want.length || !timingSafeEqual(got, want)) {
    throw new GatewayError(
      'not-authenticated/authentication-required',
      `A change through the web session needs the page's ${CSRF_HEADER} token`,
    );
  }
}
