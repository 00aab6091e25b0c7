import { GatewayError } from '../errors.ts';
import { isSiteAdmin, type Principal } from '../principal.ts';

/**
 * requireFullKey refuses administration through a restricted API key (permission_set other than
 * `full`): SPEC says such keys do only their application's file functions.
 */
export function requireFullKey(p: Principal): void {
  const set = p.apiKey?.permission_set;
  if (!set || set === 'full') return;
  if (set === 'desktop_app' || set === 'sync_app')
    throw new GatewayError('not-authorized/api-key-only-for-desktop-app');
  if (set === 'mobile_app') throw new GatewayError('not-authorized/api-key-only-for-mobile-app');
  if (set === 'office_integration')
    throw new GatewayError('not-authorized/api-key-only-for-office-integration');
  throw new GatewayError(
    'not-authorized/api-key-is-disabled',
    'This API key has no permissions (permission_set none)',
  );
}

/** requireSiteAdmin lets through site admins and site-wide keys only (SPEC's admin endpoints). */
export function requireSiteAdmin(p: Principal): void {
  requireFullKey(p);
  if (!isSiteAdmin(p))
    throw new GatewayError('not-authorized/site-admin-required', 'You must be a site admin to do this');
}
