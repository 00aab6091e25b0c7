/**
 * The real client address behind a load balancer (DESIGN.md "Scale-out", issue 12 item 2): the
 * PROXY protocol, v1 (text) and v2 (binary) as haproxy's proxy-protocol.txt defines them, read on
 * every listener before its protocol (before TLS on HTTPS, WebDAV and FTPS, before the SSH
 * identification), and X-Forwarded-For on HTTPS and WebDAV. Both are believed only from the
 * addresses in `proxy.trusted` (SVC_TRUSTED_PROXIES), so allowed_ips, lockout, limits and Actions
 * see the client, never a proxy.
 *
 * - From an address not in the list nothing is read as a header (the spec: a receiver must never
 *   guess), so a header from there reaches the protocol as it is and is refused there: it is not
 *   a TLS ClientHello nor an SSH identification (the connection is closed), and FTP closes on the
 *   `PROXY` line (v1) or on the `QUIT` that v2's signature holds for this purpose.
 * - From a trusted address, a connection whose first bytes are not a PROXY signature is served as
 *   the proxy's own (health checks, an HTTP proxy that sends X-Forwarded-For instead); one that
 *   says nothing within the header timeout too, after it (an FTP or SSH health check that waits for
 *   the greeting). v2 LOCAL, v1 UNKNOWN and v2 families other than IPv4/IPv6 are the proxy's own
 *   connections as the spec asks. A header that starts but is malformed or unfinished in time
 *   closes the connection.
 */
import type { IncomingMessage } from 'node:http';
import net from 'node:net';
import { clientIp, ipInList } from '../../src/core/index.ts';
import type { Config } from '../../src/config.ts';
import type { Logger } from '../../src/log.ts';

/** V1_PREFIX starts every v1 header. */
const V1_PREFIX = Buffer.from('PROXY ', 'latin1');
/** V1_MAX is the longest v1 header, CRLF included (proxy-protocol.txt 2.1). */
const V1_MAX = 107;
/** V2_SIGNATURE starts every v2 header; its QUIT ends the session of an FTP server unaware of it. */
const V2_SIGNATURE = Buffer.from('0d0a0d0a000d0a515549540a', 'hex');
/** V2_FIXED is the v2 header's fixed part: signature, version and command, family, length. */
const V2_FIXED = 16;

/** ProxyHeader is what a complete header said: the client's address, or null for the proxy's own. */
export interface ProxyHeader {
  /** the bytes the header took */
  length: number;
  /** the client's address (the source), or null: use the connection's own (LOCAL, UNKNOWN) */
  source: string | null;
}

/** ProxyHeaderError is a malformed header; the connection that sent it is closed. */
export class ProxyHeaderError extends Error {}

/** startsWith tells whether `data` begins `prefix`, or is a beginning of it. */
function startsWith(data: Buffer, prefix: Buffer): boolean {
  const n = Math.min(data.length, prefix.length);
  return data.subarray(0, n).equals(prefix.subarray(0, n));
}

/**
 * parseProxyHeader reads a PROXY header at the start of `data`: the header, 'incomplete' (a
 * beginning of one; read more), or 'none' (the bytes are no PROXY header). It throws
 * ProxyHeaderError for a malformed one.
 */
export function parseProxyHeader(data: Buffer): ProxyHeader | 'incomplete' | 'none' {
  if (data.length === 0) return 'incomplete';
  if (startsWith(data, V2_SIGNATURE)) return data.length < V2_FIXED ? 'incomplete' : parseV2(data);
  if (startsWith(data, V1_PREFIX)) return parseV1(data);
  return 'none';
}

function parseV1(data: Buffer): ProxyHeader | 'incomplete' {
  const end = data.subarray(0, V1_MAX).indexOf('\r\n');
  if (end < 0) {
    if (data.length >= V1_MAX) throw new ProxyHeaderError('v1 header longer than 107 bytes');
    return 'incomplete';
  }
  const line = data.subarray(0, end).toString('latin1');
  const length = end + 2;
  const fields = line.split(' ');
  // "PROXY UNKNOWN" may carry anything up to the CRLF: the receiver ignores it.
  if (fields[1] === 'UNKNOWN') return { length, source: null };
  if (fields.length !== 6) throw new ProxyHeaderError('v1 header without its six fields');
  const [, family, source, destination, sourcePort, destinationPort] = fields as [
    string,
    string,
    string,
    string,
    string,
    string,
  ];
  const version = family === 'TCP4' ? 4 : family === 'TCP6' ? 6 : 0;
  if (!version) throw new ProxyHeaderError(`v1 header with protocol ${family.slice(0, 10)}`);
  for (const address of [source, destination]) {
    // net.isIPv4 takes only four-part decimal, so 010.0.0.1 cannot mean 8.0.0.1.
    if ((version === 4 ? !net.isIPv4(address) : !net.isIPv6(address)) || address.includes('%'))
      throw new ProxyHeaderError(`v1 header with an invalid ${family} address`);
  }
  for (const port of [sourcePort, destinationPort]) {
    if (!/^(0|[1-9]\d{0,4})$/.test(port) || Number(port) > 65535)
      throw new ProxyHeaderError('v1 header with an invalid port');
  }
  return { length, source: clientIp(source) };
}

function parseV2(data: Buffer): ProxyHeader | 'incomplete' {
  const versionCommand = data[12]!;
  const familyProtocol = data[13]!;
  const length = V2_FIXED + data.readUInt16BE(14);
  if (versionCommand >> 4 !== 2) throw new ProxyHeaderError('v2 header of an unknown version');
  const command = versionCommand & 0x0f;
  if (command > 1) throw new ProxyHeaderError('v2 header with an unknown command');
  if (data.length < length) return 'incomplete';
  // LOCAL: the proxy's own connection (a health check); the address block is skipped.
  if (command === 0) return { length, source: null };
  const family = familyProtocol >> 4;
  const block = data.subarray(V2_FIXED, length);
  if (family === 1) {
    if (block.length < 12) throw new ProxyHeaderError('v2 IPv4 header too short');
    return { length, source: [...block.subarray(0, 4)].join('.') };
  }
  if (family === 2) {
    if (block.length < 36) throw new ProxyHeaderError('v2 IPv6 header too short');
    const groups: string[] = [];
    for (let i = 0; i < 16; i += 2) groups.push(block.readUInt16BE(i).toString(16));
    return { length, source: clientIp(groups.join(':')) };
  }
  // UNSPEC and UNIX carry no IP address: the connection's own endpoints stand (the spec).
  return { length, source: null };
}

/** carried holds the client address a trusted proxy's header gave an accepted socket. */
const carried = new WeakMap<net.Socket, string>();

/**
 * clientAddress is the address of the client on the other end of `socket`: the one a trusted
 * proxy's PROXY header carried, else the peer's own; IPv4-mapped IPv6 as plain IPv4. `socket` may
 * be a TLS socket over an accepted one (HTTPS, WebDAV, FTPS).
 */
export function clientAddress(socket: net.Socket): string {
  // Node's TLSSocket keeps the socket it wraps as _parent (no public name for it).
  const parent = (socket as net.Socket & { _parent?: net.Socket | null })._parent;
  const address = carried.get(socket) ?? (parent ? carried.get(parent) : undefined);
  if (address) return address;
  // Asked for every request of a keep-alive connection: the peer's address is parsed once.
  let own = peers.get(socket);
  if (own === undefined) peers.set(socket, (own = clientIp(socket.remoteAddress ?? '')));
  return own;
}

/** peers holds each socket's own peer address as clientIp gave it. */
const peers = new WeakMap<net.Socket, string>();

/** ProxySettings are the `proxy` section of the settings. */
export type ProxySettings = Config['proxy'];

/**
 * acceptProxyProtocol makes `server` read a PROXY header from its trusted peers before its
 * 'connection' listeners see the socket (so call it once the server has them all); the header's
 * address is then `clientAddress(socket)`. Without trusted proxies it changes nothing.
 */
export function acceptProxyProtocol(server: net.Server, settings: ProxySettings, log: Logger): void {
  if (settings.trusted.length === 0) return;
  const listeners = server.listeners('connection') as ((socket: net.Socket) => void)[];
  server.removeAllListeners('connection');
  const deliver = (socket: net.Socket) => {
    // A server stopped while the header was awaited takes no new connection.
    if (!server.listening) return socket.destroy();
    for (const listener of listeners) listener.call(server, socket);
  };
  server.on('connection', (socket: net.Socket) => {
    const peer = clientIp(socket.remoteAddress ?? '');
    if (!ipInList(peer, settings.trusted)) return deliver(socket);
    readProxyHeader(socket, settings.header_timeout_ms).then(
      (header) => {
        if (header === 'closed') return;
        if (header?.source) carried.set(socket, header.source);
        deliver(socket);
      },
      (err: Error) => {
        log.warn('PROXY header refused; connection closed', { proxy: peer, error: err.message });
        socket.destroy();
      },
    );
  });
}

/**
 * readProxyHeader reads the header a trusted proxy sends first and leaves the bytes after it
 * unread on the socket for the protocol (a TLS socket made on it later reads them too). It
 * resolves null when there is none, 'closed' when the socket ended first.
 */
function readProxyHeader(socket: net.Socket, timeoutMs: number): Promise<ProxyHeader | null | 'closed'> {
  return new Promise((resolve, reject) => {
    let data: Buffer = Buffer.alloc(0);
    const settle = (outcome: ProxyHeader | null | 'closed' | Error, rest: Buffer = data) => {
      clearTimeout(timer);
      socket.off('readable', onReadable);
      socket.off('close', onClose);
      socket.off('error', ignore);
      if (outcome instanceof Error) return reject(outcome);
      if (outcome !== 'closed' && rest.length) socket.unshift(rest);
      resolve(outcome);
    };
    const onClose = () => settle('closed');
    // The socket is not the protocol's yet: an error only ends the wait (through 'close').
    const ignore = () => undefined;
    const timer = setTimeout(() => {
      // Silence is a health check waiting for the greeting; half a header is no proxy's.
      if (data.length === 0) settle(null);
      else settle(new ProxyHeaderError(`incomplete PROXY header after ${timeoutMs} ms`));
    }, timeoutMs);
    const onReadable = () => {
      for (let chunk: Buffer | null; (chunk = socket.read() as Buffer | null) !== null;)
        data = data.length ? Buffer.concat([data, chunk]) : chunk;
      let header: ProxyHeader | 'incomplete' | 'none';
      try {
        header = parseProxyHeader(data);
      } catch (err) {
        return settle(err as Error);
      }
      if (header === 'none') settle(null);
      else if (header !== 'incomplete') settle(header, data.subarray(header.length));
    };
    socket.on('readable', onReadable);
    socket.once('close', onClose);
    socket.on('error', ignore);
  });
}

/**
 * forwardedClientAddress is the client of an HTTP request: starting from the connection's client
 * (`clientAddress`), each hop that is a trusted proxy is replaced by the address it put last in
 * X-Forwarded-For, so the rightmost address that is not a trusted proxy is the client. Entries
 * left of it were written by the client itself and are not believed; an entry that is no IP
 * address ends the walk at the trusted proxy that passed it on.
 */
export function forwardedClientAddress(req: IncomingMessage, trusted: readonly string[]): string {
  let client = clientAddress(req.socket);
  if (trusted.length === 0) return client;
  const header = req.headers['x-forwarded-for'];
  const hops = (Array.isArray(header) ? header.join(',') : (header ?? ''))
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  while (hops.length && ipInList(client, trusted)) {
    const next = hops.pop()!;
    if (net.isIP(next) === 0) break;
    client = clientIp(next);
  }
  return client;
}

/**
 * forwardedFor is Koa middleware that sets `ctx.request.ip` to forwardedClientAddress, so every
 * later reader (the login gate, Actions, logs) sees the client. Mount it first.
 */
export function forwardedFor(trusted: readonly string[]) {
  return async (ctx: { req: IncomingMessage; request: { ip: string } }, next: () => Promise<unknown>) => {
    ctx.request.ip = forwardedClientAddress(ctx.req, trusted);
    await next();
  };
}
