/**
 * The ordering rule of an SFTP session (protocols/sftp/order.ts), without sockets: which requests
 * wait for which. The wire-level proof is test/protocols/sftp/ordering.test.ts.
 */
import { expect } from 'chai';
import { overlaps, RequestOrder, type Touch } from '../../../protocols/sftp/order.ts';

/** settled tells, after the pending microtasks ran, whether `p` has resolved. */
async function settled(p: Promise<void>): Promise<boolean> {
  let done = false;
  void p.then(() => (done = true));
  await new Promise((resolve) => setImmediate(resolve));
  return done;
}

describe('SFTP request order', () => {
  it('treats a path and everything inside it as overlapping, and nothing else', () => {
    expect(overlaps('a', 'a')).to.equal(true);
    expect(overlaps('a', 'a/x')).to.equal(true);
    expect(overlaps('a/x/y', 'a')).to.equal(true);
    expect(overlaps('', 'a/b')).to.equal(true);
    expect(overlaps('a', 'ab')).to.equal(false);
    expect(overlaps('a/x', 'a/y')).to.equal(false);
  });

  const cases: [string, Touch, Touch, boolean][] = [
    [
      'a LSTAT waits for the OPEN(create) before it',
      { paths: ['f'], change: true },
      { paths: ['f'], change: false },
      true,
    ],
    [
      'a listing waits for a file created in the folder',
      { paths: ['d/f'], change: true },
      { paths: ['d'], change: false },
      true,
    ],
    [
      'a rename of a folder orders with a stat inside it',
      { paths: ['d', 'e'], change: true },
      { paths: ['d/f'], change: false },
      true,
    ],
    [
      'two reads of one path run side by side',
      { paths: ['f'], change: false },
      { paths: ['f'], change: false },
      false,
    ],
    [
      'changes to unrelated paths run side by side',
      { paths: ['a/f'], change: true },
      { paths: ['b/f'], change: true },
      false,
    ],
  ];
  for (const [title, first, second, waits] of cases)
    it(title, async () => {
      const order = new RequestOrder();
      const a = order.admit(first);
      const b = order.admit(second);
      expect(await settled(a.ready)).to.equal(true);
      expect(await settled(b.ready)).to.equal(!waits);
      a.finish();
      expect(await settled(b.ready)).to.equal(true);
    });

  it('does not make requests on one handle wait for each other (the handle queue orders them)', async () => {
    const order = new RequestOrder();
    const handle = {};
    const w1 = order.admit({ paths: ['f'], change: true, owner: handle });
    const stat = order.admit({ paths: ['f'], change: false });
    const w2 = order.admit({ paths: ['f'], change: true, owner: handle });
    expect(await settled(w2.ready)).to.equal(false);
    stat.finish();
    expect(await settled(w2.ready)).to.equal(true);
    w1.finish();
  });
});
