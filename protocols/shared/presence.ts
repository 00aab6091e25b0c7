/**
 * The glue every adapter repeats to appear among the site's live connections (issue 15; the core's
 * Connections keeps them in the database): open a session's presence with what ends it, record
 * transfers with the byte counter the adapter keeps anyway, and, for HTTP (WebDAV), make a
 * "session" of a client's requests: one presence per user, client address and interface, kept
 * while requests come and for HTTP_IDLE_MS after the last one ends, whose end closes the client's
 * sockets. Nothing here writes: the core writes every instance's rows in one statement a tick.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Core, Interface, LiveConnection, LiveTransfer, Principal } from '../../src/core/index.ts';
import type { Direction } from './observe.ts';

/** HTTP_IDLE_MS is how long an HTTP client stays listed after its last request ended. */
export const HTTP_IDLE_MS = 60_000;

/** openPresence lists a session that has just logged in; `close` ends it when someone asks. */
export function openPresence(
  core: Core,
  principal: Principal,
  ip: string,
  close: () => void,
): LiveConnection {
  return core.connections.open({ principal, ip, close });
}

/** liveTransfer records a transfer of a session: its path as the client named it, its way, its bytes so far. */
export function liveTransfer(
  presence: LiveConnection,
  path: string,
  direction: Direction,
  bytes: () => number,
): LiveTransfer {
  return presence.transfer({ path, direction: direction === 'in' ? 'upload' : 'download', bytes });
}

/** HttpClient is the presence of one user's HTTP client (user, address, interface). */
interface HttpClient {
  presence: LiveConnection;
  /** the client's sockets seen, closed when someone ends the connection */
  sockets: Set<Socket>;
  /** requests in progress */
  requests: number;
  idle: NodeJS.Timeout | null;
  /** forget drops the client from the list (idle, or ended) */
  forget: () => void;
}

/** openHttpClient lists a user's HTTP client (its first request). */
function openHttpClient(
  core: Core,
  clients: Map<string, HttpClient>,
  key: string,
  iface: Interface,
  principal: Principal,
  ip: string,
): HttpClient {
  const client: HttpClient = {
    sockets: new Set(),
    requests: 0,
    idle: null,
    presence: core.connections.open({
      principal,
      interface: iface,
      ip,
      close: () => {
        client.forget();
        for (const socket of client.sockets) socket.destroy();
      },
    }),
    forget: () => {
      if (client.idle) clearTimeout(client.idle);
      if (clients.get(key) === client) clients.delete(key);
      client.presence.close();
    },
  };
  clients.set(key, client);
  return client;
}

const clientsByCore = new WeakMap<Core, Map<string, HttpClient>>();

/**
 * presentHttp counts an authenticated HTTP request in its client's presence (opened with the
 * first request), and, for a file transfer (`transfer`), shows it with the bytes its socket
 * moved so far. A site-wide key's requests are not listed.
 */
export function presentHttp(
  core: Core,
  iface: Interface,
  principal: Principal,
  req: IncomingMessage,
  res: ServerResponse,
  ip: string,
  transfer?: { path: string; direction: Direction },
): void {
  if (!principal.user) return;
  let clients = clientsByCore.get(core);
  if (!clients) clientsByCore.set(core, (clients = new Map()));
  const key = `${iface}\n${principal.user.id}\n${ip}`;
  const c = clients.get(key) ?? openHttpClient(core, clients, key, iface, principal, ip);
  if (c.idle) clearTimeout(c.idle);
  c.idle = null;
  c.requests += 1;
  const socket = req.socket;
  if (!c.sockets.has(socket)) {
    c.sockets.add(socket);
    socket.once('close', () => c.sockets.delete(socket));
  }
  let live: LiveTransfer | null = null;
  if (transfer) {
    // The socket's own counters: nothing is added on the data path. A keep-alive socket's earlier
    // requests are taken off.
    const up = transfer.direction === 'in';
    const start = up ? socket.bytesRead : socket.bytesWritten;
    live = liveTransfer(c.presence, transfer.path, transfer.direction, () =>
      Math.max(0, (up ? socket.bytesRead : socket.bytesWritten) - start),
    );
  }
  const done = () => {
    live?.end();
    c.requests -= 1;
    if (c.requests > 0 || clients.get(key) !== c) return;
    c.idle = setTimeout(c.forget, HTTP_IDLE_MS);
    c.idle.unref();
  };
  if (res.closed) done();
  else res.once('close', done);
}
