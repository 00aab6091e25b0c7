import bcrypt from 'bcrypt';
import { expect } from 'chai';
import { clientIp } from '../../../src/core/access/allowed-ips.ts';
import { ConfigError, loadConfig } from '../../../src/config.ts';
import { operatorPrincipal, type Interface } from '../../../src/core/index.ts';
import { hashPassword } from '../../../src/core/accounts/passwords.ts';
import { UserEntity } from '../../../src/db/entities.ts';
import { dbKind, openTestCore, type TestCore } from '../../helpers/gateway.ts';
import { actions, expectError, freshIp, unique, userRow } from './fixtures.ts';
import { dbOf } from '../../helpers/internals.ts';
import { FAILED_FROM_IP, UNKNOWN_NAME_FAILURES } from '../../../src/core/actions/failed-logins.ts';

const INTERFACES: Interface[] = ['restapi', 'ftp', 'sftp', 'dav', 'web'];
const FLAG: Record<Interface, string> = {
  restapi: 'restapi_permission',
  ftp: 'ftp_permission',
  sftp: 'sftp_permission',
  dav: 'dav_permission',
  web: 'web_permission',
};
const PASSWORD = 'right-password';

describe(`core login gate (${dbKind})`, () => {
  let t: TestCore;
  const op = operatorPrincipal();
  before(async () => {
    t = await openTestCore();
  });
  after(async () => t.close());

  const newUser = (fields: Record<string, unknown> = {}) =>
    t.core.users.create(op, { username: unique('login'), password: PASSWORD, ...fields });
  const login = (username: string, iface: Interface, ip: string, password = PASSWORD) =>
    t.core.gate.login({ interface: iface, ip, username, password });
  /** failuresFrom lists the failure_type of each failedlogin Action recorded for `ip`. */
  const failuresFrom = async (ip: string) =>
    (await actions(t.core, { ip, action: 'failedlogin' })).map((a) => a.failure_type);

  it('counts failed logins before the password through their own indexes, not a scan of every Action', async () => {
    // Every login reads them: a scan of the Action log's last half hour (all downloads and
    // uploads) grew with the site's traffic, 3.6 ms a login at 66,000 Actions on SQLite.
    const since = Date.now() - 900_000;
    const plans = await dbOf(t.core).work(async (em) => {
      const plan = async (text: string, params: unknown[]) => {
        if (dbKind !== 'postgres')
          return ((await em.query(`EXPLAIN QUERY PLAN ${text}`, params)) as { detail: string }[])
            .map((r) => r.detail)
            .join('; ');
        // A scan is what a table this small would get anyway: forbidden, only a usable index is left.
        await em.query('SET LOCAL enable_seqscan = off');
        let n = 0;
        const pg = text.replace(/\?/g, () => `$${++n}`);
        return ((await em.query(`EXPLAIN ${pg}`, params)) as Record<string, string>[])
          .map((r) => r['QUERY PLAN'])
          .join('; ');
      };
      return {
        ip: await plan(FAILED_FROM_IP, ['192.0.2.1', since]),
        name: await plan(UNKNOWN_NAME_FAILURES, [since, 'nobody']),
      };
    });
    expect(plans.ip).to.include('idx_actions_failed_ip');
    expect(plans.name).to.include('idx_actions_logins');
  });

  for (const iface of INTERFACES) {
    it(`${iface}: a good password logs in and records a login Action with that interface and IP`, async () => {
      const user = await newUser();
      const ip = freshIp();
      const p = await login(user.username, iface, ip);
      expect(p.user?.id).to.equal(user.id);
      expect(p.interface).to.equal(iface);
      expect(p.ip).to.equal(ip);
      expect(p.apiKey).to.equal(null);
      const rows = await actions(t.core, { user_id: user.id, action: 'login' });
      expect(rows).to.have.length(1);
      expect(rows[0]).to.include({ interface: iface, ip, username: user.username, failure_type: '' });
      expect((await userRow(t.core, user.id)).last_login_at).to.be.instanceOf(Date);
    });

    it(`${iface}: ${FLAG[iface]} false refuses with failure_type no_${iface}_permission`, async () => {
      const user = await newUser({ [FLAG[iface]]: false });
      const ip = freshIp();
      await expectError(login(user.username, iface, ip), 'not-authenticated/invalid-credentials');
      expect(await failuresFrom(ip)).to.deep.equal([`no_${iface}_permission`]);
      expect(await actions(t.core, { user_id: user.id, action: 'login' })).to.deep.equal([]);
      // the other interfaces still admit the user
      const other = INTERFACES.find((i) => i !== iface)!;
      await login(user.username, other, ip);
    });
  }

  it('refuses a wrong password with invalid-username-or-password and records password_mismatch', async () => {
    const user = await newUser();
    const ip = freshIp();
    await expectError(
      login(user.username, 'ftp', ip, 'wrong-password'),
      'not-authenticated/invalid-username-or-password',
    );
    const rows = await actions(t.core, { ip });
    expect(rows).to.have.length(1);
    expect(rows[0]).to.include({
      action: 'failedlogin',
      failure_type: 'password_mismatch',
      user_id: user.id,
      username: user.username,
      interface: 'ftp',
      ip,
    });
  });

  it('refuses an unknown username the same way and records username_not_found', async () => {
    const ip = freshIp();
    const name = unique('nobody');
    await expectError(login(name, 'sftp', ip), 'not-authenticated/invalid-username-or-password');
    const rows = await actions(t.core, { ip });
    expect(rows).to.have.length(1);
    expect(rows[0]).to.include({
      action: 'failedlogin',
      failure_type: 'username_not_found',
      username: name,
      interface: 'sftp',
    });
    expect(rows[0]!.user_id).to.equal(null);
  });

  it('looks the username up case-insensitively', async () => {
    const user = await newUser({ username: unique('MixedCase') });
    const ip = freshIp();
    const p = await login(user.username.toUpperCase(), 'dav', ip);
    expect(p.user?.id).to.equal(user.id);
    const p2 = await login(user.username.toLowerCase(), 'restapi', ip);
    expect(p2.user?.id).to.equal(user.id);
    const rows = await actions(t.core, { ip, action: 'login' });
    expect(rows.map((r) => r.username)).to.deep.equal([user.username, user.username]);
  });

  it('does not let a right password of another user in', async () => {
    const a = await newUser();
    const b = await newUser({ password: 'b-password-123' });
    await expectError(
      login(a.username, 'restapi', freshIp(), 'b-password-123'),
      'not-authenticated/invalid-username-or-password',
    );
    await login(b.username, 'restapi', freshIp(), 'b-password-123');
  });

  describe('allowed_ips of the user', () => {
    const cases: [string, string, string[], string[]][] = [
      ['IPv4 exact', '10.1.2.3', ['10.1.2.3'], ['10.1.2.4', '10.1.2.30']],
      ['IPv4 CIDR', '192.168.10.0/24', ['192.168.10.1', '192.168.10.254'], ['192.168.11.1', '192.169.10.1']],
      ['IPv6 exact', '2001:db8::7', ['2001:db8::7', '2001:0db8:0:0:0:0:0:7'], ['2001:db8::8']],
      ['IPv6 CIDR', '2001:db8:1::/48', ['2001:db8:1::5', '2001:db8:1:ffff::1'], ['2001:db8:2::1', '::1']],
      ['IPv4-mapped IPv6 client vs IPv4 CIDR', '10.0.0.0/8', ['::ffff:10.1.2.3'], ['::ffff:11.1.2.3']],
      [
        'several entries, one per line',
        '172.16.0.1\n172.16.5.0/24',
        ['172.16.0.1', '172.16.5.9'],
        ['172.16.0.2'],
      ],
    ];
    for (const [title, list, allowed, refused] of cases) {
      it(`${title}: ${allowed.join(', ')} allowed; ${refused.join(', ')} refused with ip_mismatch`, async () => {
        const user = await newUser({ allowed_ips: list });
        for (const ip of allowed) {
          const p = await login(user.username, 'sftp', ip);
          // The core records one canonical form per address: ::ffff:a.b.c.d is a.b.c.d.
          expect(p.ip).to.equal(clientIp(ip));
        }
        for (const ip of refused) {
          await expectError(login(user.username, 'sftp', ip), 'not-authenticated/invalid-credentials');
        }
        const failures = await actions(t.core, { user_id: user.id, action: 'failedlogin' });
        expect(failures.map((a) => [a.ip, a.failure_type])).to.deep.equal(
          refused.map((ip) => [clientIp(ip), 'ip_mismatch']),
        );
        expect(await actions(t.core, { user_id: user.id, action: 'login' })).to.have.length(allowed.length);
      });
    }

    it('blank user list and blank site list allow every address', async () => {
      const user = await newUser({ allowed_ips: '' });
      for (const ip of ['8.8.8.8', '2001:db8::1', '::ffff:1.2.3.4']) await login(user.username, 'ftp', ip);
    });

    it('applies to API-key requests too, without recording Actions', async () => {
      const user = await newUser({ allowed_ips: '10.20.0.0/16' });
      const { key } = await t.core.apiKeys.create(op, { user_id: user.id });
      const p = await t.core.authenticateApiKey(key!, 'restapi', '10.20.1.1');
      expect(p.user?.id).to.equal(user.id);
      await expectError(
        t.core.authenticateApiKey(key!, 'restapi', '10.21.1.1'),
        'not-authenticated/invalid-credentials',
      );
      expect(await actions(t.core, { user_id: user.id, action: 'failedlogin' })).to.deep.equal([]);
    });
  });

  describe('allowed_ips of the site and the user together', () => {
    let s: TestCore;
    before(async () => {
      s = await openTestCore({ site: { allowed_ips: ['10.0.0.0/8', '2001:db8:aaaa::/48'] } });
    });
    after(async () => s.close());

    const create = (fields: Record<string, unknown> = {}) =>
      s.core.users.create(op, { username: unique('site'), password: PASSWORD, ...fields });
    const siteLogin = (username: string, ip: string) =>
      s.core.gate.login({ interface: 'ftp', ip, username, password: PASSWORD });

    it('with a blank user list, only the site list counts', async () => {
      const user = await create();
      await siteLogin(user.username, '10.9.9.9');
      await siteLogin(user.username, '::ffff:10.9.9.9');
      await siteLogin(user.username, '2001:db8:aaaa::1');
      await expectError(siteLogin(user.username, '192.168.1.1'), 'not-authenticated/invalid-credentials');
      await expectError(
        siteLogin(user.username, '2001:db8:bbbb::1'),
        'not-authenticated/invalid-credentials',
      );
      const rows = await actions(s.core, { user_id: user.id, action: 'failedlogin' });
      expect(rows.map((a) => a.failure_type)).to.deep.equal(['ip_mismatch', 'ip_mismatch']);
    });

    it('a match in either list allows; a match in neither refuses', async () => {
      const user = await create({ allowed_ips: '192.168.1.0/24' });
      await siteLogin(user.username, '192.168.1.77'); // user list only
      await siteLogin(user.username, '10.1.1.1'); // site list only
      await expectError(siteLogin(user.username, '172.16.0.1'), 'not-authenticated/invalid-credentials');
    });

    it('refuses a site list entry in a legacy IPv4 spelling at start, instead of reading it as another address', () => {
      for (const legacy of ['10.0.0.010', '10.1', '0x0a.0.0.0/8']) {
        expect(() => loadConfig({}, { site: { allowed_ips: [legacy] } }), legacy).to.throw(
          ConfigError,
          /allowed_ips/,
        );
      }
      expect(
        loadConfig({}, { site: { allowed_ips: ['10.0.0.10', '::ffff:10.0.0.0/104'] } }).site.allowed_ips,
      ).to.have.length(2);
    });

    it('a site-wide key is held to the site list', async () => {
      const { key } = await s.core.apiKeys.createSiteWide('site list');
      await s.core.authenticateApiKey(key!, 'restapi', '10.0.0.1');
      await expectError(
        s.core.authenticateApiKey(key!, 'restapi', '192.168.0.1'),
        'not-authenticated/invalid-credentials',
      );
    });
  });

  describe('user_root', () => {
    it('missing: ftp, sftp and dav are refused with no_directory; restapi and web still log in', async () => {
      const root = unique('homes/missing');
      const user = await newUser({ user_root: `${root}/` });
      const ip = freshIp();
      for (const iface of ['ftp', 'sftp', 'dav'] as const) {
        await expectError(login(user.username, iface, ip), 'not-authenticated/invalid-credentials');
      }
      expect(await failuresFrom(ip)).to.deep.equal(['no_directory', 'no_directory', 'no_directory']);
      expect((await actions(t.core, { ip, action: 'failedlogin' })).map((a) => a.interface)).to.deep.equal([
        'ftp',
        'sftp',
        'dav',
      ]);
      await login(user.username, 'restapi', ip);
      await login(user.username, 'web', ip);
    });

    it('present: once the folder exists, ftp, sftp and dav log in', async () => {
      const root = unique('homes/present');
      const user = await newUser({ user_root: `${root}/` });
      expect(user.user_root).to.equal(`${root}/`);
      const ip = freshIp();
      await expectError(login(user.username, 'ftp', ip), 'not-authenticated/invalid-credentials');
      await t.core.namespace.mkdir(op, root);
      for (const iface of ['ftp', 'sftp', 'dav'] as const) {
        const p = await login(user.username, iface, ip);
        expect(p.interface).to.equal(iface);
      }
    });

    it('a parent folder of the same name prefix does not count as the root', async () => {
      const root = unique('homes/prefix');
      await t.core.namespace.mkdir(op, `${root}x`);
      const user = await newUser({ user_root: `${root}/` });
      await expectError(login(user.username, 'ftp', freshIp()), 'not-authenticated/invalid-credentials');
    });
  });

  describe('a password verified before', () => {
    /** counting runs `fn` and returns how many bcrypt comparisons it made. */
    const counting = async (fn: () => Promise<unknown>): Promise<number> => {
      const original = bcrypt.compare;
      let calls = 0;
      bcrypt.compare = ((...args: Parameters<typeof original>) => {
        calls += 1;
        return (original as (...a: unknown[]) => unknown)(...args);
      }) as typeof original;
      try {
        await fn();
      } finally {
        bcrypt.compare = original;
      }
      return calls;
    };

    it('runs bcrypt once for a client that logs in again, while every login is still checked and recorded', async () => {
      const user = await newUser();
      const ip = freshIp();
      expect(await counting(() => login(user.username, 'ftp', ip))).to.equal(1);
      expect(await counting(() => login(user.username, 'ftp', ip))).to.equal(0);
      expect(await counting(() => login(user.username, 'ftp', ip))).to.equal(0);
      expect(await actions(t.core, { user_id: user.id, action: 'login' })).to.have.length(3);
      // a wrong password, another address or another interface: bcrypt again
      expect(
        await counting(() =>
          expectError(
            login(user.username, 'ftp', ip, 'wrong-one'),
            'not-authenticated/invalid-username-or-password',
          ),
        ),
      ).to.equal(1);
      expect(await counting(() => login(user.username, 'ftp', freshIp()))).to.equal(1);
      expect(await counting(() => login(user.username, 'sftp', ip))).to.equal(1);
    });

    it('does not let a changed password, flag or lockout through, even when another instance made the change', async () => {
      const user = await newUser();
      const ip = freshIp();
      await login(user.username, 'ftp', ip);
      // What another instance writes: this instance's cache is not cleared.
      const db = dbOf(t.core);
      await db.work((em) => em.update(UserEntity, { id: user.id }, { ftp_permission: false }));
      await expectError(login(user.username, 'ftp', ip), 'not-authenticated/invalid-credentials');
      await db.work((em) => em.update(UserEntity, { id: user.id }, { ftp_permission: true }));
      await login(user.username, 'ftp', ip);
      await db.work((em) =>
        em.update(UserEntity, { id: user.id }, { locked_until: new Date(Date.now() + 60_000) }),
      );
      await expectError(login(user.username, 'ftp', ip), 'not-authenticated/locked-out');
      await db.work((em) => em.update(UserEntity, { id: user.id }, { locked_until: null }));
      const rehashed = await hashPassword('a-password-set-elsewhere', t.config.accounts.bcrypt_rounds);
      await db.work((em) => em.update(UserEntity, { id: user.id }, { password_hash: rehashed }));
      expect(
        await counting(() =>
          expectError(login(user.username, 'ftp', ip), 'not-authenticated/invalid-username-or-password'),
        ),
      ).to.equal(1);
      await login(user.username, 'ftp', ip, 'a-password-set-elsewhere');
    });
  });

  describe('lockout', () => {
    // Time travel: the only way to let a 15-minute lockout expire in a unit test is to move
    // locked_until into the past, which the core offers no call for (by design).
    const expireLockout = (id: number) =>
      dbOf(t.core).work((em) => em.update(UserEntity, { id }, { locked_until: new Date(Date.now() - 1000) }));

    it('locks a user out after 5 wrong passwords, even against the right one, with locked_out', async () => {
      expect(t.config.lockout.max_failures).to.equal(5);
      const user = await newUser();
      const ip = freshIp();
      for (let i = 0; i < 5; i++) {
        await expectError(
          login(user.username, 'ftp', ip, `wrong-${i}`),
          'not-authenticated/invalid-username-or-password',
        );
      }
      await expectError(login(user.username, 'ftp', ip), 'not-authenticated/locked-out');
      // locked on every interface and from every address, not only where the guessing happened
      await expectError(login(user.username, 'restapi', freshIp()), 'not-authenticated/locked-out');
      const failures = await actions(t.core, { user_id: user.id, action: 'failedlogin' });
      expect(failures.map((a) => a.failure_type)).to.deep.equal([
        ...Array(5).fill('password_mismatch'),
        'locked_out',
        'locked_out',
      ]);
      expect(await actions(t.core, { user_id: user.id, action: 'login' })).to.deep.equal([]);
      const row = await userRow(t.core, user.id);
      expect(row.locked_until!.getTime()).to.be.greaterThan(Date.now() + 14 * 60_000);
    });

    it('after the lockout expires the right password works and the failure count starts again', async () => {
      const user = await newUser();
      const ip = freshIp();
      for (let i = 0; i < 5; i++) await login(user.username, 'sftp', ip, 'wrong').catch(() => undefined);
      await expectError(login(user.username, 'sftp', ip), 'not-authenticated/locked-out');
      await expireLockout(user.id);
      await login(user.username, 'sftp', ip);
      // four new failures do not lock again: the count was reset
      for (let i = 0; i < 4; i++) {
        await expectError(
          login(user.username, 'sftp', ip, 'wrong'),
          'not-authenticated/invalid-username-or-password',
        );
      }
      await login(user.username, 'sftp', ip);
    });

    it('a successful login resets the count of earlier failures', async () => {
      const user = await newUser();
      const ip = freshIp();
      for (let i = 0; i < 4; i++) await login(user.username, 'dav', ip, 'wrong').catch(() => undefined);
      await login(user.username, 'dav', ip);
      for (let i = 0; i < 4; i++) await login(user.username, 'dav', ip, 'wrong').catch(() => undefined);
      await login(user.username, 'dav', ip);
      const row = await userRow(t.core, user.id);
      expect(row.locked_until).to.equal(null);
    });

    it('counts only failures within window_minutes toward the lockout', async () => {
      const user = await newUser();
      const ip = freshIp();
      for (let i = 0; i < 4; i++) await login(user.username, 'ftp', ip, 'wrong').catch(() => undefined);
      // Time travel: let the 15-minute failure window run out without waiting for it.
      const windowMs = t.config.lockout.window_minutes * 60_000;
      await dbOf(t.core).work((em) =>
        em.update(
          UserEntity,
          { id: user.id },
          { failed_login_window_start: new Date(Date.now() - windowMs - 1000) },
        ),
      );
      await expectError(
        login(user.username, 'ftp', ip, 'wrong'),
        'not-authenticated/invalid-username-or-password',
      );
      // that fifth failure opened a new window instead of completing the old one
      await login(user.username, 'ftp', ip);
    });

    it("one user's lockout does not lock another user", async () => {
      const locked = await newUser();
      const other = await newUser();
      const ip = freshIp();
      for (let i = 0; i < 5; i++) await login(locked.username, 'ftp', ip, 'wrong').catch(() => undefined);
      await expectError(login(locked.username, 'ftp', ip), 'not-authenticated/locked-out');
      await login(other.username, 'ftp', ip);
    });
  });

  describe('per-IP limit', () => {
    let r: TestCore;
    before(async () => {
      r = await openTestCore({ lockout: { ip_max_failures: 3 } });
    });
    after(async () => r.close());

    it('rate-limits an address failing across usernames, while another address still logs in', async () => {
      const names = [unique('ipa'), unique('ipb'), unique('ipc'), unique('ipd')];
      for (const username of names) await r.core.users.create(op, { username, password: PASSWORD });
      const attacker = '203.0.113.9';
      const rLogin = (username: string, ip: string, password = PASSWORD) =>
        r.core.gate.login({ interface: 'ftp', ip, username, password });
      await expectError(
        rLogin(names[0]!, attacker, 'guess'),
        'not-authenticated/invalid-username-or-password',
      );
      await expectError(
        rLogin(names[1]!, attacker, 'guess'),
        'not-authenticated/invalid-username-or-password',
      );
      await expectError(
        rLogin(unique('ghost'), attacker, 'guess'),
        'not-authenticated/invalid-username-or-password',
      );
      // the fourth attempt is refused before any password check, whoever it names, even a right password
      await expectError(rLogin(names[2]!, attacker, 'guess'), 'rate-limited/too-many-login-attempts');
      await expectError(rLogin(names[3]!, attacker), 'rate-limited/too-many-login-attempts');
      // no single user reached the per-user lockout, and another address logs in fine
      const p = await rLogin(names[3]!, '203.0.113.10');
      expect(p.user?.username).to.equal(names[3]);
      await rLogin(names[0]!, '2001:db8::99');
    });
  });
});
