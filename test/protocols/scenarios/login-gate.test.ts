/**
 * The login gate (DESIGN.md "Login gate"), written once and run by each front end's real client:
 * the interface's own flag, allowed_ips (the clients connect from 127.0.0.1 and bind 127.0.0.2 as
 * the other address), the lockout after repeated wrong passwords, a password change and a deleted
 * user. Each must take effect at once, on the next login or request, and leave `login` and
 * `failedlogin` Actions with their `failure_type`, `ip` and the client's `interface`.
 */
import { expect } from 'chai';
import type { ActionRow } from '../../../src/db/entities.ts';
import { dbKind } from '../../helpers/gateway.ts';
import { PROTOCOLS, Scenario, type Account, type Protocol } from './clients.ts';

/** FLAG is each interface's User flag (SPEC's ftp_permission and the extension flags). */
const FLAG: Record<Protocol, string> = {
  restapi: 'restapi_permission',
  ftp: 'ftp_permission',
  sftp: 'sftp_permission',
  dav: 'dav_permission',
};

/** MAX_FAILURES is the lockout threshold these tests set (the default is 5). */
const MAX_FAILURES = 3;

describe(`scenario: the login gate from every front end (${dbKind})`, function () {
  this.timeout(60_000);
  const s = Scenario.hooks({ lockout: { max_failures: MAX_FAILURES } });

  /** gateRows are the user's login and failedlogin Actions: [action, failure_type, ip, interface]. */
  const gateRows = async (account: Account) =>
    (await s.actions({ username: account.username }))
      .filter((a) => a.action === 'login' || a.action === 'failedlogin')
      .map((a: ActionRow) => [a.action, a.failure_type, a.ip, a.interface]);

  for (const protocol of PROTOCOLS) {
    describe(protocol, () => {
      const ok = (ip = '127.0.0.1') => ['login', '', ip, protocol];
      const failed = (failure: string, ip = '127.0.0.1') => ['failedlogin', failure, ip, protocol];

      it(`refuses a user whose ${FLAG[protocol]} is off, and admits one with only the other flags off`, async () => {
        const off = await s.account('full', { [FLAG[protocol]]: false });
        const r = await s.client(protocol, off).login();
        expect(r.outcome, r.raw).to.equal('login-refused');
        expect(await gateRows(off)).to.deep.equal([failed(`no_${protocol}_permission`)]);

        const others = Object.fromEntries(
          Object.entries(FLAG)
            .filter(([p]) => p !== protocol)
            .map(([, flag]) => [flag, false]),
        );
        const only = await s.account('full', others);
        const admitted = await s.client(protocol, only).login();
        expect(admitted.outcome, admitted.raw).to.equal('ok');
        expect(await gateRows(only)).to.deep.equal([ok()]);
      });

      it('applies allowed_ips: refused from 127.0.0.1, admitted from 127.0.0.2', async () => {
        const fenced = await s.account('full', { allowed_ips: '127.0.0.2' });
        const refused = await s.client(protocol, fenced).login();
        expect(refused.outcome, refused.raw).to.equal('login-refused');
        const admitted = await s.client(protocol, fenced, { bind: '127.0.0.2' }).login();
        expect(admitted.outcome, admitted.raw).to.equal('ok');
        expect(await gateRows(fenced)).to.deep.equal([failed('ip_mismatch'), ok('127.0.0.2')]);
      });

      it(`locks the user out after ${MAX_FAILURES} wrong passwords, even with the right one`, async () => {
        const account = await s.account('full');
        for (let i = 0; i < MAX_FAILURES; i++) {
          const r = await s.client(protocol, account, { password: `wrong-${i}` }).login();
          expect(r.outcome, r.raw).to.equal('login-refused');
        }
        const locked = await s.client(protocol, account).login();
        expect(locked.outcome, locked.raw).to.equal('login-refused');
        expect(await gateRows(account)).to.deep.equal([
          ...Array.from({ length: MAX_FAILURES }, () => failed('password_mismatch')),
          failed('locked_out'),
        ]);
      });

      it('takes a password change at once: the old one is refused, the new one admitted', async () => {
        const account = await s.account('full');
        // A client that just logged in with the old password: nothing it remembers may outlive the change.
        const before = await s.client(protocol, account).login();
        expect(before.outcome, before.raw).to.equal('ok');
        await s.admin('PUT', `/users/${account.id}`, { password: 'Changed-password-2' });
        const old = await s.client(protocol, account).login();
        expect(old.outcome, `old password: ${old.raw}`).to.equal('login-refused');
        const fresh = await s.client(protocol, account, { password: 'Changed-password-2' }).login();
        expect(fresh.outcome, `new password: ${fresh.raw}`).to.equal('ok');
        const rows = await gateRows(account);
        expect(rows.filter((r) => r[0] === 'failedlogin')).to.deep.equal([failed('password_mismatch')]);
        expect(rows[0]).to.deep.equal(ok());
        // WebDAV records one login per client session (DESIGN.md "Actions"), the others one per login.
        if (protocol !== 'dav') expect(rows).to.deep.equal([ok(), failed('password_mismatch'), ok()]);
      });

      it('refuses a deleted user at once, as username_not_found', async () => {
        const account = await s.account('full');
        const before = await s.client(protocol, account).login();
        expect(before.outcome, before.raw).to.equal('ok');
        await s.admin('DELETE', `/users/${account.id}`);
        const after = await s.client(protocol, account).login();
        expect(after.outcome, after.raw).to.equal('login-refused');
        expect(await gateRows(account)).to.deep.equal([ok(), failed('username_not_found')]);
      });
    });
  }
});
