/**
 * The operator's endpoints on the HTTPS port, outside the API: GET /healthz (liveness: the process
 * answers), GET /readyz (readiness: database and blob store answer, not draining) and GET /metrics
 * (Prometheus text format). /metrics needs no user account: it answers client addresses in
 * `metrics.allowed_ips` (loopback by default) and requests carrying `metrics.token` as a bearer
 * token; anyone else gets 403, so the internet cannot read it.
 */
import type Koa from 'koa';
import type { Core } from '../../src/core/index.ts';

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
        if (!core.metrics.mayScrape(ctx.request.ip, ctx.get('Authorization'))) {
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
