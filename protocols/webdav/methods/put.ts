/**
 * PUT: the body streamed into the core, committed atomically at its end; a client that goes away
 * mid-way leaves the old content, and what arrived is kept as the user's pending version of the
 * path (issue 20): PROPFIND shows that user its size, and a PUT with `Content-Range: bytes N-…`
 * where N is that size continues it, as Apache mod_dav takes a ranged PUT. Any other N is 416 and
 * changes nothing; a PUT without Content-Range (or from byte 0) replaces. Finder sends `Transfer-Encoding: chunked`
 * with `X-Expected-Entity-Length` instead of Content-Length: Node decodes the chunks, and the
 * expected length is checked for form (there is no quota to check it against).
 *
 * `X-OC-Mtime` (ownCloud's header, sent by rclone's owncloud/nextcloud/fastmail vendors) carries
 * the client's modification time in unix seconds: the core commits the file with it, and the
 * reply says `X-OC-Mtime: accepted` so rclone does not try to set it again.
 */
import { GatewayError, type Core, type Entry } from '../../../src/core/index.ts';
import { checkWrite } from '../locks.ts';
import { etagOf, unixTimeOf, type Method } from '../http.ts';
import { allowOn } from './options.ts';
import { preconditions } from './get.ts';

/** put writes a file. */
export const put: Method = async (ctx, core: Core) => {
  const { path } = ctx.state;
  const range = contentRange(ctx.get('Content-Range'), ctx.get('Content-Length'));
  const expected = ctx.get('X-Expected-Entity-Length');
  if (expected && !/^\d+$/.test(expected))
    throw new GatewayError('bad-request/request-params-invalid', 'X-Expected-Entity-Length must be a number');
  const mtime = mtimeHeader(ctx.get('X-OC-Mtime'));
  const writer = await checkWrite(ctx, core);
  const abort = new AbortController();
  const onClose = () => {
    if (!ctx.req.complete) abort.abort();
  };
  ctx.req.once('close', onClose);
  // What is at the path comes from the upload's own look before the body (a writeonly user may
  // not learn whether the file exists: written as new, 201, then).
  let existing: Entry | null = null;
  let entry;
  try {
    entry = await writer.write(path, ctx.req, {
      signal: abort.signal,
      ...(mtime ? { mtime } : {}),
      ...(range && range.start > 0 ? { offset: range.start, resume: true } : {}),
      before: (seen) => {
        existing = seen;
        preconditions(ctx, seen, false);
      },
    });
  } catch (err) {
    if (err instanceof GatewayError && err.type === 'processing-failure/destination-exists') {
      ctx.state.allow = allowOn('directory');
      throw new GatewayError('bad-request/method-not-allowed', 'A folder cannot be written');
    }
    throw err;
  } finally {
    ctx.req.off('close', onClose);
  }
  ctx.set('ETag', etagOf(entry)!);
  if (mtime) ctx.set('X-OC-Mtime', 'accepted');
  // Koa turns a null body into 204, so the body goes first.
  ctx.body = null;
  ctx.status = existing ? 204 : 201;
};

/**
 * contentRange reads a PUT's `Content-Range: bytes first-last/total` (last and total may be `*`):
 * absent is null; a malformed one, one whose last is not the last byte of the total, or one that
 * disagrees with Content-Length is 400. A piece in the middle of a file is not taken: the body
 * must run to the end.
 */
export function contentRange(raw: string, length: string): { start: number } | null {
  if (raw === '') return null;
  const m = /^bytes (\d{1,16})-(\d{1,16}|\*)\/(\d{1,16}|\*)$/.exec(raw.trim());
  const bad = (why: string) => new GatewayError('bad-request/request-params-invalid', `Content-Range ${why}`);
  if (!m) throw bad('must be bytes first-last/total');
  const start = Number(m[1]);
  const last = m[2] === '*' ? null : Number(m[2]);
  const total = m[3] === '*' ? null : Number(m[3]);
  if (last !== null && last < start) throw bad('ends before it starts');
  if (last !== null && total !== null && last + 1 !== total)
    throw bad('must run to the end of the file (only the rest of a cut upload can be sent)');
  if (last !== null && /^\d+$/.test(length) && Number(length) !== last - start + 1)
    throw bad('and Content-Length disagree');
  return { start };
}

/** mtimeHeader reads X-OC-Mtime: absent is null, anything but unix seconds is 400 (as ownCloud answers). */
export function mtimeHeader(raw: string): Date | null {
  if (raw === '') return null;
  const mtime = unixTimeOf(raw);
  if (!mtime)
    throw new GatewayError('bad-request/request-params-invalid', 'X-OC-Mtime must be a unix time in seconds');
  return mtime;
}
