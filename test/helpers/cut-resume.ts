/**
 * What the resume tests (issue 20) need around a real client: a relay that counts the bytes a
 * client sends on resume, and a client started so that it can be killed whole (SIGKILL) mid-upload.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import net from 'node:net';

/** Counter is a loopback TCP relay that counts the bytes its clients send (SSH or TLS framing included). */
export interface Counter {
  port: number;
  sent: number;
  close(): Promise<void>;
}

/** countingRelay relays loopback connections to `target` and counts what their clients send. */
export async function countingRelay(target: number): Promise<Counter> {
  const sockets = new Set<net.Socket>();
  const counter = { port: 0, sent: 0, close: async () => undefined };
  const server = net.createServer((client) => {
    const upstream = net.connect(target, '127.0.0.1');
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('error', () => undefined);
      s.once('close', () => sockets.delete(s));
    }
    client.on('data', (c: Buffer) => (counter.sent += c.length));
    client.pipe(upstream);
    upstream.pipe(client);
    client.once('close', () => upstream.destroy());
    upstream.once('close', () => client.destroy());
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  counter.port = (server.address() as net.AddressInfo).port;
  counter.close = async () => {
    for (const s of sockets) s.destroy();
    await new Promise<void>((r) => server.close(() => r()));
  };
  return counter;
}

/** startKilled starts a client in its own process group, to be killed whole with SIGKILL. */
export function startKilled(argv: string[], input = ''): { child: ChildProcess; kill: () => Promise<void> } {
  const child = spawn(argv[0]!, argv.slice(1), { stdio: ['pipe', 'ignore', 'ignore'], detached: true });
  child.stdin!.on('error', () => undefined);
  child.stdin!.end(input);
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  return {
    child,
    kill: async () => {
      try {
        process.kill(-child.pid!, 'SIGKILL');
      } catch {
        // already gone
      }
      await exited;
    },
  };
}
