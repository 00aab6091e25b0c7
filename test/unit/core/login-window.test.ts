/**
 * The core's gate for clients that send their password with every request (WebDAV): the `login`
 * cadence kept in the database (one per user, client IP and interface per window), and a database
 * that does not answer reported as `service-unavailable/login-unavailable`, never as a wrong
 * password, on both databases.
 */
import { expect } from 'chai';
import { operatorPrincipal, type Principal } from '../../../src/core/index.ts';
import { ClientLoginEntity, UserEntity } from '../../../src/db/entities.ts';
import { dbKind, openTestCore, type TestCore } from '../../helpers/gateway.ts';
import { actions, expectError, freshIp, unique } from './fixtures.ts';
import { dbOf } from '../../helpers/internals.ts';

const PASSWORD = 'right-password';

describe(`core login gate: per-request passwords and unavailability (${dbKind})`, () => {
  const op = operatorPrincipal();

  describe('the login window', () => {
    let t: TestCore;
    // No cache: every request reaches the gate, so only the window decides whether `login` is recorded.
    before(async () => {
      t = await openTestCore({ accounts: { credential_cache_seconds: 0 } });
    });
    after(async () => t.close());

    const auth = (username: string, ip: string, password = PASSWORD): Promise<Principal> =>
      t.core.gate.authenticatePassword({ interface: 'dav', ip, username, password });

    it('records one login per user and client IP in a window, and a new one once it has passed', async () => {
      const user = await t.core.users.create(op, { username: unique('win'), password: PASSWORD });
      const ip = freshIp();
      for (let i = 0; i < 3; i++) await auth(user.username, ip);
      const other = freshIp();
      await auth(user.username, other);
      const logins = async () =>
        (await actions(t.core, { user_id: user.id, action: 'login' })).map((a) => a.ip);
      expect(await logins()).to.deep.equal([ip, other]);
      // The window of `ip` ends (as if login_window_seconds had passed): the next request opens another.
      await dbOf(t.core).work((em) =>
        em.update(ClientLoginEntity, { user_id: user.id, ip }, { login_at: new Date(0) }),
      );
      await auth(user.username, ip);
      await auth(user.username, ip);
      expect(await logins()).to.deep.equal([ip, other, ip]);
    });

    it('still refuses a wrong password and records the failedlogin', async () => {
      const user = await t.core.users.create(op, { username: unique('win'), password: PASSWORD });
      const ip = freshIp();
      await auth(user.username, ip);
      await expectError(auth(user.username, ip, 'wrong'), 'not-authenticated/invalid-username-or-password');
      const failed = await actions(t.core, { user_id: user.id, action: 'failedlogin' });
      expect(failed.map((a) => a.failure_type)).to.deep.equal(['password_mismatch']);
    });
  });

  describe('a database that does not answer', () => {
    let t: TestCore;
    before(async () => {
      t = await openTestCore();
    });
    after(async () => t.close());

    it('is service-unavailable/login-unavailable on every entry of the gate, and counts no failure', async () => {
      const user = await t.core.users.create(op, { username: unique('down'), password: PASSWORD });
      const ip = freshIp();
      // The connection (SQLite's file, PostgreSQL's pool) goes away under the running core.
      await dbOf(t.core).source.destroy();
      try {
        const type = 'service-unavailable/login-unavailable';
        const req = { ip, username: user.username, password: PASSWORD };
        await expectError(t.core.gate.login({ interface: 'ftp', ...req }), type);
        await expectError(t.core.gate.authenticatePassword({ interface: 'dav', ...req }), type);
        await expectError(t.core.sessions.create({ interface: 'restapi', ...req }), type);
        await expectError(t.core.sessions.authenticate('a'.repeat(64), 'restapi', ip), type);
        await expectError(t.core.authenticateApiKey('b'.repeat(64), 'restapi', ip), type);
        await expectError(
          t.core.gate.loginWithKey({ interface: 'sftp', ip, username: user.username, key: Buffer.from('k') }),
          type,
        );
        await expectError(t.core.gate.acceptsKey('sftp', user.username, Buffer.from('k')), type);
      } finally {
        await dbOf(t.core).source.initialize();
      }
      expect(await actions(t.core, { user_id: user.id, action: 'failedlogin' })).to.deep.equal([]);
      const row = await dbOf(t.core).read((em) => em.findOneByOrFail(UserEntity, { id: user.id }));
      expect(row.failed_logins).to.equal(0);
    });
  });
});
