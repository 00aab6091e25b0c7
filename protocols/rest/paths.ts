/**
 * The file path in a REST URL (SPEC "Path encoding"): the rest of the URL after /files/ or
 * /folders/, UTF-8 percent-encoded. Each segment is decoded on its own, so an encoded slash or
 * backslash (%2F, %5C) cannot smuggle a separator in; the core then applies the path rules.
 */
import { GatewayError } from '../../src/core/index.ts';
import type { RestContext } from './http.ts';

/** urlPath decodes the part of the request path after `marker` (e.g. '/files'). */
export function urlPath(ctx: RestContext, marker: string): string {
  const raw = ctx.path;
  const at = raw.indexOf(marker);
  const rest = at < 0 ? '' : raw.slice(at + marker.length).replace(/^\//, '');
  if (/%2f|%5c/i.test(rest))
    throw new GatewayError('bad-request/invalid-path', 'Encoded slashes are not allowed in paths');
  try {
    return rest
      .split('/')
      .map((s) => decodeURIComponent(s))
      .join('/');
  } catch {
    throw new GatewayError('bad-request/invalid-path', 'The path is not valid percent-encoded UTF-8');
  }
}
