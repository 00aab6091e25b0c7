/**
 * Access lines and transfer metrics, once for every front end (issue 16, item 3): one JSON line
 * per HTTP request (REST, web, WebDAV), per FTP command and per SFTP request batch, and one per file
 * transfer, each carrying the request id, user, interface, client address, status, bytes and
 * duration, at the level `log_access` sets (info, debug or off). The same calls count the
 * requests, errors (by SPEC type) and transfers in the core's metrics, so what the log says and
 * what /metrics counts cannot drift apart. Adapters call these; they count nothing themselves.
 */
import { randomUUID } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import { Readable } from 'node:stream';
import type Koa from 'koa';
import { GatewayError, readBytes, type Core, type Interface, type Principal } from '../../src/core/index.ts';
import type { Logger } from '../../src/log.ts';

/** Direction is a transfer's way: `in` an upload, `out` a download. */
export type Direction = 'in' | 'out';

/** REQUEST_ID_HEADER carries a request's id: taken from the client (a balancer's) when sane, and always answered. */
export const REQUEST_ID_HEADER = 'X-Request-Id';

/** accessLevel is the level access lines are written at, or null when `log_access` is off. */
function accessLevel(core: Core): 'info' | 'debug' | null {
  const level = core.config.log_access;
  return level === 'off' ? null : level;
}

/** userOf names a principal in log lines: its username, or `api-key` for a site-wide key. */
export function userOf(principal: Principal | null | undefined): string | undefined {
  if (!principal) return undefined;
  return principal.user?.username ?? 'api-key';
}

/** Outcome is what a request came to: its status in the protocol's terms and, for a failure, its SPEC type. */
export interface Outcome {
  /** the protocol's status: an HTTP status, an FTP reply code, an SFTP status name */
  status: number | string;
  /** whether the request failed (an error answered, or the client gone) */
  failed: boolean;
  /** the SPEC error type answered, or internal-server-error for a bug */
  error?: string | undefined;
}

/**
 * access writes one access line and counts the request (and its error, by SPEC type). `fields`
 * are the protocol's own (method and path, an FTP command, SFTP request counts).
 */
export function access(
  core: Core,
  log: Logger,
  iface: Interface,
  outcome: Outcome,
  fields: Record<string, unknown>,
): void {
  core.metrics.requests.inc({ interface: iface, outcome: outcome.failed ? 'error' : 'ok' });
  if (outcome.error) core.metrics.errors.inc({ interface: iface, type: outcome.error });
  const level = accessLevel(core);
  if (!level) return;
  log.log(level, 'access', {
    interface: iface,
    ...fields,
    status: outcome.status,
    ...(outcome.error ? { error: outcome.error } : {}),
  });
}

/** Transfer is one file transfer as it ended. */
export interface Transfer {
  direction: Direction;
  /** the file as the client named it */
  path: string;
  bytes: number;
  /** when it started (Date.now()) */
  started: number;
  ok: boolean;
  /** the request (HTTP) or command (FTP) it belongs to */
  request_id?: string | undefined;
  /** the SPEC error type it failed with, counted among the errors (HTTP counts its request's instead) */
  error?: string | undefined;
}

/**
 * transferred counts a finished (or failed) file transfer's bytes and duration, and writes its
 * transfer line. `log` carries the session's context (interface, session, user, ip).
 */
export function transferred(core: Core, log: Logger, iface: Interface, t: Transfer): void {
  const seconds = (Date.now() - t.started) / 1000;
  core.metrics.transferBytes.inc({ interface: iface, direction: t.direction }, t.bytes);
  core.metrics.transferSeconds.observe(
    { interface: iface, direction: t.direction, result: t.ok ? 'ok' : 'failed' },
    seconds,
  );
  if (t.error) core.metrics.errors.inc({ interface: iface, type: t.error });
  const level = accessLevel(core);
  if (!level) return;
  log.log(level, 'transfer', {
    interface: iface,
    ...(t.request_id ? { request_id: t.request_id } : {}),
    direction: t.direction,
    path: t.path,
    status: t.ok ? 'ok' : 'failed',
    ...(t.error ? { error: t.error } : {}),
    bytes: t.bytes,
    duration_ms: Math.round(seconds * 1000),
  });
}

/** errorTypes holds the SPEC error type an HTTP front end answered a response with. */
const errorTypes = new WeakMap<ServerResponse, string>();

/** noteError records the SPEC error type (or internal-server-error) a response answers, for its access line. */
export function noteError(res: ServerResponse, type: string): void {
  errorTypes.set(res, type);
}

/** downloads holds the responses that send a file from a buffer (sendFile), for their transfer line. */
const downloads = new WeakSet<ServerResponse>();

/**
 * sendFile makes a download's bytes the response body, for every HTTP front end: bytes the store
 * read whole already (a small file, blobstore.ts withBytes) go out as one buffer, since a stream
 * body costs Koa a pipeline and its AbortController per response (a tenth of a small GET, issue
 * 13); anything else streams, and Koa destroys the stream when the response ends or the client
 * goes away. Either way the access log writes its transfer line.
 */
export function sendFile(ctx: Koa.Context, stream: Readable): void {
  const bytes = readBytes(stream);
  if (!bytes) {
    ctx.body = stream;
    return;
  }
  // Closing it releases what it holds (a lease), as the end of a streamed body would.
  stream.destroy();
  ctx.body = bytes;
  downloads.add(ctx.res);
}

/** requestId takes the client's X-Request-Id when it is a short token, or makes one. */
function requestId(sent: string | undefined): string {
  return sent && /^[\w.:-]{1,64}$/.test(sent) ? sent : randomUUID();
}

/**
 * httpAccess is the first middleware of an HTTP front end (REST with the web pages, WebDAV): it
 * gives the request its id (answered in X-Request-Id) and, once the response is finished or the
 * connection cut, writes its access line and, for a file transfer (a PUT with a body, or a
 * download answered with a stream), its transfer. Bytes are the body's: in from Content-Length
 * once the request was read whole (else what the socket read), out what the socket wrote after
 * the response's head.
 */
export function httpAccess(
  core: Core,
  listener: 'restapi' | 'dav',
  /** shown turns a request path into what the log may show (a signed URL's token is a credential) */
  shown: (path: string) => string = (p) => p,
): Koa.Middleware {
  return async (ctx, next) => {
    const id = requestId(ctx.get(REQUEST_ID_HEADER) || undefined);
    ctx.set(REQUEST_ID_HEADER, id);
    const started = Date.now();
    const socket = ctx.req.socket;
    const read0 = socket.bytesRead;
    const written0 = socket.bytesWritten;
    let logged = false;
    const done = () => {
      if (logged) return;
      logged = true;
      const res = ctx.res;
      const complete = ctx.req.complete;
      const length = Number(ctx.req.headers['content-length'] ?? NaN);
      const bytesIn = complete && Number.isFinite(length) ? length : Math.max(0, socket.bytesRead - read0);
      const head = (res as unknown as { _header?: string | null })._header;
      const bytesOut = Math.max(0, socket.bytesWritten - written0 - Buffer.byteLength(head ?? ''));
      // Whole: ended (handed to the socket), or every byte its Content-Length announced written
      // (a client that closes on its last byte may beat the end of the pipe into the response).
      const announced = Number(res.getHeader('content-length') ?? NaN);
      const finished = res.writableEnded || (Number.isFinite(announced) && bytesOut >= announced);
      const principal = (ctx.state as { principal?: Principal }).principal;
      // Web pages and the REST API share a listener; a web session's requests are the web's.
      const iface: Interface = principal?.interface ?? listener;
      const error =
        errorTypes.get(res) ?? (ctx.status >= 500 && finished ? 'internal-server-error' : undefined);
      const log = core.log.child({
        request_id: id,
        user: userOf(principal),
        ip: ctx.request.ip,
      });
      access(
        core,
        log,
        iface,
        { status: finished ? ctx.status : 'cut', failed: !finished || ctx.status >= 400, error },
        {
          method: ctx.method,
          path: shown(ctx.path).slice(0, 1000),
          bytes_in: bytesIn,
          bytes_out: bytesOut,
          duration_ms: Date.now() - started,
        },
      );
      const upload = ctx.method === 'PUT' && bytesIn > 0;
      const download =
        (ctx.method === 'GET' || ctx.method === 'POST') &&
        (ctx.body instanceof Readable || downloads.has(res)) &&
        ctx.status < 300;
      if (upload || download)
        transferred(core, log, iface, {
          direction: upload ? 'in' : 'out',
          path: shown(ctx.path).slice(0, 1000),
          bytes: upload ? bytesIn : bytesOut,
          started,
          ok: finished && ctx.status < 300 && (!upload || complete),
          request_id: id,
        });
    };
    ctx.res.once('finish', done);
    ctx.res.once('close', done);
    await next();
  };
}

/** SftpRequestCounts are one batch's requests per kind, e.g. {open: 1, read: 40, close: 1}. */
type Counts = Record<string, number>;

/** BATCH_MS is how long an SFTP session's requests are gathered into one access line. */
const BATCH_MS = 1_000;

/**
 * RequestBatch gathers an SFTP session's requests into one access line per second of activity
 * (a download is hundreds of READs a second; a line each would drown the log), with the counts per
 * request kind, how many failed and the SPEC types of the failures.
 */
export class RequestBatch {
  private counts: Counts = {};
  private failed = 0;
  private errors: Counts = {};
  private started = 0;
  private timer: NodeJS.Timeout | null = null;
  private batches = 0;

  constructor(
    private readonly core: Core,
    private readonly log: Logger,
    private readonly iface: Interface,
    /** the session's id, whose batches are `<session>.<n>` */
    private readonly session = sessionId(),
  ) {}

  /** note counts one answered request of kind `op`; `error` is its SPEC type when it failed. */
  note(op: string, failed: boolean, error?: string): void {
    this.core.metrics.requests.inc({ interface: this.iface, outcome: failed ? 'error' : 'ok' });
    if (error) this.core.metrics.errors.inc({ interface: this.iface, type: error });
    if (this.timer === null) {
      this.started = Date.now();
      this.timer = setTimeout(() => this.flush(), BATCH_MS);
      this.timer.unref();
    }
    this.counts[op] = (this.counts[op] ?? 0) + 1;
    if (failed) this.failed++;
    if (error) this.errors[error] = (this.errors[error] ?? 0) + 1;
  }

  /** flush writes the batch's line now (the session ends). */
  flush(): void {
    if (this.timer === null) return;
    clearTimeout(this.timer);
    this.timer = null;
    const level = accessLevel(this.core);
    if (level)
      this.log.log(level, 'access', {
        interface: this.iface,
        request_id: `${this.session}.${++this.batches}`,
        requests: this.counts,
        status: this.failed ? 'some failed' : 'ok',
        failed: this.failed,
        ...(this.failed ? { errors: this.errors } : {}),
        duration_ms: Date.now() - this.started,
      });
    this.counts = {};
    this.errors = {};
    this.failed = 0;
  }
}

/** errorType names what was thrown by its SPEC type, internal-server-error for a bug, or undefined for a protocol's own refusal. */
export function errorType(err: unknown, isProtocolRefusal: (err: unknown) => boolean): string | undefined {
  if (err instanceof GatewayError) return err.type;
  return isProtocolRefusal(err) ? undefined : 'internal-server-error';
}

/** sessionId makes a short id for a session's log lines (FTP control connection, SSH connection). */
export function sessionId(): string {
  return randomUUID().slice(0, 8);
}
