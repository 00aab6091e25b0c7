/**
 * HTTP Basic for WebDAV: a username and password, or an API key as the username (as in the REST
 * API), each through the core's gate. Finder and Explorer send credentials with every request;
 * the core's one credential cache answers most of them without bcrypt, and the core records a
 * `login` Action for a client's first request and then once per window (DESIGN.md "Actions").
 * Nothing about a login is kept here, so every instance sees a password change, a lockout or a
 * flag change the same way.
 */
import { GatewayError, type Core, type Principal } from '../../src/core/index.ts';
import type { DavContext } from './http.ts';

// API keys are 64 hex characters (src/core/accounts/api-keys.ts); no username looks like one.
const API_KEY = /^[0-9a-f]{64}$/i;

/** basicCredentials reads HTTP Basic credentials, or null. */
export function basicCredentials(header: string): { username: string; password: string } | null {
  const m = /^Basic\s+([A-Za-z0-9+/=]+)\s*$/i.exec(header);
  if (!m) return null;
  const decoded = Buffer.from(m[1]!, 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  return colon < 0
    ? { username: decoded, password: '' }
    : { username: decoded.slice(0, colon), password: decoded.slice(colon + 1) };
}

/** authenticate returns the request's Principal or throws not-authenticated (or service-unavailable). */
export async function authenticate(core: Core, ctx: DavContext): Promise<Principal> {
  const ip = ctx.request.ip;
  const creds = basicCredentials(ctx.get('Authorization'));
  if (!creds || creds.username === '')
    throw new GatewayError('not-authenticated/authentication-required', 'Authentication required');
  if (API_KEY.test(creds.username)) return core.authenticateApiKey(creds.username, 'dav', ip);
  return core.gate.authenticatePassword({
    interface: 'dav',
    ip,
    username: creds.username,
    password: creds.password,
  });
}
