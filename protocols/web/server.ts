/**
 * The web interface's server side: the page and its hashed assets (bundled at install time by
 * protocols/web/build.js into dist/web/), and sign-in, "who am I" and sign-out at /web/session.
 * Everything else the page does goes through the REST API with the web session cookie
 * (protocols/shared/web-session.ts), so the core checks every right and records every Action
 * with interface `web`; nothing here decides a permission.
 */
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type Koa from 'koa';
import { GatewayError, type Core, type Principal, type User } from '../../src/core/index.ts';
import {
  CSRF_HEADER,
  WEB_COOKIE,
  WEB_COOKIE_OPTIONS,
  csrfToken,
  requireCsrf,
} from '../shared/web-session.ts';
import { sharePages } from './share.ts';

/** BUNDLE_DIR is where `npm run compile` leaves the page: index.html and assets/. */
export const BUNDLE_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../dist/web');
// Compiled, this file runs from dist/protocols/web/: the bundle is then ../../web.
const bundleDir = () =>
  existsSync(path.join(BUNDLE_DIR, 'index.html'))
    ? BUNDLE_DIR
    : path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../web');

const TYPES: Record<string, string> = {
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.map': 'application/json; charset=utf-8',
  '.html': 'text/html; charset=utf-8',
};

interface Asset {
  body: Buffer;
  type: string;
  etag: string;
}

/** loadBundle reads the page and its assets once (they are small and never change while running). */
function loadBundle(): { index: Asset; assets: Map<string, Asset> } | null {
  const dir = bundleDir();
  const indexFile = path.join(dir, 'index.html');
  if (!existsSync(indexFile)) return null;
  const asset = (file: string): Asset => {
    const body = readFileSync(file);
    const etag = `"${createHash('sha256').update(body).digest('base64url').slice(0, 22)}"`;
    return { body, etag, type: TYPES[path.extname(file)] ?? 'application/octet-stream' };
  };
  const assets = new Map<string, Asset>();
  const assetDir = path.join(dir, 'assets');
  if (existsSync(assetDir)) {
    for (const name of readdirSync(assetDir)) assets.set(name, asset(path.join(assetDir, name)));
  }
  return { index: asset(indexFile), assets };
}

/**
 * contentSecurityPolicy allows only the page's own scripts and styles (no inline code) and
 * requests to its own origin, plus the S3 endpoint that presigned part URLs point at; frames only
 * from its own origin (a PDF preview in the browser's viewer).
 */
function contentSecurityPolicy(core: Core): string {
  const { kind, s3 } = core.config.storage;
  const endpoint = s3.endpoint;
  let s3Origin: string[] = [];
  try {
    if (kind === 's3' && endpoint) s3Origin = [new URL(endpoint).origin];
  } catch {
    // a bucket on AWS's default endpoint: no custom origin to name
  }
  const connect = ["'self'", ...s3Origin];
  return [
    "default-src 'none'",
    "script-src 'self'",
    "style-src 'self'",
    "img-src 'self' blob: data:",
    "frame-src 'self'",
    `connect-src ${connect.join(' ')}`,
    "base-uri 'none'",
    "form-action 'self'",
    "frame-ancestors 'none'",
  ].join('; ');
}

/** userView is what the page needs to know about who is signed in, and when an idle session ends. */
function userView(u: User, csrf: string, idleMinutes: number, adminFolders: string[]) {
  return {
    csrf,
    idle_timeout_seconds: Math.round(idleMinutes * 60),
    user: {
      id: u.id,
      username: u.username,
      name: u.name,
      email: u.email,
      self_managed: u.self_managed,
      site_admin: u.site_admin,
      attachments_permission: u.attachments_permission,
      user_root: u.user_root,
      /** where the admin pages apply: [''] for a site admin, a Folder Admin's folders, or none */
      admin_folders: adminFolders,
    },
  };
}

async function readJson(ctx: Koa.Context, limit: number): Promise<Record<string, unknown>> {
  // A JSON body cannot be sent cross-origin without a CORS preflight, which we never grant.
  if (!ctx.is('application/json'))
    throw new GatewayError('bad-request/unsupported-media-type', 'Send the sign-in as application/json');
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of ctx.req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > limit) throw new GatewayError('bad-request/invalid-body', 'The request body is too large');
    chunks.push(chunk);
  }
  try {
    const value: unknown = JSON.parse(Buffer.concat(chunks).toString('utf8'));
    if (value && typeof value === 'object' && !Array.isArray(value)) return value as Record<string, unknown>;
  } catch {
    // answered below
  }
  throw new GatewayError('bad-request/invalid-body', 'The body is not a JSON object');
}

/** sameOrigin refuses a sign-in posted from another site (a login CSRF). */
function requireSameOrigin(ctx: Koa.Context): void {
  const origin = ctx.get('Origin');
  const fetchSite = ctx.get('Sec-Fetch-Site');
  // Built from the request line: Koa 3's ctx.origin echoes the Origin header when there is one.
  const own = `${ctx.protocol}://${ctx.host}`;
  if ((origin && origin !== own) || (fetchSite && fetchSite !== 'same-origin' && fetchSite !== 'none')) {
    throw new GatewayError('not-authenticated/authentication-required', 'Sign in from this site’s own page');
  }
}

/**
 * webPages serves the page, its assets and /web/session; other requests pass on to the REST API.
 * It runs inside the REST app's error handler, so a GatewayError becomes SPEC's error object.
 */
export function webPages(core: Core): Koa.Middleware {
  const log = core.log.child({ interface: 'web' });
  const bundle = loadBundle();
  if (!bundle) log.warn('the web interface is not built; run `npm run compile`', { dir: BUNDLE_DIR });
  const csp = contentSecurityPolicy(core);

  const sendAsset = (ctx: Koa.Context, asset: Asset, cache: string) => {
    ctx.set('Content-Security-Policy', csp);
    ctx.set('X-Content-Type-Options', 'nosniff');
    ctx.set('Referrer-Policy', 'no-referrer');
    ctx.set('X-Frame-Options', 'DENY');
    ctx.set('Cache-Control', cache);
    ctx.set('ETag', asset.etag);
    ctx.type = asset.type;
    if (ctx.get('If-None-Match') === asset.etag) {
      ctx.status = 304;
      return;
    }
    ctx.status = 200;
    ctx.body = asset.body;
  };

  const session = async (ctx: Koa.Context) => {
    const id = ctx.cookies.get(WEB_COOKIE);
    if (!id) throw new GatewayError('not-authenticated/authentication-required', 'Not signed in');
    const principal: Principal = await core.sessions.authenticate(id, 'web', ctx.request.ip);
    return { id, principal };
  };

  const page = (ctx: Koa.Context) => {
    if (!bundle) {
      ctx.status = 503;
      ctx.type = 'text/plain; charset=utf-8';
      ctx.body = 'The web interface is not built: run `npm run compile` and restart.\n';
      return;
    }
    // The page names its assets by content hash, so only the page itself is revalidated.
    sendAsset(ctx, bundle.index, 'no-cache');
  };
  const shares = sharePages(core, { page, readJson, requireSameOrigin });

  return async (ctx, next) => {
    const { method } = ctx;
    const read = method === 'GET' || method === 'HEAD';
    if (await shares(ctx)) return;
    if (read && (ctx.path === '/' || ctx.path === '/index.html')) {
      page(ctx);
      return;
    }
    if (read && ctx.path.startsWith('/assets/')) {
      const asset = bundle?.assets.get(ctx.path.slice('/assets/'.length));
      if (!asset) throw new GatewayError('not-found/resource-not-found', `No such asset: ${ctx.path}`);
      sendAsset(ctx, asset, 'public, max-age=31536000, immutable');
      return;
    }
    if (ctx.path !== '/web/session') return next();
    const me = async (principal: Principal, id: string) =>
      userView(
        await core.users.get(principal, principal.user!.id),
        csrfToken(id),
        core.config.sessions.idle_timeout_minutes,
        await core.permissions.adminFolders(principal),
      );
    ctx.set('Cache-Control', 'no-store');
    if (method === 'GET') {
      const { id, principal } = await session(ctx);
      ctx.body = await me(principal, id);
      return;
    }
    if (method === 'POST') {
      requireSameOrigin(ctx);
      const fields = await readJson(ctx, 64 * 1024);
      const { id, principal } = await core.sessions.create({
        interface: 'web',
        ip: ctx.request.ip,
        username: typeof fields.username === 'string' ? fields.username : '',
        password: typeof fields.password === 'string' ? fields.password : '',
      });
      ctx.cookies.set(WEB_COOKIE, id, WEB_COOKIE_OPTIONS);
      ctx.body = await me(principal, id);
      return;
    }
    if (method === 'DELETE') {
      const id = ctx.cookies.get(WEB_COOKIE);
      if (id) {
        requireCsrf(method, ctx.get(CSRF_HEADER), id);
        await core.sessions.destroy(id);
      }
      ctx.cookies.set(WEB_COOKIE, null, WEB_COOKIE_OPTIONS);
      ctx.body = {};
      return;
    }
    ctx.set('Allow', 'GET, POST, DELETE');
    throw new GatewayError('bad-request/method-not-allowed', 'Use GET, POST or DELETE on /web/session');
  };
}
