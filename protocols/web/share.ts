/**
 * The recipient's side of share links, without an account, under /s/<code>: the page itself (the
 * same bundle as the rest of the web interface, which shows the link when its path starts with
 * /s/), and the calls it makes:
 *
 *   GET  /s/<code>/info               what is shared (kind, items, uses left)
 *   POST /s/<code>/password           JSON {password}: sets the link's cookie (never in the URL)
 *   GET  /s/<code>/list/<path>        a folder inside the link (page, per_page)
 *   GET  /s/<code>/files/<path>       one file, as an attachment
 *   GET  /s/<code>/preview/<path>     one file shown in place: an image or PDF inline, anything
 *                                     else its first 256 KiB for a text preview (download and
 *                                     preview links)
 *   GET  /s/<code>/zip                everything, as one zip streamed as it is read
 *   PUT  /s/<code>/files/<name>       upload one file (the body) into an upload link's folder
 *
 * A thin adapter: the core (core.bundles) checks the link, the password's grant and every right,
 * as the sharer, and records each use with interface `web` and the recipient's address.
 */
import contentDisposition from 'content-disposition';
import { Readable } from 'node:stream';
import type Koa from 'koa';
import { GatewayError, GRANT_TTL_S, type BundleVisit, type Core } from '../../src/core/index.ts';
import { sendFile } from '../shared/observe.ts';
import { PREVIEW_TEXT_BYTES, previewType } from '../shared/preview.ts';
import { decodePath, pageParams } from '../shared/url-params.ts';
import { streamZip } from '../shared/zip.ts';

/** BUNDLE_COOKIE names the cookie an accepted password sets, scoped to its link's path. */
export const BUNDLE_COOKIE = 'SvcBundle';

/** ShareHelpers are what the web pages lend the share routes (the page, JSON bodies, origin checks). */
export interface ShareHelpers {
  page(ctx: Koa.Context): void;
  readJson(ctx: Koa.Context, limit: number): Promise<Record<string, unknown>>;
  requireSameOrigin(ctx: Koa.Context): void;
}

const ROUTE = /^\/s\/([^/]+)(?:\/(info|password|list|files|preview|zip)(?:\/(.*))?)?\/?$/;

/** firstBytes yields the first `limit` bytes of `source`, then ends it (a text preview's share). */
async function* firstBytes(source: AsyncIterable<Buffer>, limit: number): AsyncGenerator<Buffer> {
  let left = limit;
  for await (const chunk of source) {
    yield chunk.length <= left ? chunk : chunk.subarray(0, left);
    left -= chunk.length;
    // Leaving the loop destroys the source: the rest is never read.
    if (left <= 0) return;
  }
}

/**
 * sharePages answers /s/… (and returns false for any other path). Errors are thrown as
 * GatewayErrors, which the REST app's handler answers with SPEC's error object.
 */
export function sharePages(core: Core, helpers: ShareHelpers) {
  const cookieOptions = (code: string) =>
    ({
      secure: true,
      httpOnly: true,
      sameSite: 'strict',
      // Scoped to this link: no other link, and nothing else on the site, ever receives it.
      path: `/s/${code}`,
      overwrite: true,
      maxAge: GRANT_TTL_S * 1000,
    }) as const;

  const visit = (ctx: Koa.Context, code: string): Promise<BundleVisit> =>
    core.bundles.visit(code, ctx.request.ip, ctx.cookies.get(BUNDLE_COOKIE));

  const json = (ctx: Koa.Context, status: number, value: unknown) => {
    ctx.status = status;
    ctx.set('Cache-Control', 'no-store');
    ctx.type = 'application/json; charset=utf-8';
    ctx.body = JSON.stringify(value);
  };

  // A download stops when its client goes away; an upload only when its body was cut off (the
  // request also closes once its body was read whole).
  const abortOnClose = (ctx: Koa.Context, upload = false) => {
    const abort = new AbortController();
    ctx.req.once('close', () => {
      if (!upload || !ctx.req.complete) abort.abort();
    });
    return abort.signal;
  };

  return async (ctx: Koa.Context): Promise<boolean> => {
    if (!ctx.path.startsWith('/s/')) return false;
    const m = ROUTE.exec(ctx.path);
    if (!m) throw new GatewayError('not-found/resource-not-found', `No such resource: ${ctx.path}`);
    const code = m[1]!;
    const what = m[2];
    const rest = decodePath(m[3] ?? '');
    const { method } = ctx;
    const read = method === 'GET' || method === 'HEAD';
    const allow = (methods: string) => {
      ctx.set('Allow', methods);
      throw new GatewayError('bad-request/method-not-allowed', `Use ${methods} here`);
    };

    if (!what) {
      if (!read) allow('GET');
      helpers.page(ctx);
      return true;
    }
    if (what === 'password') {
      if (method !== 'POST') allow('POST');
      helpers.requireSameOrigin(ctx);
      const fields = await helpers.readJson(ctx, 8 * 1024);
      const given = typeof fields.password === 'string' ? fields.password : '';
      const grant = await core.bundles.unlock(code, ctx.request.ip, given);
      ctx.cookies.set(BUNDLE_COOKIE, grant, cookieOptions(code));
      json(ctx, 200, {});
      return true;
    }
    if (what === 'info') {
      if (!read) allow('GET');
      json(ctx, 200, await (await visit(ctx, code)).open());
      return true;
    }
    if (what === 'list') {
      if (!read) allow('GET');
      const q = Object.fromEntries(new URLSearchParams(ctx.querystring));
      const entries = await (
        await visit(ctx, code)
      ).list(rest, { sort: 'path', direction: 'asc', ...pageParams(q) });
      json(ctx, 200, entries);
      return true;
    }
    if (what === 'preview') {
      if (method !== 'GET') allow('GET');
      const v = await visit(ctx, code);
      const name = rest.slice(rest.lastIndexOf('/') + 1);
      const inline = previewType(name);
      const d = await v.openRead(rest, { signal: abortOnClose(ctx), preview: true });
      ctx.status = 200;
      // Only images and PDF are shown in place; anything else is bytes for the page to show as text.
      ctx.type = inline ?? 'application/octet-stream';
      ctx.set('Content-Disposition', contentDisposition(name, { type: inline ? 'inline' : 'attachment' }));
      if (inline) ctx.set('Content-Security-Policy', "default-src 'none'; frame-ancestors 'self'");
      ctx.set('X-Content-Type-Options', 'nosniff');
      ctx.set('Cache-Control', 'no-store');
      ctx.body = inline ? d.stream : Readable.from(firstBytes(d.stream, PREVIEW_TEXT_BYTES));
      return true;
    }
    // A download counts as a use, so HEAD (which would count one for nothing) is not offered.
    if (what === 'zip') {
      if (method !== 'GET') allow('GET');
      const v = await visit(ctx, code);
      // Everything that can refuse does so before the first byte, while it can be a status.
      const top = await v.list('', { sort: 'path', direction: 'asc', offset: 0, limit: 5000 });
      await v.startZip();
      const signal = abortOnClose(ctx);
      const source = {
        listAll: v.listAll.bind(v),
        openRead: async (path: string, s: AbortSignal) =>
          (await v.openRead(path, { signal: s, count: false })).stream,
      };
      ctx.status = 200;
      ctx.type = 'application/zip';
      ctx.set('Content-Disposition', contentDisposition(`${v.name}.zip`));
      ctx.set('Cache-Control', 'no-store');
      ctx.body = await streamZip(source, { folder: '', top, prefix: '', signal });
      return true;
    }
    // files
    if (method === 'GET') {
      const v = await visit(ctx, code);
      const d = await v.openRead(rest, { signal: abortOnClose(ctx) });
      ctx.status = 200;
      // Never shown inline: a shared HTML file must not run as this site's page.
      ctx.type = 'application/octet-stream';
      ctx.set('Content-Disposition', contentDisposition(rest.slice(rest.lastIndexOf('/') + 1)));
      ctx.set('X-Content-Type-Options', 'nosniff');
      ctx.set('Cache-Control', 'no-store');
      if (d.entry.size !== null) ctx.length = d.entry.size;
      sendFile(ctx, d.stream);
      return true;
    }
    if (method !== 'PUT' && method !== 'POST') allow('GET, PUT');
    let v: BundleVisit;
    try {
      v = await visit(ctx, code);
    } catch (err) {
      ctx.req.resume();
      throw err;
    }
    const entry = await v.upload(rest, ctx.req, abortOnClose(ctx, true));
    json(ctx, 201, entry);
    return true;
  };
}
