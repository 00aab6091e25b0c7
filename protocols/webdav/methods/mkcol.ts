/** MKCOL (RFC 4918 §9.3): a folder whose parent exists; a body is 415, an existing name 405. */
import { GatewayError, type Core } from '../../../src/core/index.ts';
import { checkWrite } from '../locks.ts';
import { allowOn } from './options.ts';
import type { Method } from '../http.ts';

/** mkcol creates a folder. */
export const mkcol: Method = async (ctx, core: Core) => {
  const length = Number(ctx.get('Content-Length') || 0);
  if (length > 0 || ctx.get('Transfer-Encoding')) {
    ctx.req.resume();
    throw new GatewayError('bad-request/unsupported-media-type', 'MKCOL takes no request body');
  }
  const { path } = ctx.state;
  const session = await checkWrite(ctx, core);
  try {
    await session.mkdir(path);
  } catch (err) {
    if (err instanceof GatewayError && err.type === 'processing-failure/destination-exists') {
      const existing = await ctx.state.session.stat(path).catch(() => null);
      if (existing) ctx.state.allow = allowOn(existing.type);
      throw new GatewayError('bad-request/method-not-allowed', err.message);
    }
    throw err;
  }
  ctx.status = 201;
  ctx.body = '';
};
