import type { ApiKeyRow, UserRow } from '../db/entities.ts';

/** Interface is SPEC's Action `interface`: which front end a request came through. */
export type Interface = 'restapi' | 'web' | 'ftp' | 'sftp' | 'dav';

/**
 * Principal is who makes a core call (a user, or a site-wide API key with `user` null), through
 * which interface and from which client IP. Every front end gets one from the core's login or
 * authenticate calls and passes it back on each operation; it never builds one itself.
 */
export interface Principal {
  readonly user: UserRow | null;
  /** the API key the request authenticated with, if any */
  readonly apiKey: ApiKeyRow | null;
  /** digest of the REST session the request authenticated with, if any */
  readonly sessionDigest: string | null;
  readonly interface: Interface;
  readonly ip: string;
  /** set only for the command-line operator */
  readonly operator?: boolean;
}

/**
 * operatorPrincipal is the operator at the command line (svc-gateway users …): it passes every
 * check like a site-wide key; its Actions carry no user.
 */
export function operatorPrincipal(): Principal {
  return { user: null, apiKey: null, sessionDigest: null, interface: 'restapi', ip: '', operator: true };
}

/** isSiteAdmin tells whether the principal passes every check: a site admin or a site-wide key. */
export function isSiteAdmin(p: Principal): boolean {
  return p.user === null ? p.apiKey !== null || p.operator === true : p.user.site_admin;
}
