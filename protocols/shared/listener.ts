/**
 * The listener kit every front end repeats (STYLE.md §10): binding a server and learning its port,
 * and the lifecycle of the HTTPS front ends' connections — each one counted against the connection
 * limits (limits.ts), every socket bounded by a timeout, a request body that stops arriving cut,
 * and a stop that drains (idle keep-alive connections close at once, running requests get a grace,
 * then every socket is cut), so no path leaves a connection open (issue 19).
 */
import type { IncomingMessage, RequestListener, ServerResponse } from 'node:http';
import https from 'node:https';
import type net from 'node:net';
import type { AddressInfo } from 'node:net';
import { GatewayError, type Core, type Principal } from '../../src/core/index.ts';
import { connectionLimits, isRefusal, userKey, type Refusal } from './limits.ts';

/** Listenable is what `listen` needs of a server: node:net's, node:https's and ssh2's all fit. */
export interface Listenable {
  once(event: 'error', listener: (err: Error) => void): unknown;
  off(event: 'error', listener: (err: Error) => void): unknown;
  listen(port: number, host: string, callback: () => void): unknown;
  address(): AddressInfo | string | null;
}

/** listen binds `server` on host:port (0 picks a free port) and resolves with the bound port. */
export function listen(server: Listenable, port: number, host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve((server.address() as AddressInfo).port);
    });
  });
}

/** HttpsTimeouts bound an HTTPS front end's sockets. */
export interface HttpsTimeouts {
  /** the whole request (headers and body) must arrive within this; 0 for uploads of any length */
  requestMs: number;
}

/**
 * createHttpsServer makes an HTTPS server whose every socket ends on some path: keep-alive longer
 * than common load balancers' idle timeouts (so they close first), headers within 70 s, the request
 * within `requestMs`, a request body that stops arriving cut after `http.body_timeout_seconds`, and
 * no socket idle for `http.idle_timeout_seconds` — a client that vanished without a reset (a
 * dropped network) mid-download would otherwise hold its socket and its file for good, since the
 * request timeout covers only what the client sends. Connections count against the gateway's
 * connection limits; one over a limit gets a 503 to its first request and is closed.
 */
export function createHttpsServer(
  core: Core,
  iface: 'restapi' | 'dav',
  tls: { cert: string | Buffer; key: string | Buffer },
  handler: RequestListener,
  timeouts: HttpsTimeouts,
): https.Server {
  const limits = connectionLimits(core);
  /** connections over a limit, by remote address and port, until they close */
  const refused = new Map<string, Refusal>();
  const server = https.createServer({ cert: tls.cert, key: tls.key }, (req, res) => {
    const refusal = refused.get(peerKey(req.socket));
    if (refusal) return refuseRequest(res, refusal);
    handler(req, res);
  });
  server.keepAliveTimeout = 65_000;
  server.headersTimeout = 70_000;
  server.requestTimeout = timeouts.requestMs;
  server.timeout = core.config.http.idle_timeout_seconds * 1000;
  // Before TLS starts: the TLS and HTTP layers run for a refused connection too, so that it can be
  // answered in HTTP (a 503 to its first request); answer() cuts it after a short grace.
  server.prependListener('connection', (socket: net.Socket) => {
    limits.admitOrRefuse(iface, socket, (s, refusal) => {
      const key = peerKey(s);
      refused.set(key, refusal);
      s.once('close', () => refused.delete(key));
    });
  });
  shutdownGrace.set(server, core.config.shutdown.grace_seconds * 1000);
  const bodyMs = core.config.http.body_timeout_seconds * 1000;
  server.on('request', (req: IncomingMessage) => watchBody(req, bodyMs));
  return server;
}

/** shutdownGrace holds each HTTPS server's `shutdown.grace_seconds`, for closeHttps. */
const shutdownGrace = new WeakMap<https.Server, number>();

/** peerKey names a live connection by its client's address and port (the same for TCP and TLS sockets). */
function peerKey(socket: net.Socket): string {
  return `${socket.remoteAddress}|${socket.remotePort}`;
}

/** refuseRequest answers a request on a connection over a limit: 503, try again in a minute, close. */
function refuseRequest(res: ServerResponse, refusal: Refusal): void {
  res.shouldKeepAlive = false;
  res.writeHead(503, {
    'Content-Type': 'text/plain; charset=utf-8',
    'Retry-After': '60',
    Connection: 'close',
  });
  res.end(`${refusal.message}\n`);
}

/**
 * watchBody cuts a request whose body stopped arriving: checked a few times per `bodyMs`, the
 * connection is destroyed (the handler sees an aborted request, so an upload is discarded) once no
 * byte was read for `bodyMs` while nothing read was waiting for the handler — a handler that is
 * busy, or a destination slower than the client (backpressure), is not the client's stall.
 */
function watchBody(req: IncomingMessage, bodyMs: number): void {
  const hasBody =
    req.headers['transfer-encoding'] !== undefined || Number(req.headers['content-length'] ?? 0) > 0;
  if (!hasBody) return;
  const socket = req.socket;
  let seen = socket.bytesRead;
  let lastProgress = Date.now();
  const timer = setInterval(
    () => {
      if (req.complete || socket.destroyed) return clearInterval(timer);
      if (socket.bytesRead !== seen || req.readableLength > 0 || socket.readableLength > 0) {
        seen = socket.bytesRead;
        lastProgress = Date.now();
        return;
      }
      if (Date.now() - lastProgress >= bodyMs) {
        clearInterval(timer);
        socket.destroy();
      }
    },
    Math.max(50, Math.min(5_000, Math.floor(bodyMs / 4))),
  );
  timer.unref();
  req.once('end', () => clearInterval(timer));
  req.once('close', () => clearInterval(timer));
}

/**
 * closeHttps stops accepting, closes idle keep-alive connections at once, gives running requests
 * `graceMs` (`shutdown.grace_seconds` by default) to finish and then cuts every socket still open.
 * A connection whose request finishes during the drain is closed then, not kept alive.
 */
export function closeHttps(
  server: https.Server,
  graceMs = shutdownGrace.get(server) ?? 5_000,
): Promise<void> {
  return new Promise((resolve) => {
    const cut = setTimeout(() => server.closeAllConnections(), graceMs);
    // Responses finished while draining: the socket turns idle, so close it rather than keep it.
    server.on('request', (_req: IncomingMessage, res: ServerResponse) => {
      res.shouldKeepAlive = false;
    });
    const sweep = setInterval(() => server.closeIdleConnections(), 250);
    sweep.unref();
    server.close(() => {
      clearTimeout(cut);
      clearInterval(sweep);
      resolve();
    });
    server.closeIdleConnections();
  });
}

/** counted are the responses whose request already holds a session, so that one request counts once. */
const counted = new WeakSet<ServerResponse>();

/**
 * holdSession counts an authenticated REST or WebDAV request as one session of its user, in the
 * count FTP and SFTP logins take (`limits.max_sessions_per_user`), from its authentication until
 * its response ends or its connection closes. HTTP has no login that lasts: a request in progress
 * (a listing, a transfer) is what a user holds open, while a keep-alive connection between requests
 * holds nothing (Finder and rclone keep several idle ones). Past the limit it throws
 * `rate-limited/too-many-concurrent-requests` (503 with Retry-After on both front ends), logged with
 * the other refusals, once per address per minute. A site-wide API key belongs to no user and is not
 * counted; the connection limits still bound it.
 */
export function holdSession(
  core: Core,
  iface: 'restapi' | 'dav',
  principal: Principal,
  res: ServerResponse,
  ip: string,
): void {
  if (!principal.user || counted.has(res)) return;
  const limits = connectionLimits(core);
  const lease = limits.openSession(userKey(principal));
  if (isRefusal(lease)) {
    limits.refused(iface, ip, lease, { user: principal.user.username });
    throw new GatewayError(
      'rate-limited/too-many-concurrent-requests',
      `This user has ${limits.values.maxSessionsPerUser} sessions open (each request in progress is one), the most allowed; retry when one ends`,
    );
  }
  counted.add(res);
  // 'close' follows the end of the response, or a connection cut before it.
  if (res.closed) lease.release();
  else res.once('close', () => lease.release());
}
