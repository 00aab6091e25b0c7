import { expect } from 'chai';
import { operatorPrincipal } from '../../../src/core/index.ts';
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
});
