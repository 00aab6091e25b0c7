/**
 * Retry-After for the HTTP front ends (REST and WebDAV): a 503 of a database or login gate that
 * cannot answer tells the client when to try again (RFC 9110 §10.2.3).
 */
import { GatewayError } from '../../src/core/index.ts';

/**
 * RETRY_AFTER_SECONDS is long enough not to hammer a database coming back, short enough that a
 * client retries soon after (issue 12 measured recovery in 0.4–3.1 s).
 */
export const RETRY_AFTER_SECONDS = 5;

/**
 * retryAfter is the Retry-After value for a core error, or null when retrying soon is no help: an
 * outage, and a user over the session limit (a session frees when one of their transfers ends).
 */
export function retryAfter(err: GatewayError): string | null {
  return err.family === 'service-unavailable' || err.type === 'rate-limited/too-many-concurrent-requests'
    ? String(RETRY_AFTER_SECONDS)
    : null;
}
