/**
 * A real HTTP webhook receiver on loopback for the events tests: records requests, answers as told,
 * including the faults a target can have (hang, reset, redirect loop, a huge answer).
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

/** HUGE_BYTES is the length of the 'huge' answer's body. */
export const HUGE_BYTES = 50 * 1024 * 1024;

/**
 * Answer is how the receiver answers one request: a status (body "ok"); 'hang' never answers;
 * 'reset' destroys the connection before answering; 'redirect-loop' is a 302 to the same URL;
 * 'huge' is a 200 with HUGE_BYTES of body, written only as fast as the client reads it.
 */
export type Answer = number | 'hang' | 'reset' | 'redirect-loop' | 'huge';

/** Received is one request the receiver got. */
export interface Received {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  body: string;
  /** when the whole request had arrived (Date.now()) */
  at: number;
  /** for a 'huge' answer: bytes handed to the socket so far, and how the answer ended */
  streamed?: { bytes: number; end: 'finished' | 'closed early' | null };
}

/** Receiver is a started loopback HTTP server. */
export interface Receiver {
  url: string;
  received: Received[];
  /** answer decides how the next requests are answered (default 200) */
  answer: (r: Received) => Answer;
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
        at: Date.now(),
      };
      r.received.push(got);
      const answer = r.answer(got);
      if (answer === 'hang') return;
      if (answer === 'reset') req.socket.destroy();
      else if (answer === 'redirect-loop') res.writeHead(302, { Location: `${r.url}${got.url}` }).end();
      else if (answer === 'huge') streamHuge(res, got);
      else res.writeHead(answer).end('ok');
    });
  });
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  r.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return r;
}

/** streamHuge writes HUGE_BYTES, waiting for 'drain' whenever the socket is full (no buffering here). */
function streamHuge(res: http.ServerResponse, got: Received): void {
  const state: NonNullable<Received['streamed']> = { bytes: 0, end: null };
  got.streamed = state;
  const chunk = Buffer.alloc(64 * 1024, 'x');
  res.on('close', () => {
    state.end = res.writableFinished ? 'finished' : 'closed early';
  });
  res.writeHead(200, { 'Content-Type': 'application/octet-stream', 'Content-Length': HUGE_BYTES });
  const pump = (): void => {
    while (state.end === null && state.bytes < HUGE_BYTES) {
      state.bytes += chunk.length;
      if (!res.write(chunk)) {
        res.once('drain', pump);
        return;
      }
    }
    if (state.end === null) res.end();
  };
  pump();
}
