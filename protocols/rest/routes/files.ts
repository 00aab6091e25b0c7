/**
 * SPEC "Files": download URL or stat, move, copy, the multi-step upload (start, part URLs,
 * restart, end) and delete. Every operation is one core call.
 */
import { GatewayError, type Core } from '../../../src/core/index.ts';
import { body, principal, query, send, sendEmpty, type RestContext, type RestRouter } from '../http.ts';
import { urlPath } from '../paths.ts';

const str = (v: unknown) => (typeof v === 'string' ? v : typeof v === 'number' ? String(v) : undefined);
const bool = (v: unknown) => v === true || v === 'true' || v === '1';

function int(v: unknown, name: string): number | undefined {
  if (v === undefined || v === '') return undefined;
  const n = typeof v === 'number' ? v : Number(str(v));
  if (!Number.isSafeInteger(n) || n < 0)
    throw new GatewayError('bad-request/request-params-invalid', `${name} must be a non-negative integer`);
  return n;
}

/** fileRoutes registers /files. */
export function fileRoutes(router: RestRouter, core: Core): void {
  router.get('/files{/*path}', async (ctx: RestContext) => {
    const session = core.files.session(principal(ctx));
    const path = urlPath(ctx, '/files');
    if (query(ctx).action === 'stat') {
      send(ctx, 200, await session.stat(path), 'file');
      return;
    }
    const { entry, url } = await core.files.downloadUrl(session, path);
    send(ctx, 200, { ...entry, download_uri: url }, 'file');
  });

  router.post('/files{/*path}', async (ctx: RestContext) => {
    const session = core.files.session(principal(ctx));
    const path = urlPath(ctx, '/files');
    const fields = { ...query(ctx), ...(await body(ctx, core)) };
    const move = str(fields['move-destination']);
    const copy = str(fields['copy-destination']);
    const action = str(fields.action);
    if (move !== undefined || copy !== undefined) {
      if (move !== undefined && copy !== undefined)
        throw new GatewayError(
          'bad-request/cant-move-with-multiple-locations',
          'Send move-destination or copy-destination, not both',
        );
      const overwrite = bool(fields.overwrite);
      if (move !== undefined) await session.move(path, move, { overwrite });
      else await session.copy(path, copy!, { overwrite });
      sendEmpty(ctx);
      return;
    }
    const ref = str(fields.ref);
    if (action === 'put') {
      const part = int(fields.part, 'part');
      const upload =
        ref !== undefined
          ? await core.files.uploads.partUrl(session, path, ref, part ?? 1)
          : await core.files.uploads.start(session, path, int(fields.restart, 'restart'));
      send(ctx, 200, upload, 'upload');
      return;
    }
    if (action === 'end') {
      if (!ref)
        throw new GatewayError(
          'bad-request/request-params-required',
          'action=end needs the ref of the upload',
        );
      send(ctx, 200, await core.files.uploads.end(session, path, ref), 'file');
      return;
    }
    throw new GatewayError(
      'bad-request/no-valid-input-params',
      'Send move-destination, copy-destination, action=put or action=end',
    );
  });

  router.delete('/files{/*path}', async (ctx: RestContext) => {
    const depth = ctx.get('Depth');
    if (depth !== '' && depth.toLowerCase() !== 'infinity' && depth !== '0' && depth !== '1') {
      throw new GatewayError('bad-request/request-params-invalid', 'Depth must be infinity (or absent)');
    }
    await core.files
      .session(principal(ctx))
      .remove(urlPath(ctx, '/files'), { recursive: depth.toLowerCase() === 'infinity' });
    sendEmpty(ctx);
  });
}
