/**
 * Setting a file's modification time (FTP MFMT, SFTP SETSTAT, WebDAV's Win32LastModifiedTime):
 * lftp's mirror, rclone and `sftp put -p` do it after every file they upload, so it is one UPDATE
 * that answers the row, not a read and then an UPDATE (a round trip fewer to PostgreSQL).
 */
import { expect } from 'chai';
import { Readable } from 'node:stream';
import { GatewayError, LockedError, operatorPrincipal } from '../../../src/core/index.ts';
import { dbKind, openTestCore, type TestCore } from '../../helpers/gateway.ts';
import { queriesDuring } from '../../helpers/plans.ts';

describe(`setting a modification time (${dbKind})`, () => {
  let t: TestCore;
  before(async () => {
    t = await openTestCore();
  });
  after(async () => t.close());

  const session = () => t.core.files.session(operatorPrincipal());
  const when = new Date('2021-03-04T05:06:07.000Z');

  it('sets the time in one statement that answers the row, and the file keeps its content', async () => {
    await session().write('timed.txt', Readable.from([Buffer.from('content')]));
    let entry;
    const statements = await queriesDuring(t.core, async () => {
      entry = await session().setMtime('timed.txt', when);
    });
    expect(entry).to.include({ path: 'timed.txt', size: 7, type: 'file' });
    expect(entry!.mtime.toISOString()).to.equal(when.toISOString());
    expect((await session().stat('timed.txt')).mtime.toISOString()).to.equal(when.toISOString());
    const onFiles = statements.filter((s) => /\bfiles\b/i.test(s.query));
    expect(
      onFiles.map((s) => s.query.split(' ').slice(0, 3).join(' ')),
      'one UPDATE … RETURNING, no SELECT of the row',
    ).to.deep.equal(['UPDATE files SET']);
  });

  it('answers file-not-found for a missing path and for the root, changing nothing', async () => {
    for (const path of ['missing.txt', '']) {
      const err = await session()
        .setMtime(path, when)
        .catch((e: unknown) => e);
      expect(err).to.be.instanceOf(GatewayError);
      expect((err as GatewayError).type).to.equal('not-found/file-not-found');
    }
    expect(
      await session()
        .stat('missing.txt')
        .catch(() => null),
    ).to.equal(null);
  });

  it('is refused under a WebDAV lock without its token, the time unchanged', async () => {
    await session().write('held.txt', Readable.from([Buffer.from('x')]));
    const before = (await session().stat('held.txt')).mtime.toISOString();
    await t.core.dav.locks.lock(session(), 'held.txt', {
      scope: 'exclusive',
      depth: '0',
      owner: '',
      timeoutSeconds: 60,
    });
    const err = await session()
      .setMtime('held.txt', when)
      .catch((e: unknown) => e);
    expect(err).to.be.instanceOf(LockedError);
    expect((await session().stat('held.txt')).mtime.toISOString()).to.equal(before);
  });
});
