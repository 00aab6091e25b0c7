/**
 * LOCK (RFC 4918 §9.10): exclusive and shared write locks, Depth 0 or infinity, Timeout, refresh
 * (no body, the lock's token in If), and lock-null resources: locking an unmapped URL creates an
 * empty file. Locks are the core's, in the database.
 */
import { Readable } from 'node:stream';
import { GatewayError, MAX_LOCK_SECONDS, type Core, type DavLock } from '../../../src/core/index.ts';
import { DavCondition } from '../errors.ts';
import { depthOf, statOrNull, timeoutOf, type DavContext, type Method } from '../http.ts';
import { evaluateIf, lockDiscovery } from '../locks.ts';
import { child, DAV, document, elements, readXml, serializeContent } from '../xml.ts';

function reply(ctx: DavContext, status: number, lock: DavLock): void {
  ctx.status = status;
  ctx.type = 'application/xml; charset=utf-8';
  ctx.body = document('prop', [lockDiscovery([lock])]);
}

const invalid = (message: string) => new GatewayError('bad-request/invalid-body', message);

/** lock creates or refreshes a lock. */
export const lock: Method = async (ctx, core: Core) => {
  const { session, path } = ctx.state;
  const body = await readXml(ctx.req);
  const timeout = timeoutOf(ctx, MAX_LOCK_SECONDS);
  if (!body) {
    if (!ctx.get('If'))
      throw new GatewayError(
        'bad-request/request-params-required',
        'A lock refresh needs the lock token in If',
      );
    const submitted = await evaluateIf(ctx, core);
    const held = (await core.dav.locks.affecting(session, path)).find((l) => submitted.has(l.token));
    if (!held)
      throw new DavCondition(412, 'lock-token-matches-request-uri', [], 'No such lock on this resource');
    reply(ctx, 200, await core.dav.locks.refresh(session, path, held.token, timeout));
    return;
  }
  if (body.ns !== DAV || body.name !== 'lockinfo') throw invalid('The body of a LOCK must be a DAV:lockinfo');
  const scope = elements(child(body, 'lockscope') ?? { ns: DAV, name: '', children: [] })[0];
  if (!scope || scope.ns !== DAV || (scope.name !== 'exclusive' && scope.name !== 'shared'))
    throw invalid('DAV:lockscope must be exclusive or shared');
  const type = elements(child(body, 'locktype') ?? { ns: DAV, name: '', children: [] })[0];
  if (!type || type.ns !== DAV || type.name !== 'write') throw invalid('DAV:locktype must be write');
  const owner = child(body, 'owner');
  const depth = depthOf(ctx, 'infinity');
  if (depth === '1')
    throw new GatewayError('bad-request/request-params-invalid', 'LOCK takes Depth 0 or infinity');
  if (ctx.get('If')) await evaluateIf(ctx, core);
  const existed = (await statOrNull(ctx, path)) !== null;
  const created = await core.dav.locks.lock(session, path, {
    scope: scope.name,
    depth,
    owner: owner ? serializeContent(owner) : '',
    timeoutSeconds: timeout,
  });
  if (!existed) {
    try {
      await session.withLockTokens([created.token]).write(path, Readable.from([]));
    } catch (err) {
      await core.dav.locks.unlock(session, path, created.token).catch(() => undefined);
      throw err;
    }
  }
  ctx.set('Lock-Token', `<${created.token}>`);
  reply(ctx, existed ? 200 : 201, created);
};
