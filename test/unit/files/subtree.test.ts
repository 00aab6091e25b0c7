/**
 * A folder's move, copy and delete take exactly what is inside it (neighbours whose names sort
 * right beside `a/` stay put: `a0`, `a.txt`, `a-b/…`, `ab/…`), with its dead properties, and find
 * it through the path indexes: a byte range, never a read of every row of files, dav_properties
 * or dav_locks (a substr test read the whole files table for every folder moved).
 */
import { Readable } from 'node:stream';
import { expect } from 'chai';
import { operatorPrincipal } from '../../../src/core/index.ts';
import { dbKind, openTestCore, type TestCore } from '../../helpers/gateway.ts';
import { queriesDuring, wholeReads, type Statement } from '../../helpers/plans.ts';

const TABLES = ['files', 'dav_properties', 'dav_locks'];

describe(`folder move, copy and delete (${dbKind})`, function () {
  this.timeout(30_000);
  let t: TestCore;
  const session = () => t.core.files.session(operatorPrincipal());
  const put = (p: string) => session().write(p, Readable.from([Buffer.from(p)]));
  /** paths lists every file and folder path of the site, sorted. */
  const paths = async () => {
    const out: string[] = [];
    const walk = async (folder: string): Promise<void> => {
      for await (const page of session().listAll(folder))
        for (const e of page) {
          out.push(e.path);
          if (e.type === 'directory') await walk(e.path);
        }
    };
    await walk('');
    return out.sort();
  };

  before(async () => {
    t = await openTestCore();
    for (const f of ['a/sub', 'a-b', 'ab']) await session().mkdir(f, { parents: true });
    for (const f of ['a/one.txt', 'a/sub/twö 🎉.txt', 'a0', 'a.txt', 'a-b/c.txt', 'ab/c.txt']) await put(f);
    await t.core.dav.properties.patch(session(), 'a/sub', [
      { op: 'set', namespace: 'urn:x', name: 'color', value: 'red' },
    ]);
  });
  after(async () => t.close());

  it('moves, copies and deletes only what is inside the folder, through indexes', async () => {
    const statements: Statement[] = [];
    const keep = async (run: () => Promise<unknown>) =>
      statements.push(...(await queriesDuring(t.core, run)));
    await keep(() => session().move('a', 'moved'));
    const neighbours = ['a-b', 'a-b/c.txt', 'a.txt', 'a0', 'ab', 'ab/c.txt'];
    const moved = ['moved', 'moved/one.txt', 'moved/sub', 'moved/sub/twö 🎉.txt'];
    expect(await paths()).to.deep.equal([...neighbours, ...moved].sort());
    const props = await t.core.dav.properties.getMany(session(), ['moved/sub']);
    expect(props.get('moved/sub')).to.deep.equal([{ namespace: 'urn:x', name: 'color', value: 'red' }]);

    await keep(() => session().copy('moved', 'copied'));
    const copied = moved.map((p) => p.replace(/^moved/, 'copied'));
    expect(await paths()).to.deep.equal([...neighbours, ...moved, ...copied].sort());

    await keep(() => session().remove('moved', { recursive: true }));
    expect(await paths()).to.deep.equal([...neighbours, ...copied].sort());

    expect(
      statements.filter((s) => /\b(files|dav_properties|dav_locks)\b/.test(s.query)).length,
    ).to.be.greaterThan(3);
    const whole = await wholeReads(t.core, statements, TABLES);
    expect(whole, whole.join('\n')).to.deep.equal([]);
  });
});
