/**
 * The permission matrix seen from the wire, written once and run by each front end's real client
 * (DESIGN.md "Permissions"): full, readonly, writeonly, previewonly, admin, no permission at all,
 * and a site admin, each trying every file operation in their own root. What a level allows must
 * work, the rest must be refused as "denied", and the Actions recorded are exactly the allowed
 * operations', tagged with the client's `interface`.
 */
import { expect } from 'chai';
import { dbKind } from '../../helpers/gateway.ts';
import { PROTOCOLS, Scenario, type Client, type Outcome } from './clients.ts';

/** Operation is one thing a user tries, and the Action it records when it works. */
type Operation = 'list' | 'stat' | 'download' | 'upload' | 'mkdir' | 'move' | 'copy' | 'delete';
const OPERATIONS: readonly Operation[] = [
  'list',
  'stat',
  'download',
  'upload',
  'mkdir',
  'move',
  'copy',
  'delete',
];

// DESIGN.md "Permissions": full everything; readonly list, stat, download; writeonly upload and
// create folders; previewonly list and stat; admin is full plus exports; site admins pass every
// check; a user with no permission row gets nothing, not even a listing of their own root.
const ALLOWED: Record<string, readonly Operation[]> = {
  full: OPERATIONS,
  readonly: ['list', 'stat', 'download'],
  writeonly: ['upload', 'mkdir'],
  previewonly: ['list', 'stat'],
  admin: OPERATIONS,
  none: [],
  'site admin': OPERATIONS,
};

// The Action each operation records when it works (path relative to the user's root).
const RECORDED: Partial<Record<Operation, [string, string]>> = {
  download: ['read', 'file.txt'],
  upload: ['create', 'new.txt'],
  mkdir: ['create', 'newdir'],
  move: ['move', 'moved.txt'],
  copy: ['copy', 'copied.txt'],
  delete: ['destroy', 'victim.txt'],
};

async function attempt(c: Client, op: Operation): Promise<{ outcome: Outcome; raw: string }> {
  switch (op) {
    case 'list': {
      const r = await c.list('');
      // A listing that works must show the file, not an empty folder.
      if (r.outcome === 'ok' && !r.value!.includes('file.txt'))
        return { outcome: 'failed', raw: `listed ${JSON.stringify(r.value)}` };
      return r;
    }
    case 'stat':
      return c.stat('file.txt');
    case 'download': {
      const r = await c.download('file.txt');
      if (r.outcome === 'ok' && r.value !== 'data') return { outcome: 'failed', raw: `read ${r.value}` };
      return r;
    }
    case 'upload':
      return c.upload('new.txt', 'new');
    case 'mkdir':
      return c.mkdir('newdir');
    case 'move':
      return c.move('mover.txt', 'moved.txt');
    case 'copy':
      return c.copy!('file.txt', 'copied.txt');
    case 'delete':
      return c.remove('victim.txt');
  }
}

describe(`scenario: the permission matrix from every front end (${dbKind})`, function () {
  this.timeout(120_000);
  const s = Scenario.hooks();

  for (const protocol of PROTOCOLS) {
    describe(protocol, () => {
      for (const [level, allowed] of Object.entries(ALLOWED)) {
        const ops = OPERATIONS.filter((op) => op !== 'copy' || protocol !== 'ftp');
        it(`${level}: ${allowed.filter((o) => ops.includes(o)).join(', ') || 'nothing'}${
          protocol === 'ftp' ? ' (FTP has no copy)' : ''
        }`, async () => {
          const account =
            level === 'site admin'
              ? await s.account(null, { site_admin: true })
              : await s.account(level === 'none' ? null : level);
          for (const name of ['file.txt', 'mover.txt', 'victim.txt'])
            await s.put(`${account.root}/${name}`, 'data');
          const c = s.client(protocol, account);

          const seen: Record<string, Outcome> = {};
          const raws: string[] = [];
          for (const op of ops) {
            const r = await attempt(c, op);
            seen[op] = r.outcome;
            raws.push(`${op}: ${r.raw}`);
          }
          const want = Object.fromEntries(ops.map((op) => [op, allowed.includes(op) ? 'ok' : 'denied']));
          expect(seen, raws.join('\n')).to.deep.equal(want);

          // What was refused changed nothing; what worked is there.
          expect(await s.exists(`${account.root}/new.txt`)).to.equal(allowed.includes('upload'));
          expect(await s.exists(`${account.root}/victim.txt`)).to.equal(!allowed.includes('delete'));
          expect(await s.exists(`${account.root}/mover.txt`)).to.equal(!allowed.includes('move'));

          const rows = (await s.actions({ username: account.username })).filter(
            (a) => a.action !== 'login' && a.action !== 'failedlogin',
          );
          const expected = ops
            .filter((op) => allowed.includes(op) && RECORDED[op])
            .map((op) => [RECORDED[op]![0], `${account.root}/${RECORDED[op]![1]}`, protocol]);
          expect(rows.map((a) => [a.action, a.path, a.interface])).to.deep.equal(expected);
        });
      }
    });
  }
});
