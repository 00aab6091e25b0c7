/** OPTIONS: the DAV classes, answered without authentication (Windows asks `/` first and gives up on a 401). */
import type { Context } from 'koa';

/** ALLOW lists the methods this server implements. */
export const ALLOW = 'OPTIONS, GET, HEAD, PUT, DELETE, MKCOL, COPY, MOVE, PROPFIND, PROPPATCH, LOCK, UNLOCK';

/**
 * allowOn lists the methods an existing file or folder takes, for the Allow header of a 405 on it
 * (RFC 9110 §15.5.6: the target's methods, not the server's): no MKCOL on what exists, and no PUT
 * on a folder. lftp and curl read a 405's Allow to choose what next.
 */
export function allowOn(type: 'file' | 'directory'): string {
  return type === 'directory'
    ? 'OPTIONS, GET, HEAD, DELETE, COPY, MOVE, PROPFIND, PROPPATCH, LOCK, UNLOCK'
    : 'OPTIONS, GET, HEAD, PUT, DELETE, COPY, MOVE, PROPFIND, PROPPATCH, LOCK, UNLOCK';
}

/** options answers OPTIONS on any path. */
export function options(ctx: Context): void {
  ctx.set('DAV', '1, 2');
  ctx.set('MS-Author-Via', 'DAV');
  ctx.set('Allow', ALLOW);
  ctx.set('Accept-Ranges', 'bytes');
  ctx.status = 200;
  ctx.body = '';
}
