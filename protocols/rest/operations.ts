/**
 * The operator's endpoints on the HTTPS port, outside the API: GET /healthz (liveness: the process
 * answers), GET /readyz (readiness: database and blob store answer, not draining) and GET /metrics
 * (Prometheus text format). /metrics needs no user account: it answers client addresses in
 * `metrics.allowed_ips` (loopback by default) and requests carrying `metrics.token` as a bearer
 * token; anyone else gets 403, so the internet cannot read it.
 */
import { timingSafeEqual } from 'node:crypto';
import type Koa from 'koa';
import { clientIp, ipInList, type Core } from '../../src/core/index.ts';

/** tokenMatches compares a bearer token with the setting in constant time. */
function tokenMatches(authorization: string, token: string): boolean {
  if (!token) return false;
  const m = /^Bearer\s+(\S+)$/i.exec(authorization);
  if (!m) return false;
  const sent = Buffer.from(m[1]!);
  const want = Buffer.from(token);
  return sent.length === want.length && timingSafeEqual(sent, want);
}

/** mayScrape tells whether a request may read /metrics: an allowed address, or the token. */
function mayScrape(core: Core, ip: string, authorization: string): boolean {
  const { allowed_ips: allowed, token } = core.config.metrics;
  return (allowed.length > 0 && ipInList(clientIp(ip), allowed)) || tokenMatches(authorization, token);
}

/**
 * operations answers GET (and HEAD) /healthz, /readyz and /metrics, and passes every other request
 * on. Its answers are plain JSON or text: they are for balancers and Prometheus, not API clients.
 */
export function operations(core: Core): Koa.Middleware {
  return async (ctx, next) => {
    if (ctx.method !== 'GET' && ctx.method !== 'HEAD') return next();
    ctx.set('Cache-Control', 'no-store');
    switch (ctx.path) {
      case '/healthz':
        ctx.body = { status: 'ok' };
        return;
      case '/readyz': {
        const report = await core.readiness();
        ctx.status = report.ready ? 200 : 503;
        ctx.body = { status: report.ready ? 'ready' : 'not ready', ...report.checks };
        return;
      }
      case '/metrics':
        if (!mayScrape(core, ctx.request.ip, ctx.get('Authorization'))) {
          ctx.status = 403;
          ctx.type = 'text/plain; charset=utf-8';
          ctx.body =
            'Forbidden: /metrics answers the addresses in metrics.allowed_ips (SVC_METRICS_ALLOWED_IPS) or the bearer token metrics.token (SVC_METRICS_TOKEN)\n';
          return;
        }
        ctx.type = core.metrics.contentType;
        ctx.body = await core.metrics.text();
        return;
      default:
        return next();
    }
  };
}
