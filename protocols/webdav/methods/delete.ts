/**
 * DELETE (RFC 4918 §9.6): a file, or a folder with everything in it. A folder takes Depth infinity
 * only (§9.6.1); a file's Depth means nothing and is not checked (lftp's `rm` sends Depth: 0).
 */
import { GatewayError, type Core } from '../../../src/core/index.ts';
import { checkWrite } from '../locks.ts';
import { depthOf, type Method } from '../http.ts';

/** del deletes a file or folder; its locks and dead properties go with it (in the core). */
export const del: Method = async (ctx, core: Core) => {
  const { path } = ctx.state;
  if (depthOf(ctx, 'infinity') !== 'infinity' && (await ctx.state.session.stat(path)).type === 'directory')
    throw new GatewayError(
      'bad-request/request-params-invalid',
      'DELETE of a folder takes Depth: infinity only',
    );
  const session = await checkWrite(ctx, core);
  await session.remove(path, { recursive: true });
  ctx.body = null;
  ctx.status = 204;
};
