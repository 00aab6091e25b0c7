/**
 * A load balancer in miniature for the PROXY protocol tests: a TCP relay on loopback that opens
 * each connection to the gateway from a chosen source address (127.0.0.x, so one machine plays a
 * trusted and an untrusted proxy), sends a PROXY header first as haproxy's send-proxy /
 * send-proxy-v2 would, then pipes both ways. The headers are built here from proxy-protocol.txt,
 * independently of the gateway's parser.
 */
import net from 'node:net';

/** V2_SIGNATURE is the 12 bytes every v2 header starts with. */
const V2_SIGNATURE = Buffer.from('0d0a0d0a000d0a515549540a', 'hex');

/** Endpoints are a connection's two ends as a header states them. */
export interface Endpoints {
  source: string;
  sourcePort: number;
  destination: string;
  destinationPort: number;
}

/** proxyHeaderV1 is the text header (TCP4 or TCP6 by the source's family). */
export function proxyHeaderV1(e: Endpoints): Buffer {
  const family = net.isIPv6(e.source) ? 'TCP6' : 'TCP4';
  return Buffer.from(
    `PROXY ${family} ${e.source} ${e.destination} ${e.sourcePort} ${e.destinationPort}\r\n`,
    'latin1',
  );
}

function addressBytes(address: string): Buffer {
  if (net.isIPv4(address)) return Buffer.from(address.split('.').map(Number));
  // Expand :: to the missing zero groups, then write eight 16-bit groups.
  const [head = '', tail = ''] = address.split('::');
  const left = head ? head.split(':') : [];
  const right = tail ? tail.split(':') : [];
  const groups = address.includes('::')
    ? [...left, ...Array<string>(8 - left.length - right.length).fill('0'), ...right]
    : left;
  const out = Buffer.alloc(16);
  groups.forEach((g, i) => out.writeUInt16BE(parseInt(g, 16), i * 2));
  return out;
}

/**
 * proxyHeaderV2 is the binary header: PROXY over TCP with the endpoints (and a TLV, as real
 * balancers add, so the length covers more than the addresses), or LOCAL (a health check).
 */
export function proxyHeaderV2(e: Endpoints | 'local'): Buffer {
  if (e === 'local') return Buffer.concat([V2_SIGNATURE, Buffer.from([0x20, 0x00, 0x00, 0x00])]);
  const v6 = net.isIPv6(e.source);
  const ports = Buffer.alloc(4);
  ports.writeUInt16BE(e.sourcePort, 0);
  ports.writeUInt16BE(e.destinationPort, 2);
  // PP2_TYPE_AUTHORITY (0x02): the host name the client asked for.
  const authority = Buffer.from('files.example.com');
  const tlv = Buffer.concat([Buffer.from([0x02, 0, authority.length]), authority]);
  const block = Buffer.concat([addressBytes(e.source), addressBytes(e.destination), ports, tlv]);
  const fixed = Buffer.from([0x21, v6 ? 0x21 : 0x11, 0, 0]);
  fixed.writeUInt16BE(block.length, 2);
  return Buffer.concat([V2_SIGNATURE, fixed, block]);
}

/** HeaderKind is what the relay sends first: a header carrying `client`, a fixed one, or none. */
export type HeaderKind = 'v1' | 'v2' | 'v2-local' | 'none' | Buffer;

/** RelayOptions say where the relay forwards, from which address, and what it prepends. */
export interface RelayOptions {
  /** the gateway's address and port */
  host: string;
  port: number;
  /** the relay's source address toward the gateway (the "proxy's" address) */
  from: string;
  header: HeaderKind;
  /** the client address the header carries */
  client?: string;
  /** the relay's own port on 127.0.0.1 (default: a free one) */
  listenPort?: number;
}

/** Relay is a started relay. */
export interface Relay {
  port: number;
  close(): Promise<void>;
}

/** startRelay listens on 127.0.0.1 (a free port unless `listenPort`) and relays each connection as `opts` say. */
export async function startRelay(opts: RelayOptions): Promise<Relay> {
  const open = new Set<net.Socket>();
  const server = net.createServer((client) => {
    const upstream = net.connect({ host: opts.host, port: opts.port, localAddress: opts.from });
    for (const s of [client, upstream]) {
      open.add(s);
      s.once('close', () => open.delete(s));
      s.on('error', () => undefined);
    }
    const endpoints: Endpoints = {
      source: opts.client ?? client.remoteAddress!,
      sourcePort: client.remotePort!,
      destination: opts.host,
      destinationPort: opts.port,
    };
    const h = opts.header;
    const header =
      h === 'v1'
        ? proxyHeaderV1(endpoints)
        : h === 'v2'
          ? proxyHeaderV2(endpoints)
          : h === 'v2-local'
            ? proxyHeaderV2('local')
            : h === 'none'
              ? null
              : h;
    if (header) upstream.write(header);
    client.pipe(upstream);
    upstream.pipe(client);
    client.once('close', () => upstream.destroy());
    upstream.once('close', () => client.destroy());
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.listenPort ?? 0, '127.0.0.1', () => resolve());
  });
  return {
    port: (server.address() as net.AddressInfo).port,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of open) s.destroy();
        server.close(() => resolve());
      }),
  };
}
