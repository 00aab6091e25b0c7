/**
 * WriteBehind (a big upload's disk writes started while it arrives, at `fsync`): one sync at a
 * time, every WRITE_BEHIND bytes, and a failed sync fails the upload. The syncs the kernel sees for
 * real uploads are counted in test/unit/db/durability.test.ts.
 */
import { expect } from 'chai';
import { MAX_SYNCING, WRITE_BEHIND, WriteBehind } from '../../../src/core/files/writebehind.ts';

/** syncs is a sync function whose calls wait until the test settles them. */
function syncs() {
  const calls: { resolve: () => void; reject: (err: Error) => void }[] = [];
  const sync = () => new Promise<void>((resolve, reject) => calls.push({ resolve, reject }));
  return { calls, sync };
}

const tick = () => new Promise((resolve) => setImmediate(resolve));

describe('WriteBehind', () => {
  it('syncs once WRITE_BEHIND bytes wait, one sync at a time', async () => {
    const { calls, sync } = syncs();
    const behind = new WriteBehind(sync);
    behind.written(WRITE_BEHIND - 1);
    expect(calls).to.have.length(0);
    behind.written(WRITE_BEHIND);
    expect(calls).to.have.length(1);
    // More bytes while it runs: no second sync beside it.
    behind.written(3 * WRITE_BEHIND);
    expect(calls).to.have.length(1);
    calls[0]!.resolve();
    await tick();
    // What came since the first sync began is past the mark: the next one starts.
    behind.written(3 * WRITE_BEHIND);
    expect(calls).to.have.length(2);
    calls[1]!.resolve();
    await behind.settle();
    // Nothing new since: no sync.
    behind.written(3 * WRITE_BEHIND + 1);
    expect(calls).to.have.length(2);
  });

  it('a failed sync fails the upload at settle, and no sync follows it', async () => {
    const { calls, sync } = syncs();
    const behind = new WriteBehind(sync);
    behind.written(WRITE_BEHIND);
    calls[0]!.reject(Object.assign(new Error('EIO: i/o error, fdatasync'), { code: 'EIO' }));
    await tick();
    behind.written(4 * WRITE_BEHIND);
    expect(calls).to.have.length(1);
    let failure: unknown;
    await behind.settle().catch((err: unknown) => (failure = err));
    expect((failure as { code?: string }).code).to.equal('EIO');
  });

  it(`at most ${MAX_SYNCING} syncs run at once in the process, leaving the thread pool's other threads`, async () => {
    const { calls, sync } = syncs();
    const uploads = Array.from({ length: MAX_SYNCING + 1 }, () => new WriteBehind(sync));
    for (const u of uploads) u.written(WRITE_BEHIND);
    expect(calls).to.have.length(MAX_SYNCING);
    // The last one syncs at its next chunk once one has finished.
    calls[0]!.resolve();
    await tick();
    uploads.at(-1)!.written(WRITE_BEHIND + 1);
    expect(calls).to.have.length(MAX_SYNCING + 1);
    for (const c of calls.slice(1)) c.resolve();
    await Promise.all(uploads.map((u) => u.settle()));
  });

  it('a sync that throws at once fails the upload and gives its place back', async () => {
    const behind = new WriteBehind(() => {
      throw Object.assign(new Error('EBADF: bad file descriptor, fdatasync'), { code: 'EBADF' });
    });
    expect(() => behind.written(WRITE_BEHIND)).to.not.throw();
    let failure: unknown;
    await behind.settle().catch((err: unknown) => (failure = err));
    expect((failure as { code?: string }).code).to.equal('EBADF');
    // Every place is free again: as many uploads as the limit all sync at once.
    const { calls, sync } = syncs();
    const others = Array.from({ length: MAX_SYNCING }, () => new WriteBehind(sync));
    for (const o of others) o.written(WRITE_BEHIND);
    expect(calls).to.have.length(MAX_SYNCING);
    for (const c of calls) c.resolve();
    await Promise.all(others.map((o) => o.settle()));
  });

  it('settle waits for the sync in flight', async () => {
    const { calls, sync } = syncs();
    const behind = new WriteBehind(sync);
    behind.written(WRITE_BEHIND);
    let settled = false;
    const waiting = behind.settle().then(() => (settled = true));
    await tick();
    expect(settled).to.equal(false);
    calls[0]!.resolve();
    await waiting;
    expect(settled).to.equal(true);
  });
});
