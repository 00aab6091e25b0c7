/**
 * The signed transfer URLs the Upload object and file entries hand out: GET/HEAD /download/<token>
 * (Range, ETag, conditional requests, Content-Disposition) and PUT /upload/<token> (one part of a
 * multi-step upload, local store). The token is the credential; no other authentication.
 */
import contentDisposition from 'content-disposition';
import parseRange from 'range-parser';
import { GatewayError, type Core } from '../../../src/core/index.ts';
import { sendFile } from '../../shared/observe.ts';
import { previewType } from '../../shared/preview.ts';
import type { RestContext, RestRouter } from '../http.ts';

/** transferRoutes registers /download and /upload. */
export function transferRoutes(router: RestRouter, core: Core): void {
  const download = async (ctx: RestContext) => {
    const token = ctx.params.token ?? '';
    const d = core.files.describeSigned(token);
    const etag = `"${d.md5 ?? d.blobId}"`;
    ctx.set('ETag', etag);
    ctx.set('Last-Modified', d.mtime.toUTCString());
    ctx.set('Accept-Ranges', 'bytes');
    // The token grants the bytes; how the browser shows them is the caller's choice, within PREVIEW_TYPES.
    const inline = ctx.query.disposition === 'inline' ? previewType(d.name) : undefined;
    ctx.set('Content-Disposition', contentDisposition(d.name, { type: inline ? 'inline' : 'attachment' }));
    ctx.set('Cache-Control', 'private, max-age=180');
    ctx.set('X-Content-Type-Options', 'nosniff');
    // Shown only inside our own page (the preview's frame), never framed by another site.
    if (inline) ctx.set('Content-Security-Policy', "default-src 'none'; frame-ancestors 'self'");
    if (ctx.get('If-None-Match') === etag) {
      ctx.status = 304;
      return;
    }
    let range: { start: number; end: number } | undefined;
    const header = ctx.get('Range');
    // If-Range: a range applies only while the client's copy is this version.
    if (header && (!ctx.get('If-Range') || ctx.get('If-Range') === etag)) {
      const parsed = parseRange(d.size, header, { combine: true });
      if (parsed === -1 || (Array.isArray(parsed) && parsed.length === 0) || d.size === 0) {
        ctx.set('Content-Range', `bytes */${d.size}`);
        throw new GatewayError(
          'processing-failure/invalid-range',
          `The range is outside the file's ${d.size} bytes`,
        );
      }
      // A multi-range request is answered with the first range only; clients (curl, browsers) accept that.
      if (Array.isArray(parsed)) range = parsed[0];
    }
    ctx.type = inline ?? 'application/octet-stream';
    if (range) {
      ctx.status = 206;
      ctx.set('Content-Range', `bytes ${range.start}-${range.end}/${d.size}`);
      ctx.length = range.end - range.start + 1;
    } else {
      ctx.status = 200;
      ctx.length = d.size;
    }
    if (ctx.method === 'HEAD') return;
    // Aborted when the client goes away, so the store's read stops too.
    const abort = new AbortController();
    ctx.req.once('close', () => abort.abort());
    const opened = await core.files.openSigned(token, range, abort.signal);
    sendFile(ctx, opened.stream);
  };
  router.get('/download/:token', download);
  router.head('/download/:token', download);

  router.put('/upload/:token', async (ctx: RestContext) => {
    const lengthHeader = ctx.get('Content-Length');
    const length = /^\d+$/.test(lengthHeader) ? Number(lengthHeader) : undefined;
    const abort = new AbortController();
    const onClose = () => {
      if (!ctx.req.complete) abort.abort();
    };
    ctx.req.once('close', onClose);
    try {
      const part = await core.files.uploads.receivePart(
        ctx.params.token ?? '',
        ctx.req,
        length,
        abort.signal,
      );
      ctx.set('ETag', `"${part.etag}"`);
      ctx.status = 200;
      ctx.body = '';
    } catch (err) {
      // A part the store had no room for is one failed transfer: one line for the operator (the
      // other front ends' uploads are logged by the core's write handle).
      if (err instanceof GatewayError && err.type === 'processing-failure/insufficient-storage')
        core.log.warn('upload refused: the storage is full', {
          interface: 'restapi',
          ip: ctx.request.ip,
          part: true,
        });
      throw err;
    } finally {
      ctx.req.off('close', onClose);
      // Whatever was not read (an early error) is drained, so the connection stays usable.
      if (!ctx.req.complete) ctx.req.resume();
    }
  });
}
