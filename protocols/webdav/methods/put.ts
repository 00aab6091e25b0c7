/**
 * PUT: the body streamed into the core, committed atomically at its end; a client that goes away
 * mid-way aborts the write and the old content stays. Finder sends `Transfer-Encoding: chunked`
 * with `X-Expected-Entity-Length` instead of Content-Length: Node decodes the chunks, and the
 * expected length is checked for form (there is no quota to check it against).
 */
import { GatewayError, type Core } from '../../../src/core/index.ts';
import { checkWrite } from '../locks.ts';
import { etagOf, statOrNull, type Method } from '../http.ts';
import { preconditions } from './get.ts';

/** put writes a file. */
export const put: Method = async (ctx, core: Core) => {
  const { session, path } = ctx.state;
  if (ctx.get('Content-Range'))
    throw new GatewayError('bad-request/request-params-invalid', 'PUT with Content-Range is not supported');
  const expected = ctx.get('X-Expected-Entity-Length');
  if (expected && !/^\d+$/.test(expected))
    throw new GatewayError('bad-request/request-params-invalid', 'X-Expected-Entity-Length must be a number');
  // A writeonly user may not see whether the file exists: written as new (201) then.
  const existing = await statOrNull(ctx, path).catch((err: unknown) => {
    if (err instanceof GatewayError && err.family === 'not-authorized') return null;
    throw err;
  });
  if (existing?.type === 'directory')
    throw new GatewayError('bad-request/method-not-allowed', 'A folder cannot be written');
  preconditions(ctx, existing, false);
  await checkWrite(ctx, core, [{ path }]);
  const abort = new AbortController();
  const onClose = () => {
    if (!ctx.req.complete) abort.abort();
  };
  ctx.req.once('close', onClose);
  let entry;
  try {
    entry = await session.write(path, ctx.req, { signal: abort.signal });
  } finally {
    ctx.req.off('close', onClose);
  }
  ctx.set('ETag', etagOf(entry)!);
  // Koa turns a null body into 204, so the body goes first.
  ctx.body = null;
  ctx.status = existing ? 204 : 201;
};
