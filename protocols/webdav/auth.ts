/**
 * HTTP Basic for WebDAV: a username and password through the core's login gate, or an API key as
 * the username (as in the REST API). Finder and Explorer send credentials on every request, so
 * verified credentials are remembered for a minute (bcrypt is not run per request), and a `login`
 * Action is recorded once per client session: the first request, or the first after 30 minutes of
 * silence. Only an HMAC of the credentials under a per-process random key is kept, never the
 * password.
 */
import { createHmac, randomBytes } from 'node:crypto';
import { GatewayError, type Core, type Principal } from '../../src/core/index.ts';
import type { DavContext } from './http.ts';

/** VERIFIED_MS is how long verified credentials are reused without asking the gate. */
export const VERIFIED_MS = 60_000;
/** SESSION_IDLE_MS ends a client session: its next request records a new `login`. */
export const SESSION_IDLE_MS = 30 * 60_000;
const MAX_ENTRIES = 10_000;
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

/** DavAuth authenticates WebDAV requests through the core. */
export class DavAuth {
  private readonly key = randomBytes(32);
  private readonly verified = new Map<string, { principal: Principal; at: number }>();
  private readonly sessions = new Map<string, number>();

  constructor(private readonly core: Core) {}

  /** authenticate returns the request's Principal or throws not-authenticated. */
  async authenticate(ctx: DavContext): Promise<Principal> {
    const ip = ctx.request.ip;
    const creds = basicCredentials(ctx.get('Authorization'));
    if (!creds || creds.username === '')
      throw new GatewayError('not-authenticated/authentication-required', 'Authentication required');
    if (API_KEY.test(creds.username)) return this.core.authenticateApiKey(creds.username, 'dav', ip);
    const digest = createHmac('sha256', this.key)
      .update(`${creds.username}\0${creds.password}\0${ip}`)
      .digest('base64url');
    const now = Date.now();
    const cached = this.verified.get(digest);
    const lastSeen = this.sessions.get(digest);
    if (cached && now - cached.at < VERIFIED_MS) {
      this.sessions.set(digest, now);
      return cached.principal;
    }
    const principal = await this.core.gate.login(
      { interface: 'dav', ip, username: creds.username, password: creds.password },
      { recordLogin: lastSeen === undefined || now - lastSeen >= SESSION_IDLE_MS },
    );
    this.remember(this.verified, digest, { principal, at: now });
    this.remember(this.sessions, digest, now);
    return principal;
  }

  private remember<V>(map: Map<string, V>, key: string, value: V): void {
    if (map.size >= MAX_ENTRIES && !map.has(key)) map.clear();
    map.set(key, value);
  }
}
