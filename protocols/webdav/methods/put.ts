/**
 * PUT: the body streamed into the core, committed atomically at its end; a client that goes away
 * mid-way aborts the write and the old content stays. Finder sends `Transfer-Encoding: chunked`
 * with `X-Expected-Entity-Length` instead of Content-Length: Node decodes the chunks, and the
 * expected length is checked for form (there is no quota to check it against).
 *
 * `X-OC-Mtime` (ownCloud's header, sent by rclone's owncloud/nextcloud/fastmail vendors) carries
 * the client's modification time in unix seconds: the core commits the file with it, and the
 * reply says `X-OC-Mtime: accepted` so rclone does not try to set it again.
 */
import { GatewayError, type Core } from '../../../src/core/index.ts';
import { checkWrite } from '../locks.ts';
import { etagOf, statOrNull, unixTimeOf, type Method } from '../http.ts';
import { preconditions } from './get.ts';

/** put writes a file. */
export const put: Method = async (ctx, core: Core) => {
  const { path } = ctx.state;
  if (ctx.get('Content-Range'))
    throw new GatewayError('bad-request/request-params-invalid', 'PUT with Content-Range is not supported');
  const expected = ctx.get('X-Expected-Entity-Length');
  if (expected && !/^\d+$/.test(expected))
    throw new GatewayError('bad-request/request-params-invalid', 'X-Expected-Entity-Length must be a number');
  const mtime = mtimeHeader(ctx.get('X-OC-Mtime'));
  // A writeonly user may not see whether the file exists: written as new (201) then.
  const existing = await statOrNull(ctx, path).catch((err: unknown) => {
    if (err instanceof GatewayError && err.family === 'not-authorized') return null;
    throw err;
  });
  if (existing?.type === 'directory')
    throw new GatewayError('bad-request/method-not-allowed', 'A folder cannot be written');
  preconditions(ctx, existing, false);
  const writer = await checkWrite(ctx, core, [{ path }]);
  const abort = new AbortController();
  const onClose = () => {
    if (!ctx.req.complete) abort.abort();
  };
  ctx.req.once('close', onClose);
  let entry;
  try {
    entry = await writer.write(path, ctx.req, { signal: abort.signal, ...(mtime ? { mtime } : {}) });
  } finally {
    ctx.req.off('close', onClose);
  }
  ctx.set('ETag', etagOf(entry)!);
  if (mtime) ctx.set('X-OC-Mtime', 'accepted');
  // Koa turns a null body into 204, so the body goes first.
  ctx.body = null;
  ctx.status = existing ? 204 : 201;
};

/** mtimeHeader reads X-OC-Mtime: absent is null, anything but unix seconds is 400 (as ownCloud answers). */
export function mtimeHeader(raw: string): Date | null {
  if (raw === '') return null;
  const mtime = unixTimeOf(raw);
  if (!mtime)
    throw new GatewayError('bad-request/request-params-invalid', 'X-OC-Mtime must be a unix time in seconds');
  return mtime;
}
