/**
 * The listener kit every front end repeats (STYLE.md §10): binding a server and learning its port,
 * and the lifecycle of the HTTPS front ends' connections — every socket bounded by a timeout, and a
 * stop that drains (idle keep-alive connections close at once, running requests get a grace, then
 * every socket is cut), so no path leaves a connection open (issue 19).
 */
import type { RequestListener } from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';

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

/** IDLE_SOCKET_MS cuts a socket on which nothing moved for 10 minutes, even mid-response. */
const IDLE_SOCKET_MS = 10 * 60_000;

/**
 * createHttpsServer makes an HTTPS server whose every socket ends on some path: keep-alive longer
 * than common load balancers' idle timeouts (so they close first), headers within 70 s, the request
 * within `requestMs`, and no socket idle for 10 minutes — a client that vanished without a reset
 * (a dropped network) mid-download would otherwise hold its socket and its file for good, since
 * the request timeout covers only what the client sends.
 */
export function createHttpsServer(
  tls: { cert: string | Buffer; key: string | Buffer },
  handler: RequestListener,
  timeouts: HttpsTimeouts,
): https.Server {
  const server = https.createServer({ cert: tls.cert, key: tls.key }, handler);
  server.keepAliveTimeout = 65_000;
  server.headersTimeout = 70_000;
  server.requestTimeout = timeouts.requestMs;
  server.timeout = IDLE_SOCKET_MS;
  return server;
}

/**
 * closeHttps stops accepting, closes idle keep-alive connections at once, gives running requests
 * `graceMs` to finish and then cuts every socket still open.
 */
export function closeHttps(server: https.Server, graceMs = 5_000): Promise<void> {
  return new Promise((resolve) => {
    const cut = setTimeout(() => server.closeAllConnections(), graceMs);
    server.close(() => {
      clearTimeout(cut);
      resolve();
    });
    server.closeIdleConnections();
  });
}
