/**
 * The webhook client: one outgoing HTTP(S) request per delivery attempt. It is the core's only
 * use of node:http, as a client (eslint.config.js allows it in this file alone); the core still
 * opens no listener.
 */
import http from 'node:http';
import https from 'node:https';
import type { WebhookDeliveryRow } from '../../db/entities.ts';

// How much of a receiver's answer is read before the rest is dropped (a huge body costs nothing).
const MAX_ANSWER_BYTES = 64 * 1024;
// Connections kept per receiver: as many as deliveries an instance has in flight (webhooks.ts BATCH).
const MAX_SOCKETS = 32;

const agents = {
  http: new http.Agent({ keepAlive: true, maxSockets: MAX_SOCKETS }),
  https: new https.Agent({ keepAlive: true, maxSockets: MAX_SOCKETS }),
};

/**
 * send makes one delivery request and reads at most MAX_ANSWER_BYTES of the answer, dropping the
 * connection after that (a huge answer costs nothing). `answered` learns the status as soon as it
 * comes, so a timeout while the body is read still knows it. node:http rather than fetch: fetch
 * costs about five times the CPU per request here (0.48 ms against 0.10 ms), which the uploads
 * that cause the deliveries would feel. Redirects are answers, not followed: following one could
 * send the Action elsewhere.
 */
export function send(
  d: Pick<WebhookDeliveryRow, 'url' | 'method' | 'request_headers' | 'body'>,
  signal: AbortSignal,
  answered: (status: number) => void,
): Promise<{ statusText: string; location: string }> {
  const url = new URL(d.url);
  const client = url.protocol === 'https:' ? https : http;
  const body = Buffer.from(d.body, 'utf8');
  const headers = {
    ...(JSON.parse(d.request_headers) as Record<string, string>),
    'Content-Length': String(body.length),
  };
  return new Promise((resolve, reject) => {
    const req = client.request(
      url,
      { method: d.method, headers, signal, agent: url.protocol === 'https:' ? agents.https : agents.http },
      (res) => {
        answered(res.statusCode ?? 0);
        const answer = { statusText: res.statusMessage ?? '', location: res.headers.location ?? '' };
        let read = 0;
        res.on('data', (chunk: Buffer) => {
          read += chunk.length;
          if (read > MAX_ANSWER_BYTES) {
            // This connection is not reused: the rest of the answer is still on its way.
            res.destroy();
            resolve(answer);
          }
        });
        res.on('end', () => resolve(answer));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

/** describeNetworkError explains a request that got no answer: the system's code and message. */
export function describeNetworkError(err: unknown): string {
  const { code, message } = err as { code?: string; message?: string };
  if (code) return `no answer: ${code}${message && message !== code ? ` (${message})` : ''}`;
  return `no answer: ${message ?? String(err)}`;
}
