/** UNLOCK (RFC 4918 §9.11): the Lock-Token must name a lock that covers the request URL (else 409). */
import { GatewayError, type Core } from '../../../src/core/index.ts';
import { DavCondition } from '../errors.ts';
import type { Method } from '../http.ts';

/** unlock removes a lock. */
export const unlock: Method = async (ctx, core: Core) => {
  const m = /^\s*<([^>]+)>\s*$/.exec(ctx.get('Lock-Token'));
  if (!m) throw new GatewayError('bad-request/request-params-required', 'UNLOCK needs a Lock-Token header');
  try {
    await core.dav.locks.unlock(ctx.state.session, ctx.state.path, m[1]!);
  } catch (err) {
    if (err instanceof GatewayError && err.type === 'not-found/resource-not-found')
      throw new DavCondition(409, 'lock-token-matches-request-uri', [], err.message);
    throw err;
  }
  ctx.body = null;
  ctx.status = 204;
};
