/**
 * The WebDAV front end (RFC 4918 class 1 and 2): Koa middleware over HTTPS with the user's root
 * (after user_root) at `/`. OPTIONS is answered before authentication (Windows asks `/` first and
 * gives up on a 401); every other request authenticates through the core, then one module per
 * method translates it into core calls.
 *
 * Ordering: each request's change is committed before its response, and HTTP/1.1 clients (Finder,
 * Explorer, davfs2, rclone) send a dependent request only after the response to the one it depends
 * on, on the same connection or another; requests in flight together are independent by the
 * client's own choice, so no queue is needed here (unlike SFTP: protocols/sftp/order.ts).
 */
import { randomUUID } from 'node:crypto';
import type https from 'node:https';
import Koa from 'koa';
import { GatewayError, LockedError, type Core, type FrontEnd } from '../../src/core/index.ts';
import { LogThrottle } from '../../src/log.ts';
import { closeHttps, createHttpsServer, holdSession, listen } from '../shared/listener.ts';
import { httpAccess, noteError } from '../shared/observe.ts';
import { presentHttp } from '../shared/presence.ts';
import { acceptProxyProtocol, forwardedFor } from '../shared/proxy.ts';
import { retryAfter } from '../shared/retry.ts';
import { authenticate, basicCredentials } from './auth.ts';
import { DavCondition, statusOf } from './errors.ts';
import { lockTokenSubmitted } from './locks.ts';
import { decodePath, type DavContext, type DavState, type Method } from './http.ts';
import { copy } from './methods/copy.ts';
import { del } from './methods/delete.ts';
import { get } from './methods/get.ts';
import { lock } from './methods/lock.ts';
import { mkcol } from './methods/mkcol.ts';
import { move } from './methods/move.ts';
import { ALLOW, options } from './methods/options.ts';
import { propfind } from './methods/propfind.ts';
import { proppatch } from './methods/proppatch.ts';
import { put } from './methods/put.ts';
import { unlock } from './methods/unlock.ts';

/** methods maps each implemented method to its module. */
export const methods: Record<string, Method> = {
  GET: get,
  HEAD: get,
  PUT: put,
  DELETE: del,
  MKCOL: mkcol,
  COPY: copy,
  MOVE: move,
  PROPFIND: propfind,
  PROPPATCH: proppatch,
  LOCK: lock,
  UNLOCK: unlock,
};

/** buildApp makes the Koa app of the WebDAV front end. */
export function buildApp(core: Core): Koa<DavState> {
  const app = new Koa<DavState>();
  const log = core.log.child({ interface: 'dav' });
  // Koa reports here what happens after a response started, mostly clients that went away
  // mid-transfer (an aborted PUT is a parse error of the unfinished request): not a server fault.
  app.on('error', (err: Error) => log.debug('connection ended early', { error: err.message }));
  app.use(forwardedFor(core.config.proxy.trusted));
  app.use(httpAccess(core, 'dav'));

  const outages = new LogThrottle();

  /**
   * failed logs a request that failed, once, at info, so an operator sees what a mount hit (a
   * lock, a permission, a refused name). Not logged: a plain 404, which clients ask all the time
   * (Finder probes for `._` files, rclone for what it may upload), and the 401 challenge to a
   * request without credentials, HTTP's first step with every client (a wrong password is a
   * `failedlogin` Action already). `status` is null when the client went away mid-request.
   */
  const failed = (ctx: DavContext, status: number | null, err: Error): void => {
    if (status === 404 || (status === 401 && !ctx.get('Authorization'))) return;
    if (err instanceof GatewayError) {
      // A full storage is logged once per upload by the core already, a refused session by the limits.
      if (err.type === 'processing-failure/insufficient-storage') return;
      if (err.type === 'rate-limited/too-many-concurrent-requests') return;
      // An outage fails every request alike: a few lines per cause, not one per request.
      if (err.family === 'service-unavailable' && !outages.take(err.type)) return;
    }
    const principal = ctx.state.principal as DavState['principal'] | undefined;
    const user = principal
      ? (principal.user?.username ?? 'api-key')
      : (basicCredentials(ctx.get('Authorization'))?.username ?? '');
    log.child({ user, ip: ctx.request.ip }).info('request failed', {
      method: ctx.method,
      path: ctx.state.path === undefined ? ctx.path : `/${ctx.state.path}`,
      status,
      ...(err instanceof GatewayError ? { type: err.type } : {}),
      error: err.message,
    });
  };

  app.use(async (ctx, next) => {
    try {
      await next();
    } catch (thrown) {
      let err = thrown;
      // A client that went away gets nothing; what it sent is already discarded by the core.
      if (ctx.res.headersSent || ctx.req.socket.destroyed) {
        if (!(err instanceof GatewayError))
          log.warn('request failed', { method: ctx.method, error: String(err) });
        else {
          noteError(ctx.res, err.type);
          failed(ctx as DavContext, null, err);
        }
        ctx.res.destroy();
        return;
      }
      // A lock's refusal comes from the core, which applies the rule on every front end.
      if (err instanceof LockedError) {
        noteError(ctx.res, err.type);
        err = lockTokenSubmitted(err);
      }
      if (err instanceof DavCondition) {
        ctx.status = err.status;
        ctx.type = err.condition ? 'application/xml; charset=utf-8' : 'text/plain; charset=utf-8';
        ctx.body = err.body();
        failed(ctx as DavContext, err.status, err);
        return;
      }
      if (err instanceof GatewayError) {
        ctx.status = statusOf(err);
        noteError(ctx.res, err.type);
        if (ctx.status === 401) ctx.set('WWW-Authenticate', 'Basic realm="svc-gateway", charset="UTF-8"');
        if (ctx.status === 405) ctx.set('Allow', (ctx.state as Partial<DavState>).allow ?? ALLOW);
        const retry = retryAfter(err);
        if (retry) ctx.set('Retry-After', retry);
        // The rest of an oversized body is not read: close the connection rather than drain it.
        if (ctx.status === 413) ctx.set('Connection', 'close');
        ctx.type = 'text/plain; charset=utf-8';
        ctx.body = `${err.message}\n`;
        failed(ctx as DavContext, ctx.status, err);
        return;
      }
      // A bug: logged once here with the id the client also gets; no details leave the server.
      const instance = randomUUID();
      noteError(ctx.res, 'internal-server-error');
      log.error('unexpected error', {
        instance,
        method: ctx.method,
        path: ctx.path,
        error: (err as Error).stack ?? String(err),
      });
      ctx.status = 500;
      ctx.type = 'text/plain; charset=utf-8';
      ctx.body = `Internal server error (${instance})\n`;
    }
  });

  app.use(async (ctx, next) => {
    if (ctx.method === 'OPTIONS') return options(ctx);
    const method = methods[ctx.method];
    if (!method) throw new GatewayError('bad-request/method-not-allowed', `${ctx.method} is not supported`);
    const principal = await authenticate(core, ctx as DavContext);
    ctx.state.principal = principal;
    holdSession(core, 'dav', principal, ctx.res, ctx.request.ip);
    ctx.state.session = core.files.session(principal);
    // ctx.path is the raw, still percent-encoded path: each segment is decoded once, here.
    // A fragment is never part of a request URL; taking the path before it would act on another resource.
    if (ctx.url.includes('#'))
      throw new GatewayError('bad-request/invalid-path', 'A request URL has no fragment');
    ctx.state.path = decodePath(ctx.path);
    const way = ctx.method === 'GET' ? 'out' : ctx.method === 'PUT' ? 'in' : null;
    const transfer = way && ({ path: `/${ctx.state.path}`, direction: way } as const);
    presentHttp(core, 'dav', principal, ctx.req, ctx.res, ctx.request.ip, transfer || undefined);
    await method(ctx as DavContext, core);
    await next();
  });
  return app;
}

/** webdavFrontEnd serves WebDAV over HTTPS. */
export function webdavFrontEnd(): FrontEnd {
  let server: https.Server | null = null;
  return {
    name: 'webdav',
    async start(core, opts) {
      // Large uploads and downloads take as long as they take; idle sockets still time out.
      server = createHttpsServer(core, 'dav', opts.tls, buildApp(core).callback() as never, { requestMs: 0 });
      acceptProxyProtocol(server, core.config.proxy, core.log.child({ interface: 'dav' }));
      return { port: await listen(server, opts.port, opts.host) };
    },
    async stop() {
      const s = server;
      server = null;
      if (s) await closeHttps(s);
    },
  };
}
