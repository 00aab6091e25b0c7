/**
 * What REST and the web's share-link routes both read from a URL (SPEC "Path encoding", "Pagination"):
 * a file path after a route's marker, each segment decoded on its own so an encoded slash or
 * backslash (%2F, %5C) cannot smuggle a separator in (the core then applies the path rules), and
 * the `page` / `per_page` pair as an offset and a limit.
 */
import { GatewayError } from '../../src/core/index.ts';

/** decodePath decodes a raw URL path segment by segment; an encoded separator is invalid-path. */
export function decodePath(raw: string): string {
  if (/%2f|%5c/i.test(raw))
    throw new GatewayError('bad-request/invalid-path', 'Encoded slashes are not allowed in paths');
  try {
    return raw
      .split('/')
      .map((s) => decodeURIComponent(s))
      .join('/');
  } catch {
    throw new GatewayError('bad-request/invalid-path', 'The path is not valid percent-encoded UTF-8');
  }
}

/** pageParams reads `page` (from 1) and `per_page` (1 to 5,000, default 1,000) as offset and limit. */
export function pageParams(q: Record<string, unknown>): { offset: number; limit: number } {
  const int = (name: string, dflt: number, max: number) => {
    const v = q[name];
    if (v === undefined || v === '') return dflt;
    const n = Number(v);
    if (!Number.isInteger(n) || n < 1 || n > max)
      throw new GatewayError(
        'bad-request/request-params-invalid',
        `${name} must be an integer from 1 to ${max}`,
      );
    return n;
  };
  const perPage = int('per_page', 1000, 5000);
  const page = int('page', 1, Number.MAX_SAFE_INTEGER);
  return { offset: (page - 1) * perPage, limit: perPage };
}
