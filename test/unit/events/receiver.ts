/** A real HTTP webhook receiver on loopback for the events tests: records requests, answers as told. */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

/** Received is one request the receiver got. */
export interface Received {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  body: string;
}

/** Receiver is a started loopback HTTP server. */
export interface Receiver {
  url: string;
  received: Received[];
  /** answer decides the status of the next requests (default 200); 'hang' never answers */
  answer: (r: Received) => number | 'hang';
  waitFor(n: number, ms?: number): Promise<Received[]>;
  close(): Promise<void>;
}

/** startReceiver listens on 127.0.0.1, on `port` (0 for a free one). */
export async function startReceiver(port = 0): Promise<Receiver> {
  const r: Receiver = {
    url: '',
    received: [],
    answer: () => 200,
    async waitFor(n, ms = 10_000) {
      const until = Date.now() + ms;
      while (r.received.length < n) {
        if (Date.now() > until) throw new Error(`receiver got ${r.received.length} of ${n} requests`);
        await new Promise((res) => setTimeout(res, 20));
      }
      return r.received;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const got: Received = {
        method: req.method ?? '',
        url: req.url ?? '',
        headers: req.headers,
        body: Buffer.concat(chunks).toString('utf8'),
      };
      r.received.push(got);
      const status = r.answer(got);
      if (status === 'hang') return;
      res.writeHead(status).end('ok');
    });
  });
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  r.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return r;
}
