import { expect } from 'chai';
import { LockedError, operatorPrincipal } from '../../../src/core/index.ts';
import { dbKind, openTestCore, type TestCore } from '../../helpers/gateway.ts';

describe(`WebDAV locks under simultaneous requests (${dbKind})`, () => {
  let t: TestCore;
  before(async () => {
    t = await openTestCore();
  });
  after(async () => t.close());

  it('grants exactly one of 10 exclusive LOCKs sent at once on one path', async () => {
    const session = t.core.files.session(operatorPrincipal());
    const results = await Promise.allSettled(
      Array.from({ length: 10 }, () =>
        t.core.dav.locks.lock(session, 'contended.txt', {
          scope: 'exclusive',
          depth: '0',
          owner: '',
          timeoutSeconds: 60,
        }),
      ),
    );
    expect(results.filter((r) => r.status === 'fulfilled')).to.have.length(1);
    for (const r of results) {
      if (r.status === 'rejected')
        expect((r.reason as { type?: string }).type).to.equal('processing-failure/file-locked');
    }
  });

  it('lists the locks below the root for a session without a root folder (a site admin’s PROPFIND of /)', async () => {
    const session = t.core.files.session(operatorPrincipal());
    await t.core.dav.locks.lock(session, 'deep/inside.txt', {
      scope: 'exclusive',
      depth: '0',
      owner: '',
      timeoutSeconds: 60,
    });
    const below = await t.core.dav.locks.affecting(session, '', { descendants: true });
    expect(below.map((l) => l.path)).to.include.members(['deep/inside.txt', 'contended.txt']);
    expect(await t.core.dav.locks.affecting(session, '')).to.deep.equal([]);
  });
  it('binds dead properties too: a PROPPATCH without the token is refused in the core, naming the lock root', async () => {
    const session = t.core.files.session(operatorPrincipal());
    await session.mkdir('props');
    await session.mkdir('props/in');
    const lock = await t.core.dav.locks.lock(session, 'props', {
      scope: 'exclusive',
      depth: 'infinity',
      owner: '',
      timeoutSeconds: 60,
    });
    const change = [{ op: 'set' as const, namespace: 'urn:x', name: 'color', value: 'red' }];
    const err = await t.core.dav.properties.patch(session, 'props/in', change).catch((e: unknown) => e);
    expect(err).to.be.instanceOf(LockedError);
    expect((err as LockedError).lockRoot).to.equal('props');
    expect((await t.core.dav.properties.getMany(session, ['props/in'])).get('props/in')).to.deep.equal([]);
    await t.core.dav.properties.patch(session.withLockTokens(new Set([lock.token])), 'props/in', change);
    const props = (await t.core.dav.properties.getMany(session, ['props/in'])).get('props/in');
    expect(props).to.deep.equal([{ namespace: 'urn:x', name: 'color', value: 'red' }]);
  });
});
