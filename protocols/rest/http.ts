/**
 * The REST adapter's request plumbing shared by every route: who is calling (credentials →
 * core → Principal), what they sent (body, query, pagination) and how to answer (format, cursor
 * headers). No rule lives here; the core decides.
 */
import type { Router, RouterContext } from '@koa/router';
import { GatewayError, type Core, type Page, type Principal } from '../../src/core/index.ts';
import { parseQuery, readBody, toJson, toXml, type Format } from './format.ts';

/** RestState is what the middleware stack leaves on ctx.state for the routes. */
export interface RestState {
  format: Format;
  /** the legacy form (no /api/rest/v1 prefix): XML only, Basic with a site-wide key */
  legacy: boolean;
  principal?: Principal;
  /** the session id the request authenticated with, for DELETE /sessions */
  sessionId?: string;
}

/** RestContext is a Koa context of the REST app. */
export type RestContext = RouterContext<RestState>;
/** RestRouter is the router every routes/<resource>.ts registers on. */
export type RestRouter = Router<RestState>;

/** send answers with a resource (root = its XML element name) in the negotiated format. */
export function send(ctx: RestContext, status: number, value: unknown, root: string): void {
  ctx.status = status;
  if (ctx.state.format === 'xml') {
    ctx.type = 'application/xml; charset=utf-8';
    ctx.body = toXml(value, root);
  } else {
    ctx.type = 'application/json; charset=utf-8';
    ctx.body = toJson(value);
  }
}

/** sendPage answers with one page of a list and SPEC's X-Svc-Cursor-Next / -Prev headers. */
export function sendPage<T>(ctx: RestContext, page: Page<T>, root: string): void {
  if (page.next) ctx.set('X-Svc-Cursor-Next', page.next);
  if (page.prev) ctx.set('X-Svc-Cursor-Prev', page.prev);
  send(ctx, 200, page.items, root);
}

/** sendEmpty answers SPEC's "empty array" success (DELETE and friends). */
export function sendEmpty(ctx: RestContext, status = 200): void {
  send(ctx, status, [], 'nil-classes');
}

/** body reads the request's fields (JSON, XML or form). */
export function body(ctx: RestContext, core: Core): Promise<Record<string, unknown>> {
  return readBody(ctx.req, core.config.api.max_body_bytes);
}

/** query reads the query string with bracket fields. */
export function query(ctx: RestContext): Record<string, unknown> {
  return parseQuery(ctx.querystring);
}

/** principal is the authenticated caller (routes behind `authenticate` always have one). */
export function principal(ctx: RestContext): Principal {
  if (!ctx.state.principal) throw new GatewayError('not-authenticated/authentication-required');
  return ctx.state.principal;
}

/** idParam reads an integer `:id` path segment; anything else is a 404 of that resource. */
export function idParam(ctx: RestContext, notFound: GatewayError['type']): number {
  const raw = ctx.params.id ?? '';
  // Ids are 32-bit columns; a larger number names nothing (and PostgreSQL refuses it in a query).
  if (!/^\d{1,10}$/.test(raw) || Number(raw) > 2147483647)
    throw new GatewayError(notFound, `${raw} is not an id`);
  return Number(raw);
}

/** header reads one request header as a string. */
export function header(ctx: RestContext, name: string): string | undefined {
  const v = ctx.get(name);
  return v === '' ? undefined : v;
}
