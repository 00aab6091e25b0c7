/**
 * The file path in a REST URL (SPEC "Path encoding"): the rest of the URL after /files/ or
 * /folders/, UTF-8 percent-encoded, decoded by the shared kit's decodePath.
 */
import { decodePath } from '../shared/url-params.ts';
import type { RestContext } from './http.ts';

/** urlPath decodes the part of the request path after `marker` (e.g. '/files'). */
export function urlPath(ctx: RestContext, marker: string): string {
  const raw = ctx.path;
  const at = raw.indexOf(marker);
  const rest = at < 0 ? '' : raw.slice(at + marker.length).replace(/^\//, '');
  return decodePath(rest);
}
