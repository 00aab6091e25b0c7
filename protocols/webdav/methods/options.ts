/** OPTIONS: the DAV classes, answered without authentication (Windows asks `/` first and gives up on a 401). */
import type { Context } from 'koa';

/** ALLOW lists the methods this server implements. */
export const ALLOW = 'OPTIONS, GET, HEAD, PUT, DELETE, MKCOL, COPY, MOVE, PROPFIND, PROPPATCH, LOCK, UNLOCK';

/** options answers OPTIONS on any path. */
export function options(ctx: Context): void {
  ctx.set('DAV', '1, 2');
  ctx.set('MS-Author-Via', 'DAV');
  ctx.set('Allow', ALLOW);
  ctx.set('Accept-Ranges', 'bytes');
  ctx.status = 200;
  ctx.body = '';
}
