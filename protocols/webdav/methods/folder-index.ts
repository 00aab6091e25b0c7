/**
 * GET and HEAD on a folder: a plain HTML page listing its entries (RFC 4918 §9.4 leaves a
 * collection's GET to the server; Apache's mod_dav with autoindex and rclone's `serve webdav`
 * answer the same way). lftp's `open https://…` checks a folder with HEAD and lists it with GET,
 * and stops at a 405 ("cd: Operation not supported"); a browser pointed at the WebDAV address
 * shows the listing instead of an error. Streamed a page of the folder at a time, as PROPFIND is.
 */
import { Readable } from 'node:stream';
import type { Entry } from '../../../src/core/index.ts';
import { hrefOf, type DavContext } from '../http.ts';
import { escapeXml } from '../xml.ts';

const PAGE = 500;

const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];
const two = (n: number) => String(n).padStart(2, '0');

/** indexDate is nginx autoindex's time (27-Nov-2026 22:43, UTC), which lftp reads back. */
function indexDate(d: Date): string {
  return `${two(d.getUTCDate())}-${MONTHS[d.getUTCMonth()]}-${d.getUTCFullYear()} ${two(d.getUTCHours())}:${two(d.getUTCMinutes())}`;
}

/**
 * row is one entry's line, laid out as nginx's autoindex lays it out (the name's link, padded to
 * column 51, the time, the size right-aligned; `-` for a folder), so lftp's `ls` shows sizes and
 * times. The link is relative, so it works behind any prefix, and never read as a scheme:
 * encodeURIComponent encodes a name's ':' too.
 */
function row(e: Entry): string {
  const name = `${e.path.slice(e.path.lastIndexOf('/') + 1)}${e.type === 'directory' ? '/' : ''}`;
  const href =
    e.type === 'directory' ? `${encodeURIComponent(name.slice(0, -1))}/` : encodeURIComponent(name);
  const size = e.type === 'directory' ? '-' : String(e.size ?? 0);
  const pad = ' '.repeat(Math.max(1, 51 - [...name].length));
  return `<a href="${href}">${escapeXml(name)}</a>${pad}${indexDate(e.mtime)} ${size.padStart(19)}\n`;
}

/** folderIndex answers GET or HEAD on the request's path, known to be a folder. */
export async function folderIndex(ctx: DavContext): Promise<void> {
  const { session, path } = ctx.state;
  if (!ctx.path.endsWith('/')) {
    // As Apache and nginx do: the page's relative links, and lftp's idea of where `cd` went (it
    // puts a file next to the URL it holds), need the folder's address to end in a slash. The
    // Location is relative ("./", so a name with ':' is no scheme) to work behind any prefix.
    const last = ctx.path.slice(ctx.path.lastIndexOf('/') + 1);
    ctx.status = 301;
    ctx.set('Location', `./${last}/${ctx.querystring ? `?${ctx.querystring}` : ''}`);
    return;
  }
  const pages = session.listAll(path, PAGE);
  // The first page is read before the status is sent, so a refusal (no list right) is its own
  // answer rather than a cut page.
  const first = await pages.next();
  const title = escapeXml(path === '' ? '/' : hrefOf(path, true));
  ctx.status = 200;
  ctx.type = 'text/html; charset=utf-8';
  // No Last-Modified or ETag: a folder's time need not move when its entries change, and a
  // revalidated page must not be a stale one.
  ctx.set('Cache-Control', 'no-cache');
  // Names are the users' own text: nothing on the page may run or load anything.
  ctx.set('Content-Security-Policy', "default-src 'none'");
  ctx.set('X-Content-Type-Options', 'nosniff');
  if (ctx.method === 'HEAD') {
    await pages.return(undefined);
    return;
  }
  async function* html(): AsyncGenerator<string> {
    yield `<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>Index of ${title}</title></head>\n<body>\n<h1>Index of ${title}</h1><hr><pre>`;
    if (path !== '') yield '<a href="../">../</a>\n';
    if (!first.done) yield first.value.map(row).join('');
    for await (const entries of pages) yield entries.map(row).join('');
    yield '</pre><hr></body>\n</html>\n';
  }
  ctx.body = Readable.from(html());
}
