/**
 * The lifecycle of a file, written once and run by each front end's real client: create, read,
 * update, move, copy, destroy. Each step must work, leave the content a user expects, and record
 * exactly one Action with the right `action`, site `path`, `source`, `destination` and the
 * client's `interface` (DESIGN.md "Actions": a new file is `create`, an overwrite `update`).
 */
import { expect } from 'chai';
import type { ActionRow } from '../../../src/db/entities.ts';
import { dbKind } from '../../helpers/gateway.ts';
import { PROTOCOLS, Scenario, type Result } from './clients.ts';

describe(`scenario: the lifecycle of a file from every front end (${dbKind})`, function () {
  this.timeout(60_000);
  const s = Scenario.hooks();

  for (const protocol of PROTOCOLS) {
    const copies = protocol !== 'ftp';
    it(`${protocol}: create → read → update → move → ${copies ? 'copy → ' : ''}destroy, one Action per step${
      copies ? '' : ' (FTP has no copy)'
    }`, async () => {
      const account = await s.account('full');
      const c = s.client(protocol, account);
      const site = (p: string) => `${account.root}/${p}`;
      let seen = 0;
      const fields = (a: ActionRow) => ({
        action: a.action,
        path: a.path,
        source: a.source,
        destination: a.destination,
        interface: a.interface,
      });

      /** step runs one operation, expects it to work and to add exactly `action` to the log. */
      const step = async <T>(
        name: string,
        op: Promise<Result<T>>,
        action: string,
        p: string,
        move?: [string, string],
      ): Promise<T | undefined> => {
        const r = await op;
        expect(r.outcome, `${name}: ${r.raw}`).to.equal('ok');
        const rows = (await s.actions({ username: account.username })).filter((a) => a.action !== 'login');
        const fresh = rows.slice(seen);
        seen = rows.length;
        expect(fresh.map(fields), name).to.deep.equal([
          {
            action,
            path: site(p),
            source: move ? site(move[0]) : '',
            destination: move ? site(move[1]) : '',
            interface: protocol,
          },
        ]);
        return r.value;
      };

      await step('create', c.upload('report.txt', 'first draft'), 'create', 'report.txt');
      expect(await step('read', c.download('report.txt'), 'read', 'report.txt')).to.equal('first draft');
      await step('update', c.upload('report.txt', 'final text'), 'update', 'report.txt');
      await step('move', c.move('report.txt', 'final.txt'), 'move', 'final.txt', ['report.txt', 'final.txt']);
      expect(await s.exists(site('report.txt'))).to.equal(false);
      expect((await s.fx.download(site('final.txt'))).toString()).to.equal('final text');
      if (c.copy) {
        await step('copy', c.copy('final.txt', 'copy.txt'), 'copy', 'copy.txt', ['final.txt', 'copy.txt']);
        expect((await s.fx.download(site('copy.txt'))).toString()).to.equal('final text');
        await step('destroy the copy', c.remove('copy.txt'), 'destroy', 'copy.txt');
      }
      await step('destroy', c.remove('final.txt'), 'destroy', 'final.txt');
      expect(await s.exists(site('final.txt'))).to.equal(false);

      // Every login on the way was recorded with the same interface, and nothing failed.
      const all = await s.actions({ username: account.username });
      expect(all.filter((a) => a.action === 'login').length).to.be.at.least(1);
      expect(all.map((a) => a.interface)).to.satisfy((xs: string[]) => xs.every((x) => x === protocol));
      expect(all.filter((a) => a.action === 'failedlogin')).to.deep.equal([]);
    });
  }
});
