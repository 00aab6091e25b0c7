/**
 * COPY and MOVE (RFC 4918 §9.8, §9.9): Destination, Depth and Overwrite; `Overwrite: F` with an
 * existing destination is 412, a missing destination parent 409. 201 for a new destination, 204
 * for a replaced one.
 */
import { GatewayError, type Core } from '../../../src/core/index.ts';
import { checkWrite } from '../locks.ts';
import { depthOf, destinationOf, overwriteOf, statOrNull, type Method } from '../http.ts';

/** relocate answers COPY or MOVE. */
export function relocate(kind: 'copy' | 'move'): Method {
  return async (ctx, core: Core) => {
    const { path } = ctx.state;
    const depth = depthOf(ctx, 'infinity');
    if (depth === '1' || (kind === 'move' && depth !== 'infinity'))
      throw new GatewayError(
        'bad-request/request-params-invalid',
        `${kind.toUpperCase()} takes Depth 0 or infinity`,
      );
    const dest = destinationOf(ctx);
    const overwrite = overwriteOf(ctx);
    const source = await ctx.state.session.stat(path);
    if (dest === path)
      throw new GatewayError('bad-request/destination-same', 'Source and destination are the same');
    const replaced = (await statOrNull(ctx, dest)) !== null;
    if (replaced && !overwrite)
      throw new GatewayError('processing-failure/destination-exists', `${ctx.get('Destination')} exists`);
    const session = await checkWrite(ctx, core);
    if (kind === 'copy' && depth === '0' && source.type === 'directory') {
      // A shallow copy of a folder is an empty folder of the same name.
      if (replaced) await session.remove(dest, { recursive: true });
      await session.mkdir(dest);
    } else if (kind === 'copy') await session.copy(path, dest, { overwrite });
    else await session.move(path, dest, { overwrite });
    ctx.body = null;
    ctx.status = replaced ? 204 : 201;
  };
}

/** copy answers COPY. */
export const copy = relocate('copy');
