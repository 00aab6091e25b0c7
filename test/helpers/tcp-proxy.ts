/**
 * A TCP proxy on loopback for outage tests: the gateway talks to a server (PostgreSQL) through it,
 * and the test cuts it (every connection reset, new ones refused) and restores it, as a database
 * that goes away and comes back. The server itself is never touched.
 */
import net from 'node:net';

/** TcpProxy forwards 127.0.0.1:port to its target until cut. */
export interface TcpProxy {
  port: number;
  /** cut resets every open connection and refuses new ones until restore */
  cut(): Promise<void>;
  /** restore accepts connections again, on the same port */
  restore(): Promise<void>;
  close(): Promise<void>;
}

/** startTcpProxy listens on a free loopback port and forwards each connection to host:port. */
export async function startTcpProxy(host: string, port: number): Promise<TcpProxy> {
  const open = new Set<net.Socket>();
  const track = (s: net.Socket) => {
    open.add(s);
    s.once('close', () => open.delete(s));
    // A reset peer is what a cut is for; nothing to report.
    s.on('error', () => undefined);
  };
  const server = net.createServer((client) => {
    const upstream = net.connect(port, host);
    track(client);
    track(upstream);
    client.pipe(upstream);
    upstream.pipe(client);
    client.once('close', () => upstream.destroy());
    upstream.once('close', () => client.destroy());
  });
  const listen = (p: number) =>
    new Promise<number>((resolve, reject) => {
      server.once('error', reject);
      server.listen(p, '127.0.0.1', () => {
        server.off('error', reject);
        resolve((server.address() as net.AddressInfo).port);
      });
    });
  const stop = () =>
    new Promise<void>((resolve) => {
      for (const s of open) s.resetAndDestroy();
      if (!server.listening) return resolve();
      server.close(() => resolve());
    });
  const bound = await listen(0);
  return {
    port: bound,
    cut: stop,
    restore: async () => {
      await listen(bound);
    },
    close: stop,
  };
}

/** closedPort is a loopback port nothing listens on. */
export async function closedPort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
  const port = (s.address() as net.AddressInfo).port;
  await new Promise<void>((resolve) => s.close(() => resolve()));
  return port;
}
