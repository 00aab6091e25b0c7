/**
 * Real SMTP peers on loopback for the e-mail notification tests: a working server (smtp-server)
 * that records each message, and two broken ones on plain sockets: one that accepts and never
 * greets, one that greets and then answers a byte at a time forever.
 */
import net, { type AddressInfo } from 'node:net';
import { SMTPServer } from 'smtp-server';

/** Received is one message the SMTP server accepted. */
export interface Received {
  from: string;
  to: string[];
  raw: string;
}

/** Smtp is a started loopback SMTP server. */
export interface Smtp {
  url: string;
  port: number;
  received: Received[];
  close(): Promise<void>;
}

/** SmtpOptions shape the server: its port (0 for a free one) and recipients it rejects with 550. */
export interface SmtpOptions {
  port?: number;
  reject?: (address: string) => boolean;
}

/** startSmtp starts an smtp-server on 127.0.0.1 that keeps every message it accepts. */
export async function startSmtp(opts: SmtpOptions = {}): Promise<Smtp> {
  const received: Received[] = [];
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS', 'AUTH'],
    logger: false,
    onRcptTo(address, _session, callback) {
      if (!opts.reject?.(address.address)) return callback();
      const err = new Error(`5.1.1 <${address.address}>: Recipient address rejected: no such mailbox`);
      (err as Error & { responseCode: number }).responseCode = 550;
      callback(err);
    },
    onData(stream, session, done) {
      const chunks: Buffer[] = [];
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('end', () => {
        received.push({
          from: session.envelope.mailFrom ? session.envelope.mailFrom.address : '',
          to: session.envelope.rcptTo.map((r) => r.address),
          raw: Buffer.concat(chunks).toString('utf8'),
        });
        done();
      });
    },
  });
  await new Promise<void>((resolve, reject) => {
    server.server.once('error', reject);
    server.listen(opts.port ?? 0, '127.0.0.1', resolve);
  });
  const port = (server.server.address() as AddressInfo).port;
  return {
    url: `smtp://127.0.0.1:${port}`,
    port,
    received,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** closedPort returns a loopback port nothing listens on (it was free a moment ago). */
export async function closedPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** BrokenServer is a plain TCP peer that misbehaves as SMTP; it tracks its connections. */
export interface BrokenServer {
  url: string;
  /** connections accepted so far */
  accepted: number;
  /** connections that have ended so far (by the client, until close() ends the rest) */
  closed: number;
  close(): Promise<void>;
}

/**
 * startBrokenServer listens on 127.0.0.1. 'silent' accepts and never says a word; 'trickle'
 * greets, then answers everything with an endless multi-line reply, one line every 100 ms, so the
 * connection is never idle and never gets anywhere.
 */
export async function startBrokenServer(kind: 'silent' | 'trickle'): Promise<BrokenServer> {
  const sockets = new Set<net.Socket>();
  const timers = new Set<NodeJS.Timeout>();
  const b: BrokenServer = { url: '', accepted: 0, closed: 0, close: async () => undefined };
  const server = net.createServer((socket) => {
    b.accepted++;
    sockets.add(socket);
    socket.on('error', () => undefined);
    socket.on('close', () => {
      b.closed++;
      sockets.delete(socket);
    });
    if (kind === 'silent') return;
    socket.write('220 trickle.test ESMTP\r\n');
    socket.once('data', () => {
      const timer = setInterval(() => socket.write('250-still thinking\r\n'), 100);
      timers.add(timer);
      socket.on('close', () => clearInterval(timer));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  b.url = `smtp://127.0.0.1:${(server.address() as AddressInfo).port}`;
  b.close = () =>
    new Promise<void>((resolve) => {
      for (const t of timers) clearInterval(t);
      for (const s of sockets) s.destroy();
      server.close(() => resolve());
    });
  return b;
}
