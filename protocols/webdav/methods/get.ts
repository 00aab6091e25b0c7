/**
 * GET and HEAD: the file's bytes with ETag and Last-Modified, conditional requests (RFC 9110
 * §13: 304 and 412), and one byte range read from the blob store itself (206, 416). HEAD opens
 * the file without recording a read. Several ranges are answered with the whole file (allowed by
 * RFC 9110 §14.2). A folder answers with its listing as a page (folder-index.ts).
 */
import parseRange from 'range-parser';
import { GatewayError, type ByteRange, type Core, type Entry } from '../../../src/core/index.ts';
import { sendFile } from '../../shared/observe.ts';
import { DavCondition } from '../errors.ts';
import { etagOf, httpDate, type DavContext, type Method } from '../http.ts';
import { contentTypeOf } from '../props.ts';
import { folderIndex } from './folder-index.ts';

const tags = (header: string) => header.split(',').map((t) => t.trim());
const weak = (t: string) => t.replace(/^W\//, '');

/** preconditions applies If-Match, If-Unmodified-Since, If-None-Match and If-Modified-Since; true means 304. */
export function preconditions(ctx: DavContext, entry: Entry | null, read: boolean): boolean {
  const etag = entry ? etagOf(entry) : null;
  const seconds = (d: Date) => Math.floor(d.getTime() / 1000);
  const ifMatch = ctx.get('If-Match');
  const ifUnmodified = ctx.get('If-Unmodified-Since');
  if (ifMatch) {
    const list = tags(ifMatch);
    if (!entry || !(list.includes('*') || (etag !== null && list.includes(etag)))) throw precondition();
  } else if (ifUnmodified && entry) {
    const d = new Date(ifUnmodified);
    if (!Number.isNaN(d.getTime()) && seconds(entry.mtime) > seconds(d)) throw precondition();
  }
  const ifNoneMatch = ctx.get('If-None-Match');
  if (ifNoneMatch) {
    const list = tags(ifNoneMatch);
    const match = entry !== null && (list.includes('*') || (etag !== null && list.map(weak).includes(etag)));
    if (match) {
      if (read) return true;
      throw precondition();
    }
  } else if (read && entry && ctx.get('If-Modified-Since')) {
    const d = new Date(ctx.get('If-Modified-Since'));
    if (!Number.isNaN(d.getTime()) && seconds(entry.mtime) <= seconds(d)) return true;
  }
  return false;
}

function precondition(): DavCondition {
  return new DavCondition(412, null, [], 'A precondition failed');
}

function rangeOf(ctx: DavContext, entry: Entry): ByteRange | undefined {
  const header = ctx.get('Range');
  if (!header) return undefined;
  const ifRange = ctx.get('If-Range');
  if (ifRange) {
    const etag = etagOf(entry);
    const date = new Date(ifRange);
    const fresh = ifRange.startsWith('"')
      ? ifRange === etag
      : !Number.isNaN(date.getTime()) && Math.floor(entry.mtime.getTime() / 1000) <= date.getTime() / 1000;
    if (!fresh) return undefined;
  }
  const size = entry.size ?? 0;
  const ranges = parseRange(size, header, { combine: true });
  if (ranges === -1) {
    ctx.set('Content-Range', `bytes */${size}`);
    throw new GatewayError(
      'processing-failure/invalid-range',
      `The range is outside the file's ${size} bytes`,
    );
  }
  if (ranges === -2 || ranges.type !== 'bytes' || ranges.length !== 1) return undefined;
  return { start: ranges[0]!.start, end: ranges[0]!.end };
}

/** get answers GET and HEAD. */
export const get: Method = async (ctx, _core: Core) => {
  const head = ctx.method === 'HEAD';
  const { session, path } = ctx.state;
  const needsStat = ['Range', 'If-Match', 'If-None-Match', 'If-Modified-Since', 'If-Unmodified-Since'].some(
    (h) => ctx.get(h),
  );
  let range: ByteRange | undefined;
  if (needsStat) {
    const entry = await session.stat(path);
    if (entry.type === 'directory') return folderIndex(ctx);
    if (preconditions(ctx, entry, true)) {
      ctx.status = 304;
      ctx.set('ETag', etagOf(entry)!);
      ctx.set('Last-Modified', httpDate(entry.mtime));
      return;
    }
    range = rangeOf(ctx, entry);
  }
  let download;
  try {
    download = await session.openRead(path, { ...(range ? { range } : {}), record: !head });
  } catch (err) {
    if (err instanceof GatewayError && err.type === 'bad-request/cannot-download-directory')
      return folderIndex(ctx);
    throw err;
  }
  const { entry, stream } = download;
  const size = entry.size ?? 0;
  ctx.set('ETag', etagOf(entry)!);
  ctx.set('Last-Modified', httpDate(entry.mtime));
  ctx.set('Accept-Ranges', 'bytes');
  ctx.type = contentTypeOf(entry.path);
  sendFile(ctx, stream);
  if (range) {
    const end = range.end ?? size - 1;
    ctx.status = 206;
    ctx.set('Content-Range', `bytes ${range.start}-${end}/${size}`);
    ctx.length = end - range.start + 1;
  } else {
    ctx.status = 200;
    ctx.length = size;
  }
};
