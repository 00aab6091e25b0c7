/**
 * The REST front end: a Koa app over HTTPS serving SPEC's API at /api/rest/v1, the earlier form
 * of the API (XML, site-wide key) without the prefix, and the operator's endpoints (/healthz, /readyz, /metrics: operations.ts). `buildApp` makes the app
 * without a socket (tests, other listeners); `restFrontEnd` listens.
 */
import { randomUUID } from 'node:crypto';
import type https from 'node:https';
import Koa from 'koa';
import { Router, type RouterMiddleware } from '@koa/router';
import { GatewayError, type Core, type FrontEnd } from '../../src/core/index.ts';
import { closeHttps, createHttpsServer, listen } from '../shared/listener.ts';
import { httpAccess, noteError } from '../shared/observe.ts';
import { acceptProxyProtocol, forwardedFor } from '../shared/proxy.ts';
import { retryAfter } from '../shared/retry.ts';
import { wantsChallenge } from '../shared/web-session.ts';
import { authenticate } from './auth.ts';
import { errorObject, statusOf } from './errors.ts';
import { negotiate, toJson, toXml } from './format.ts';
import { openApiDocument } from './openapi.ts';
import { operations } from './operations.ts';
import type { RestContext, RestRouter, RestState } from './http.ts';
import {
  actionNotificationExportRoutes,
  exportDownloadRoutes,
} from './routes/action_notification_exports.ts';
import { actionWebhookFailureRoutes } from './routes/action_webhook_failures.ts';
import { apiKeyRoutes } from './routes/api_keys.ts';
import { billingDocumentRoutes, billingRoutes } from './routes/billing.ts';
import { bundleRoutes } from './routes/bundles.ts';
import { fileRoutes } from './routes/files.ts';
import { folderRoutes } from './routes/folders.ts';
import { transferRoutes } from './routes/transfers.ts';
import { groupRoutes } from './routes/groups.ts';
import { historyRoutes } from './routes/history.ts';
import { notificationRoutes } from './routes/notifications.ts';
import { permissionRoutes } from './routes/permissions.ts';
import { publicKeyRoutes } from './routes/public_keys.ts';
import { sessionRoutes } from './routes/sessions.ts';
import { userRoutes } from './routes/users.ts';
import { zipRoutes } from './routes/zip.ts';
import { siteRoutes } from './routes/site.ts';
import { connectionRoutes } from './routes/connections.ts';

/** API_PREFIX is where SPEC's versioned API lives. */
export const API_PREFIX = '/api/rest/v1';

// On /files and /folders an extension is part of the file name (SPEC), never a format; so it is
// on /history/files and /history/folders, whose rest is a path too.
const fileTree = /^\/(history\/)?(files|folders|zip)(\/|$)/;

function accountRoutes(router: RestRouter, core: Core): void {
  userRoutes(router, core);
  groupRoutes(router, core);
  permissionRoutes(router, core);
  notificationRoutes(router, core);
  apiKeyRoutes(router, core);
  publicKeyRoutes(router, core);
  historyRoutes(router, core);
  actionWebhookFailureRoutes(router, core);
  actionNotificationExportRoutes(router, core);
  billingRoutes(router, core);
  siteRoutes(router, core);
}

/** referenceRoutes serves the API reference (OpenAPI 3.1, JSON) without credentials. */
function referenceRoutes(router: RestRouter): void {
  // The negotiation has taken `.json` off the path (and answers `.xml` with XML, which this
  // document has no form in).
  router.get('/openapi', (ctx: RestContext) => {
    if (ctx.state.format !== 'json')
      throw new GatewayError(
        'bad-request/unsupported-http-response-format',
        'The API reference is JSON only',
      );
    ctx.set('Cache-Control', 'public, max-age=3600');
    ctx.type = 'application/json; charset=utf-8';
    ctx.body = toJson(openApiDocument());
  });
}

/** toGatewayError turns the errors Koa and its middleware raise into SPEC types; null for bugs. */
function toGatewayError(err: unknown): GatewayError | null {
  if (err instanceof GatewayError) return err;
  if (err instanceof URIError)
    return new GatewayError('bad-request/invalid-path', 'The path is not valid percent-encoded UTF-8');
  const status = (err as { status?: number }).status;
  if (status === 405)
    return new GatewayError('bad-request/method-not-allowed', 'This method is not allowed on this resource');
  if (status === 501)
    return new GatewayError('bad-request/method-not-allowed', 'This method is not implemented');
  if (status && status >= 400 && status < 500)
    return new GatewayError('bad-request/request-params-invalid', (err as Error).message);
  return null;
}

/** clientWentAway tells whether the client ended the request before it was all received. */
function clientWentAway(ctx: Koa.Context): boolean {
  return !ctx.req.complete && (ctx.req.destroyed || ctx.req.socket.destroyed);
}

/**
 * Pages is another front end served on the same listener ahead of the API (the web interface at
 * `/`); main.ts passes it in, so the adapters do not import each other.
 */
export type Pages = (core: Core) => Koa.Middleware;

/** buildApp makes the Koa app of the REST front end. */
export function buildApp(core: Core, pages?: Pages): Koa<RestState> {
  const app = new Koa<RestState>();
  const log = core.log.child({ interface: 'restapi' });
  // Koa reports errors it handled itself (a client that went away mid-response) here; without a
  // listener it prints their stacks to stderr.
  app.on('error', (err: Error) => log.debug('request stream error', { error: err.message }));
  app.use(forwardedFor(core.config.proxy.trusted));
  // A signed URL's token, like a share link's code (/s/<code>), lets anyone who has it in: not logged.
  app.use(
    httpAccess(core, 'restapi', (p) => p.replace(/^\/(download|upload|billing|exports|s)\/[^/]+/, '/$1/…')),
  );

  app.use(async (ctx, next) => {
    try {
      await next();
    } catch (err) {
      let gatewayError = toGatewayError(err);
      const instance = randomUUID();
      if (!gatewayError && clientWentAway(ctx)) {
        // The client cut its request off (an aborted part upload, a dropped connection): a normal
        // event, not a bug; there is nobody to answer and its bytes are already discarded.
        log.info('request cut off by the client', {
          method: ctx.method,
          path: ctx.path,
          error: err instanceof Error ? err.message : String(err),
        });
        ctx.res.destroy();
        return;
      }
      if (!gatewayError) {
        // A bug: logged once here with the id the client also gets; no details leave the server.
        noteError(ctx.res, 'internal-server-error');
        log.error('unexpected error', {
          instance,
          method: ctx.method,
          path: ctx.path,
          error: (err as Error).stack ?? String(err),
        });
        ctx.status = 500;
        const body = {
          error: 'Internal server error',
          'http-code': 500,
          instance,
          title: 'Internal Server Error',
          type: 'internal-server-error',
        };
        ctx.type =
          ctx.state.format === 'xml' ? 'application/xml; charset=utf-8' : 'application/json; charset=utf-8';
        ctx.body = ctx.state.format === 'xml' ? toXml(body, 'error') : toJson(body);
        return;
      }
      ctx.status = statusOf(gatewayError);
      noteError(ctx.res, gatewayError.type);
      if (ctx.status === 401 && wantsChallenge(ctx.path, ctx.get('X-Requested-With')))
        ctx.set('WWW-Authenticate', 'Basic realm="svc-gateway", charset="UTF-8"');
      const retry = retryAfter(gatewayError);
      if (retry) ctx.set('Retry-After', retry);
      const body = errorObject(gatewayError, instance);
      ctx.type =
        ctx.state.format === 'xml' ? 'application/xml; charset=utf-8' : 'application/json; charset=utf-8';
      ctx.body = ctx.state.format === 'xml' ? toXml(body, 'error') : toJson(body);
      gatewayError = null;
    }
  });

  app.use(operations(core) as Koa.Middleware<RestState>);
  if (pages) app.use(pages(core) as Koa.Middleware<RestState>);

  app.use(async (ctx, next) => {
    // The router keeps a segment that is not valid percent-encoded UTF-8 as raw text (and would
    // answer 404 or treat it as a name); DESIGN.md "Path errors" makes it a malformed path.
    try {
      decodeURIComponent(ctx.path);
    } catch {
      throw new GatewayError('bad-request/invalid-path', 'The path is not valid percent-encoded UTF-8');
    }
    const versioned = ctx.path === API_PREFIX || ctx.path.startsWith(`${API_PREFIX}/`);
    // Signed transfer URLs answer bytes, and their errors in JSON.
    const transfer = /^\/(download|upload|billing|exports)\//.test(ctx.path);
    ctx.state.legacy = !versioned && !transfer;
    ctx.state.format = 'json';
    const rest = versioned ? ctx.path.slice(API_PREFIX.length) : ctx.path;
    if (transfer) {
      // no format negotiation
    } else if (fileTree.test(rest)) {
      const chosen = ctx.accepts('application/json', 'application/xml', 'text/xml');
      if (chosen === false)
        throw new GatewayError(
          'bad-request/unsupported-http-response-format',
          'Accept application/json or application/xml',
        );
      ctx.state.format = chosen === 'application/json' ? 'json' : 'xml';
    } else {
      const { format, path } = negotiate(ctx.path, (...types) => ctx.accepts(...types));
      if (ctx.state.legacy) {
        // The earlier form speaks XML only.
        ctx.state.format = 'xml';
        if (/\.json$/i.test(ctx.path))
          throw new GatewayError(
            'bad-request/unsupported-http-response-format',
            'The legacy API answers in XML only',
          );
      } else {
        if (format === null) {
          throw new GatewayError(
            'bad-request/unsupported-http-response-format',
            'Accept application/json or application/xml',
          );
        }
        ctx.state.format = format;
      }
      ctx.path = path;
    }
    await next();
    // allowedMethods (without throw) has set Allow, which RFC 9110 requires on a 405; the body is
    // SPEC's error object.
    if ((ctx.status === 405 || ctx.status === 501) && ctx.body == null) {
      throw new GatewayError('bad-request/method-not-allowed', 'This method is not allowed on this resource');
    }
    if (ctx.status === 404 && ctx.body === undefined) {
      throw new GatewayError('not-found/resource-not-found', `No such resource: ${ctx.method} ${ctx.path}`);
    }
  });

  const mount = (prefix: string, withSessions: boolean) => {
    if (withSessions) {
      const open = new Router<RestState>({ prefix });
      sessionRoutes(open, core);
      referenceRoutes(open);
      app.use(open.routes()).use(open.allowedMethods());
    }
    const guarded = new Router<RestState>({ prefix });
    guarded.use(authenticate(core) as RouterMiddleware<RestState>);
    accountRoutes(guarded, core);
    if (withSessions) {
      // The file tree is in the versioned API only; the earlier form covers accounts.
      folderRoutes(guarded, core);
      fileRoutes(guarded, core);
      zipRoutes(guarded, core);
      bundleRoutes(guarded, core);
      connectionRoutes(guarded, core);
    }
    app.use(guarded.routes()).use(guarded.allowedMethods());
  };
  const transfers = new Router<RestState>();
  transferRoutes(transfers, core);
  billingDocumentRoutes(transfers, core);
  exportDownloadRoutes(transfers, core);
  app.use(transfers.routes()).use(transfers.allowedMethods());
  mount(API_PREFIX, true);
  mount('', false);
  return app;
}

/** restFrontEnd serves the REST API over HTTPS, and `pages` (the web interface) with it. */
export function restFrontEnd(pages?: Pages): FrontEnd {
  let server: https.Server | null = null;
  return {
    name: 'https',
    async start(core, opts) {
      server = createHttpsServer(core, 'restapi', opts.tls, buildApp(core, pages).callback() as never, {
        requestMs: 300_000,
      });
      acceptProxyProtocol(server, core.config.proxy, core.log.child({ interface: 'restapi' }));
      return { port: await listen(server, opts.port, opts.host) };
    },
    async stop() {
      const s = server;
      server = null;
      // Requests still running get a moment to finish before their sockets are cut.
      if (s) await closeHttps(s);
    },
  };
}

export type { RestContext };
