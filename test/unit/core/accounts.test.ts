import { createHash } from 'node:crypto';
import bcrypt from 'bcrypt';
import { expect } from 'chai';
import { operatorPrincipal, type Principal, type User } from '../../../src/core/index.ts';
import {
  ApiKeyEntity,
  MembershipEntity,
  NotificationEntity,
  PermissionEntity,
  SessionEntity,
  UserEntity,
} from '../../../src/db/entities.ts';
import { dbKind, openTestCore, type TestCore } from '../../helpers/gateway.ts';
import {
  actions,
  expectError,
  expectModelError,
  freshIp,
  principalFor,
  unique,
  userRow,
} from './fixtures.ts';
import { dbOf } from '../../helpers/internals.ts';

const PASSWORD = 'password-123';

describe(`core accounts (${dbKind})`, () => {
  let t: TestCore;
  const op = operatorPrincipal();
  before(async () => {
    t = await openTestCore();
  });
  after(async () => t.close());

  const newUser = (fields: Record<string, unknown> = {}) =>
    t.core.users.create(op, { username: unique('acc'), password: PASSWORD, ...fields });
  const newGroup = (fields: Record<string, unknown> = {}) =>
    t.core.groups.create(op, { name: unique('grp'), ...fields });
  const userCount = () => dbOf(t.core).read((em) => em.count(UserEntity));
  const membershipCount = () => dbOf(t.core).read((em) => em.count(MembershipEntity));
  /** siteAdmin logs a site admin in through the gate, so Actions carry a real user and interface. */
  const siteAdmin = async (iface: 'restapi' | 'web' = 'web', ip = freshIp()): Promise<Principal> => {
    const admin = await newUser({ site_admin: true });
    return t.core.gate.login({ interface: iface, ip, username: admin.username, password: PASSWORD });
  };

  describe('users: validation', () => {
    it('refuses a taken username, case-insensitively, on create and on update', async () => {
      const name = unique('Taken');
      await newUser({ username: name });
      const before = await userCount();
      expect(await expectModelError(newUser({ username: name.toLowerCase() }), 'username')).to.deep.equal([
        'has already been taken',
      ]);
      await expectModelError(newUser({ username: name.toUpperCase() }), 'username');
      expect(await userCount()).to.equal(before);
      const other = await newUser();
      await expectModelError(t.core.users.update(op, other.id, { username: name.toLowerCase() }), 'username');
      expect((await t.core.users.get(op, other.id)).username).to.equal(other.username);
    });

    it('lets a username change only its case without calling itself taken', async () => {
      const user = await newUser({ username: unique('case') });
      const updated = await t.core.users.update(op, user.id, { username: user.username.toUpperCase() });
      expect(updated.username).to.equal(user.username.toUpperCase());
      await t.core.gate.login({
        interface: 'ftp',
        ip: freshIp(),
        username: user.username,
        password: PASSWORD,
      });
    });

    it('requires a password of at least 8 characters', async () => {
      const before = await userCount();
      expect(
        await expectModelError(t.core.users.create(op, { username: unique('nopw') }), 'password'),
      ).to.deep.equal(["can't be blank"]);
      const short = await expectModelError(newUser({ password: 'seven77' }), 'password');
      expect(short[0]).to.match(/too short/);
      await newUser({ password: 'eight888' });
      expect(await userCount()).to.equal(before + 1);
      const user = await newUser();
      await expectModelError(t.core.users.update(op, user.id, { password: 'short' }), 'password');
      // the old password still works
      await t.core.gate.login({
        interface: 'ftp',
        ip: freshIp(),
        username: user.username,
        password: PASSWORD,
      });
    });

    it('requires a username, at most 50 characters, without a colon', async () => {
      await expectModelError(t.core.users.create(op, { password: PASSWORD }), 'username');
      await expectModelError(newUser({ username: '' }), 'username');
      await expectModelError(newUser({ username: 'x'.repeat(51) }), 'username');
      await expectModelError(newUser({ username: 'a:b' }), 'username');
      // 'İ' lower-cases to two characters: 40 of them would overflow the case-insensitive key
      await expectModelError(newUser({ username: 'İ'.repeat(40) }), 'username');
      expect((await newUser({ username: 'İ'.repeat(25) })).username).to.equal('İ'.repeat(25));
      const fifty = 'y'.repeat(45) + String(Date.now() % 100000).padStart(5, '0');
      expect((await newUser({ username: fifty })).username).to.equal(fifty);
    });

    it('refuses a bad e-mail address, a bad allowed_ips entry and a user_root with ..', async () => {
      await expectModelError(newUser({ email: 'not-an-address' }), 'email');
      const ips = await expectModelError(
        newUser({ allowed_ips: '10.0.0.1\n10.0.0.0/33\nhost.example' }),
        'allowed_ips',
      );
      expect(ips.join(' ')).to.include('10.0.0.0/33').and.include('host.example');
      // ipaddr.js alone would read these legacy forms as other addresses (010 is octal 8, "10.1" is
      // 10.0.0.1): an admin's typo must be refused, not silently allow someone else.
      for (const legacy of ['10.0.0.010', '10.1', '167772161', '0x0a.0.0.1', '010.0.0.0/8']) {
        const msgs = await expectModelError(newUser({ allowed_ips: legacy }), 'allowed_ips');
        expect(msgs.join(' ')).to.include(legacy);
      }
      await expectModelError(newUser({ user_root: 'a/../b/' }), 'user_root');
      await expectModelError(newUser({ user_root: 'x'.repeat(251) }), 'user_root');
      expect((await newUser({ email: 'ok@example.com' })).email).to.equal('ok@example.com');
    });

    it('keeps require_password_change only with web_permission, whichever of them changes', async () => {
      await expectModelError(
        newUser({ require_password_change: true, web_permission: false }),
        'require_password_change',
      );
      const forced = await newUser({ require_password_change: true });
      await expectModelError(
        t.core.users.update(op, forced.id, { web_permission: false }),
        'require_password_change',
      );
      expect((await t.core.users.get(op, forced.id)).web_permission).to.equal(true);
      const noWeb = await newUser({ web_permission: false });
      await expectModelError(
        t.core.users.update(op, noWeb.id, { require_password_change: 'true' }),
        'require_password_change',
      );
      const both = await t.core.users.update(op, noWeb.id, {
        require_password_change: true,
        web_permission: true,
      });
      expect(both).to.include({ require_password_change: true, web_permission: true });
      const off = await t.core.users.update(op, forced.id, {
        require_password_change: false,
        web_permission: false,
      });
      expect(off).to.include({ require_password_change: false, web_permission: false });
    });

    it('refuses values of the wrong type, naming each field', async () => {
      const err = await expectError(
        newUser({ ftp_permission: 'maybe', site_admin: 3, group_ids: 'one,two', name: { first: 'x' } }),
        'processing-failure/model-save-error',
      );
      expect(err.model!.model_errors).to.have.all.keys('ftp_permission', 'site_admin', 'group_ids', 'name');
      expect(err.model!.model_error_keys).to.have.property('ftp_permission');
      expect(err.model!.errors.join('; ')).to.match(/Ftp permission/);
    });

    it('refuses group_ids naming a group that does not exist', async () => {
      const msgs = await expectModelError(newUser({ group_ids: '999999' }), 'group_ids');
      expect(msgs.join(' ')).to.include('999999');
    });

    it("accepts XML and form spellings ('true', '0', '5', '1,2')", async () => {
      const g1 = await newGroup();
      const g2 = await newGroup();
      const user = await newUser({
        ftp_permission: 'false',
        web_permission: '0',
        attachments_permission: 'true',
        site_admin: ' TRUE ',
        group_ids: String(g1.id),
      });
      expect(user).to.include({
        ftp_permission: false,
        web_permission: false,
        attachments_permission: true,
        site_admin: true,
        group_ids: String(g1.id),
      });
      const updated = await t.core.users.update(op, user.id, { group_ids: `${g2.id}, ${g1.id}` });
      expect(updated.group_ids).to.equal([g1.id, g2.id].sort((a, b) => a - b).join(','));
      const asNumber = await t.core.users.update(op, user.id, { group_ids: g2.id });
      expect(asNumber.group_ids).to.equal(String(g2.id));
    });

    it('leaves nothing half-saved when a create fails after the user row was written', async () => {
      const group = await newGroup();
      const users = await userCount();
      const memberships = await membershipCount();
      const username = unique('half');
      await expectModelError(
        newUser({ username, group_ids: `${group.id},999998`, grant_permission: 'full', user_root: 'half/' }),
        'group_ids',
      );
      expect(await userCount()).to.equal(users);
      expect(await membershipCount()).to.equal(memberships);
      expect(await dbOf(t.core).read((em) => em.countBy(PermissionEntity, { path: 'half' }))).to.equal(0);
      const created = await actions(t.core, { action: 'user_create' });
      expect(created.filter((a) => a.targets.includes(username))).to.deep.equal([]);
      // and the name is still free
      await newUser({ username });
    });

    it('leaves the user unchanged when an update fails part-way', async () => {
      const group = await newGroup();
      const user = await newUser({ name: 'Before', group_ids: String(group.id) });
      await expectModelError(
        t.core.users.update(op, user.id, { name: 'After', group_ids: '999997', password: 'a-new-password' }),
        'group_ids',
      );
      const now = await t.core.users.get(op, user.id);
      expect(now.name).to.equal('Before');
      expect(now.group_ids).to.equal(String(group.id));
      await t.core.gate.login({
        interface: 'ftp',
        ip: freshIp(),
        username: user.username,
        password: PASSWORD,
      });
    });

    it('never returns the password or its hash', async () => {
      const secret = 'a-very-secret-password';
      const created = await newUser({ password: secret });
      const views: User[] = [
        created,
        await t.core.users.get(op, created.id),
        await t.core.users.update(op, created.id, { password: `${secret}-2` }),
        ...(await t.core.users.list(op, {})).items,
      ];
      for (const view of views) {
        expect(view).to.not.have.any.keys('password', 'password_hash', 'grant_permission');
        const json = JSON.stringify(view);
        expect(json).to.not.include(secret);
        expect(json).to.not.match(/\$2[aby]\$/);
      }
    });

    it("keeps user_root in SPEC's form (no leading slash, one trailing slash) and refuses any other", async () => {
      expect((await newUser({ user_root: 'a/b/' })).user_root).to.equal('a/b/');
      expect((await newUser({ user_root: '' })).user_root).to.equal('');
      for (const root of ['/a/b/', '/a/b', 'a/b', '/', 'a//'])
        await expectModelError(newUser({ user_root: root }), 'user_root');
    });

    it('reports not-found for a user that does not exist', async () => {
      await expectError(t.core.users.get(op, 999999), 'not-found/user-not-found');
      await expectError(t.core.users.update(op, 999999, { name: 'x' }), 'not-found/user-not-found');
      await expectError(t.core.users.remove(op, 999999), 'not-found/user-not-found');
    });
  });

  describe('users and groups: membership from both sides', () => {
    it("setting a user's group_ids shows in the group's user_ids, and the other way round", async () => {
      const g = await newGroup();
      const a = await newUser({ group_ids: String(g.id) });
      expect((await t.core.groups.get(op, g.id)).user_ids).to.equal(String(a.id));
      const b = await newUser();
      const updated = await t.core.groups.update(op, g.id, { user_ids: `${a.id},${b.id}` });
      expect(updated.user_ids).to.equal(`${a.id},${b.id}`);
      expect((await t.core.users.get(op, b.id)).group_ids).to.equal(String(g.id));
      // an update that leaves user_ids out keeps the members (SPEC Groups PUT)
      const renamed = await t.core.groups.update(op, g.id, { name: unique('renamed') });
      expect(renamed.user_ids).to.equal(`${a.id},${b.id}`);
      await t.core.users.update(op, a.id, { group_ids: '' });
      expect((await t.core.groups.get(op, g.id)).user_ids).to.equal(String(b.id));
    });

    it('deleting a group removes its memberships and permissions', async () => {
      const g = await newGroup();
      const other = await newGroup();
      const u = await newUser({ group_ids: `${g.id},${other.id}` });
      await t.core.permissions.create(op, { path: 'grp/del', permission: 'full', group_id: g.id });
      await t.core.groups.remove(op, g.id);
      expect((await t.core.users.get(op, u.id)).group_ids).to.equal(String(other.id));
      expect(await dbOf(t.core).read((em) => em.countBy(PermissionEntity, { group_id: g.id }))).to.equal(0);
      await expectError(t.core.groups.get(op, g.id), 'not-found/group-not-found');
    });

    it('deleting a user removes them from their groups', async () => {
      const g = await newGroup();
      const a = await newUser({ group_ids: String(g.id) });
      const b = await newUser({ group_ids: String(g.id) });
      await t.core.users.remove(op, a.id);
      expect((await t.core.groups.get(op, g.id)).user_ids).to.equal(String(b.id));
      expect(await dbOf(t.core).read((em) => em.countBy(MembershipEntity, { user_id: a.id }))).to.equal(0);
    });

    it('refuses unknown user ids and a taken or blank group name', async () => {
      const taken = await newGroup();
      await expectModelError(newGroup({ user_ids: '999996' }), 'user_ids');
      await expectModelError(newGroup({ name: taken.name }), 'name');
      await expectModelError(newGroup({ name: '  ' }), 'name');
      await expectModelError(newGroup({ name: 'n'.repeat(51) }), 'name');
    });
  });

  describe('users: deletion', () => {
    it("removes the user's permissions, API keys, sessions and notifications but keeps their Actions", async () => {
      const user = await newUser();
      const ip = freshIp();
      await t.core.permissions.create(op, { path: 'deleted/home', permission: 'full', user_id: user.id });
      const { key } = await t.core.apiKeys.create(op, { user_id: user.id });
      const { id: session } = await t.core.sessions.create({
        interface: 'restapi',
        ip,
        username: user.username,
        password: PASSWORD,
      });
      await t.core.notifications.create(op, { path: 'deleted/home', user_id: user.id });
      const loginActions = await actions(t.core, { user_id: user.id });
      expect(loginActions.map((a) => a.action)).to.include('login');

      await t.core.users.remove(op, user.id);

      const left = await dbOf(t.core).read(async (em) => ({
        user: await em.countBy(UserEntity, { id: user.id }),
        permissions: await em.countBy(PermissionEntity, { user_id: user.id }),
        keys: await em.countBy(ApiKeyEntity, { user_id: user.id }),
        sessions: await em.countBy(SessionEntity, { user_id: user.id }),
        notifications: await em.countBy(NotificationEntity, { user_id: user.id }),
      }));
      expect(left).to.deep.equal({ user: 0, permissions: 0, keys: 0, sessions: 0, notifications: 0 });
      await expectError(
        t.core.authenticateApiKey(key!, 'restapi', ip),
        'not-authenticated/invalid-credentials',
      );
      await expectError(
        t.core.sessions.authenticate(session, 'restapi', ip),
        'not-authenticated/authentication-required',
      );
      await expectError(
        t.core.gate.login({ interface: 'ftp', ip, username: user.username, password: PASSWORD }),
        'not-authenticated/invalid-username-or-password',
      );
      const kept = await actions(t.core, { user_id: user.id });
      expect(kept.map((a) => a.id)).to.include.members(loginActions.map((a) => a.id));
    });
  });

  describe('Actions of account administration', () => {
    it('records user_*, group_*, permission_* and api_key_create with the acting user and interface', async () => {
      const ip = freshIp();
      const admin = await siteAdmin('web', ip);
      const start = (await actions(t.core)).at(-1)!.id;

      const user = await t.core.users.create(admin, { username: unique('act'), password: PASSWORD });
      await t.core.users.update(admin, user.id, { name: 'Renamed', password: 'another-password' });
      const group = await t.core.groups.create(admin, { name: unique('actg') });
      await t.core.groups.update(admin, group.id, { user_ids: String(user.id) });
      const perm = await t.core.permissions.create(admin, {
        path: 'act/dir',
        permission: 'readonly',
        user_id: user.id,
      });
      await t.core.permissions.remove(admin, perm.id);
      await t.core.apiKeys.create(admin, { user_id: user.id });
      await t.core.groups.remove(admin, group.id);
      await t.core.users.remove(admin, user.id);

      const rows = (await actions(t.core)).filter((a) => a.id > start);
      expect(rows.map((a) => a.action)).to.deep.equal([
        'user_create',
        'user_update',
        'group_create',
        'group_update',
        'permission_create',
        'permission_destroy',
        'api_key_create',
        'group_destroy',
        'user_destroy',
      ]);
      for (const row of rows) {
        expect(row, row.action).to.include({
          user_id: admin.user!.id,
          username: admin.user!.username,
          interface: 'web',
          ip,
        });
        expect(row.display, row.action).to.not.equal('');
      }
      expect(rows[4]!.path).to.equal('act/dir');
      expect(JSON.parse(rows[0]!.targets)).to.deep.equal([
        { type: 'user', id: user.id, username: user.username },
      ]);
      // the update names the changed fields but never the password's value
      expect(rows[1]!.targets).to.include('name').and.not.include('another-password');
    });

    it('records the operator at the command line without a user', async () => {
      const user = await newUser();
      const rows = await actions(t.core, { action: 'user_create' });
      const mine = rows.find((r) => JSON.parse(r.targets)[0]?.id === user.id)!;
      expect(mine).to.include({ user_id: null, username: '' });
    });
  });

  describe('who may manage accounts', () => {
    let plain: Principal;
    let victim: User;
    before(async () => {
      const u = await newUser();
      plain = await t.core.gate.login({
        interface: 'restapi',
        ip: freshIp(),
        username: u.username,
        password: PASSWORD,
      });
      victim = await newUser();
    });

    it('refuses user and group management to a plain user with site-admin-required', async () => {
      const denied = 'not-authorized/site-admin-required' as const;
      const before = await userCount();
      await expectError(t.core.users.create(plain, { username: unique('x'), password: PASSWORD }), denied);
      await expectError(t.core.users.list(plain, {}), denied);
      await expectError(t.core.users.get(plain, victim.id), denied);
      await expectError(t.core.users.update(plain, victim.id, { name: 'hacked' }), denied);
      await expectError(t.core.users.remove(plain, victim.id), denied);
      await expectError(t.core.groups.create(plain, { name: unique('x') }), denied);
      await expectError(t.core.groups.list(plain, {}), denied);
      expect(await userCount()).to.equal(before);
      expect((await t.core.users.get(op, victim.id)).name).to.equal('');
    });

    it('lets a user read themselves and change their own name, but not make themselves site admin', async () => {
      const me = plain.user!.id;
      expect((await t.core.users.get(plain, me)).id).to.equal(me);
      expect((await t.core.users.update(plain, me, { name: 'Me' })).name).to.equal('Me');
      await expectError(
        t.core.users.update(plain, me, { site_admin: true }),
        'not-authorized/site-admin-required',
      );
      await expectError(
        t.core.users.update(plain, me, { ftp_permission: false }),
        'not-authorized/site-admin-required',
      );
      expect((await userRow(t.core, me)).site_admin).to.equal(false);
    });

    it('refuses self-service to a user who is not self_managed', async () => {
      const u = await newUser({ self_managed: false });
      const p = await principalFor(t.core, u.id);
      await expectError(t.core.users.update(p, u.id, { name: 'x' }), 'not-authorized/site-admin-required');
    });
  });

  describe('permissions', () => {
    it('needs exactly one of user and group', async () => {
      const u = await newUser();
      const g = await newGroup();
      await expectModelError(
        t.core.permissions.create(op, { path: 'x', permission: 'full', user_id: u.id, group_id: g.id }),
        'base',
      );
      await expectModelError(
        t.core.permissions.create(op, {
          path: 'x',
          permission: 'full',
          username: u.username,
          group_id: g.id,
        }),
        'base',
      );
      await expectModelError(t.core.permissions.create(op, { path: 'x', permission: 'full' }), 'base');
      await expectModelError(
        t.core.permissions.create(op, { path: 'x', permission: 'full', user_id: 999995 }),
        'user_id',
      );
      await expectModelError(
        t.core.permissions.create(op, { path: 'x', permission: 'full', group_id: 999995 }),
        'group_id',
      );
      await expectModelError(
        t.core.permissions.create(op, { path: 'x', permission: 'owner', user_id: u.id }),
        'permission',
      );
      expect(await dbOf(t.core).read((em) => em.countBy(PermissionEntity, { user_id: u.id }))).to.equal(0);
    });

    it('looks user_id up from username, case-insensitively', async () => {
      const u = await newUser({ username: unique('PermUser') });
      const perm = await t.core.permissions.create(op, {
        path: 'by/name',
        permission: 'readonly',
        username: u.username.toLowerCase(),
      });
      expect(perm).to.include({ user_id: u.id, username: u.username, group_id: null, path: 'by/name' });
      await expectModelError(
        t.core.permissions.create(op, { path: 'by/name', permission: 'readonly', username: unique('ghost') }),
        'username',
      );
    });

    it('refuses a leading or trailing slash and . and .. segments', async () => {
      const u = await newUser();
      const perm = await t.core.permissions.create(op, {
        path: 'norm/a/b',
        permission: 'full',
        user_id: String(u.id),
      });
      expect(perm.path).to.equal('norm/a/b');
      for (const path of ['/norm/a/b', 'norm/a/b/', '/'])
        await expectModelError(
          t.core.permissions.create(op, { path, permission: 'full', user_id: u.id }),
          'path',
        );
      await expectModelError(
        t.core.permissions.create(op, { path: 'norm/../etc', permission: 'full', user_id: u.id }),
        'path',
      );
      await expectModelError(
        t.core.permissions.create(op, { path: 'norm/./a', permission: 'full', user_id: u.id }),
        'path',
      );
      await expectModelError(
        t.core.permissions.create(op, { path: 'norm//a', permission: 'full', user_id: u.id }),
        'path',
      );
    });

    it('refuses a duplicate', async () => {
      const u = await newUser();
      await t.core.permissions.create(op, { path: 'dup', permission: 'full', user_id: u.id });
      await expectModelError(
        t.core.permissions.create(op, { path: 'dup', permission: 'full', user_id: u.id }),
        'permission',
      );
      // another level on the same path is a different permission
      await t.core.permissions.create(op, { path: 'dup', permission: 'readonly', user_id: u.id });
      expect(await dbOf(t.core).read((em) => em.countBy(PermissionEntity, { user_id: u.id }))).to.equal(2);
    });

    it('lets a Folder Admin manage permissions inside their folder only', async () => {
      const fa = await newUser();
      const member = await newUser();
      await t.core.permissions.create(op, { path: 'fa/dept', permission: 'admin', user_id: fa.id });
      const outside = await t.core.permissions.create(op, {
        path: 'fa/other',
        permission: 'full',
        user_id: member.id,
      });
      const p = await principalFor(t.core, fa.id);

      const inside = await t.core.permissions.create(p, {
        path: 'fa/dept/team',
        permission: 'full',
        user_id: member.id,
      });
      const onFolder = await t.core.permissions.create(p, {
        path: 'fa/dept',
        permission: 'readonly',
        user_id: member.id,
      });
      const denied = 'not-authorized/folder-admin-permission-required' as const;
      await expectError(
        t.core.permissions.create(p, { path: 'fa/other', permission: 'full', user_id: member.id }),
        denied,
      );
      await expectError(
        t.core.permissions.create(p, { path: 'fa/dept2', permission: 'full', user_id: member.id }),
        denied,
      );
      await expectError(
        t.core.permissions.create(p, { path: 'fa', permission: 'full', user_id: member.id }),
        denied,
      );
      await expectError(
        t.core.permissions.create(p, { path: '', permission: 'full', user_id: member.id }),
        denied,
      );

      await t.core.permissions.remove(p, inside.id);
      await t.core.permissions.remove(p, onFolder.id);
      await expectError(t.core.permissions.remove(p, outside.id), denied);
      const left = await dbOf(t.core).read((em) => em.findBy(PermissionEntity, { user_id: member.id }));
      expect(left.map((r) => r.path)).to.deep.equal(['fa/other']);
      // a Folder Admin is not a site admin
      await expectError(
        t.core.users.create(p, { username: unique('x'), password: PASSWORD }),
        'not-authorized/site-admin-required',
      );
    });

    it('refuses a plain user with folder-admin-permission-required, even with full on the folder', async () => {
      const u = await newUser();
      await t.core.permissions.create(op, { path: 'plain/full', permission: 'full', user_id: u.id });
      const p = await principalFor(t.core, u.id);
      await expectError(
        t.core.permissions.create(p, { path: 'plain/full/x', permission: 'full', user_id: u.id }),
        'not-authorized/folder-admin-permission-required',
      );
    });

    it('lists all rows to site admins and only their own and their groups’ rows to others', async () => {
      const g = await newGroup();
      const u = await newUser({ group_ids: String(g.id) });
      const other = await newUser();
      const own = await t.core.permissions.create(op, {
        path: 'list/own',
        permission: 'full',
        user_id: u.id,
      });
      const viaGroup = await t.core.permissions.create(op, {
        path: 'list/group',
        permission: 'readonly',
        group_id: g.id,
      });
      await t.core.permissions.create(op, { path: 'list/other', permission: 'full', user_id: other.id });
      const mine = await t.core.permissions.list(await principalFor(t.core, u.id), {});
      expect(mine.items.map((r) => r.id)).to.deep.equal([own.id, viaGroup.id]);
      const all = await t.core.permissions.list(op, { filter: { path: 'list/other' } });
      expect(all.items.map((r) => r.user_id)).to.deep.equal([other.id]);
    });

    it('reports not-found for a permission that does not exist', async () => {
      await expectError(t.core.permissions.remove(op, 999999), 'not-found/permission-not-found');
    });
  });

  describe('notifications', () => {
    it('lets a user subscribe and unsubscribe themselves, but not others', async () => {
      const u = await newUser();
      const other = await newUser();
      const p = await principalFor(t.core, u.id);
      const mine = await t.core.notifications.create(p, { path: 'reports' });
      expect(mine).to.include({ path: 'reports', user_id: u.id, username: u.username });
      await expectError(
        t.core.notifications.create(p, { path: 'reports', user_id: other.id }),
        'not-authorized/cant-act-for-other-user',
      );
      await expectError(
        t.core.notifications.create(p, { path: 'reports', username: other.username }),
        'not-authorized/cant-act-for-other-user',
      );
      const theirs = await t.core.notifications.create(op, { path: 'reports', user_id: other.id });
      // another user's subscription is invisible to a plain user: listing, and deleting (not-found)
      expect((await t.core.notifications.list(p, {})).items.map((n) => n.id)).to.deep.equal([mine.id]);
      await expectError(t.core.notifications.remove(p, theirs.id), 'not-found/notification-not-found');
      expect(await dbOf(t.core).read((em) => em.countBy(NotificationEntity, { id: theirs.id }))).to.equal(1);
      await t.core.notifications.remove(p, mine.id);
      expect(await dbOf(t.core).read((em) => em.countBy(NotificationEntity, { id: mine.id }))).to.equal(0);
    });

    it("lets a site admin manage anyone's, by user_id or username", async () => {
      const admin = await siteAdmin();
      const u = await newUser({ username: unique('Notified') });
      const byName = await t.core.notifications.create(admin, {
        path: 'a/b',
        username: u.username.toUpperCase(),
      });
      expect(byName).to.include({ user_id: u.id, username: u.username, path: 'a/b' });
      await expectModelError(t.core.notifications.create(admin, { path: 'a/b', user_id: u.id }), 'path');
      await expectModelError(t.core.notifications.create(admin, { path: 'a/../b', user_id: u.id }), 'path');
      await expectModelError(t.core.notifications.create(admin, { path: 'a', user_id: 999994 }), 'user_id');
      expect((await t.core.notifications.list(admin, {})).items.map((n) => n.id)).to.include(byName.id);
      await t.core.notifications.remove(admin, byName.id);
      expect(await dbOf(t.core).read((em) => em.countBy(NotificationEntity, { id: byName.id }))).to.equal(0);
    });
  });

  describe('API keys', () => {
    const sha256 = (s: string) => createHash('sha256').update(s).digest('hex');
    const keyRow = (id: number) => dbOf(t.core).read((em) => em.findOneByOrFail(ApiKeyEntity, { id }));

    it('is 64 hex characters, shown once; only its SHA-256 digest is stored', async () => {
      const u = await newUser();
      const created = await t.core.apiKeys.create(op, { user_id: u.id, name: 'ci' });
      expect(created.key).to.match(/^[0-9a-f]{64}$/);
      expect(created.user_id).to.equal(u.id);
      const row = await keyRow(created.id);
      expect(row.key_digest).to.equal(sha256(created.key!));
      for (const [column, value] of Object.entries(row)) {
        expect(String(value), column).to.not.include(created.key!);
      }
      const shown = await t.core.apiKeys.get(op, created.id);
      expect(shown).to.not.have.property('key');
      expect(JSON.stringify(shown)).to.not.include(created.key!);
    });

    it('authenticates a key as its owner, and refuses unknown and malformed keys', async () => {
      const u = await newUser();
      const { id, key } = await t.core.apiKeys.create(op, { user_id: u.id });
      const p = await t.core.authenticateApiKey(key!, 'restapi', '127.0.0.1');
      expect(p.user?.id).to.equal(u.id);
      expect(p.apiKey?.id).to.equal(id);
      expect(p.sessionDigest).to.equal(null);
      const invalid = 'not-authenticated/invalid-credentials' as const;
      await expectError(t.core.authenticateApiKey('0'.repeat(64), 'restapi', '127.0.0.1'), invalid);
      await expectError(t.core.authenticateApiKey(key!.toUpperCase(), 'restapi', '127.0.0.1'), invalid);
      await expectError(t.core.authenticateApiKey(`${key!}0`, 'restapi', '127.0.0.1'), invalid);
      await expectError(t.core.authenticateApiKey('', 'restapi', '127.0.0.1'), invalid);
    });

    it('stops a revoked key at once, even while it is in the credential cache', async () => {
      expect(t.config.accounts.credential_cache_seconds).to.be.greaterThan(0);
      const u = await newUser();
      const { id, key } = await t.core.apiKeys.create(op, { user_id: u.id });
      await t.core.authenticateApiKey(key!, 'restapi', '127.0.0.1');
      await t.core.apiKeys.remove(op, id);
      await expectError(
        t.core.authenticateApiKey(key!, 'restapi', '127.0.0.1'),
        'not-authenticated/invalid-credentials',
      );
    });

    it('does not let a request in flight during a revocation put the key back in the cache', async () => {
      const u = await newUser();
      const { id, key } = await t.core.apiKeys.create(op, { user_id: u.id });
      // The first use also writes last_use_at, so the lookup is still running when remove commits.
      const inFlight = t.core.authenticateApiKey(key!, 'restapi', '127.0.0.1');
      await t.core.apiKeys.remove(op, id);
      await inFlight.catch(() => undefined);
      await expectError(
        t.core.authenticateApiKey(key!, 'restapi', '127.0.0.1'),
        'not-authenticated/invalid-credentials',
      );
    });

    it('does not let a request in flight during a user change put the old user back in the cache', async () => {
      const u = await newUser();
      const { key } = await t.core.apiKeys.create(op, { user_id: u.id });
      const inFlight = t.core.authenticateApiKey(key!, 'restapi', '127.0.0.1');
      await t.core.users.update(op, u.id, { restapi_permission: false });
      await inFlight.catch(() => undefined);
      await expectError(
        t.core.authenticateApiKey(key!, 'restapi', '127.0.0.1'),
        'not-authenticated/invalid-credentials',
      );
    });

    it('applies a change to the owner at once, even while the key is in the credential cache', async () => {
      const u = await newUser();
      const { key } = await t.core.apiKeys.create(op, { user_id: u.id });
      expect((await t.core.authenticateApiKey(key!, 'restapi', '127.0.0.1')).user?.site_admin).to.equal(
        false,
      );
      await t.core.users.update(op, u.id, { site_admin: true });
      expect((await t.core.authenticateApiKey(key!, 'restapi', '127.0.0.1')).user?.site_admin).to.equal(true);
      await t.core.users.update(op, u.id, { allowed_ips: '10.0.0.0/8' });
      await expectError(
        t.core.authenticateApiKey(key!, 'restapi', '127.0.0.1'),
        'not-authenticated/invalid-credentials',
      );
    });

    it('refuses a key once it expires, even while it is in the credential cache', async () => {
      const u = await newUser();
      const { key } = await t.core.apiKeys.create(op, {
        user_id: u.id,
        expires_at: new Date(Date.now() + 400).toISOString(),
      });
      await t.core.authenticateApiKey(key!, 'restapi', '127.0.0.1');
      await new Promise((resolve) => setTimeout(resolve, 500));
      await expectError(
        t.core.authenticateApiKey(key!, 'restapi', '127.0.0.1'),
        'not-authenticated/invalid-credentials',
      );
    });

    it('never runs bcrypt to check a key', async () => {
      const u = await newUser();
      const { key } = await t.core.apiKeys.create(op, { user_id: u.id });
      const original = bcrypt.compare;
      let calls = 0;
      const spy = ((...args: Parameters<typeof original>) => {
        calls += 1;
        return (original as (...a: unknown[]) => unknown)(...args);
      }) as typeof original;
      bcrypt.compare = spy;
      try {
        // control: the spy sees the bcrypt check of a password login
        await t.core.gate.login({
          interface: 'restapi',
          ip: freshIp(),
          username: u.username,
          password: PASSWORD,
        });
        expect(calls, 'bcrypt.compare during a password login').to.be.greaterThan(0);
        calls = 0;
        await t.core.authenticateApiKey(key!, 'restapi', '127.0.0.1');
        await t.core.authenticateApiKey(key!, 'restapi', '127.0.0.1');
        await t.core.authenticateApiKey('f'.repeat(64), 'restapi', '127.0.0.1').catch(() => undefined);
        expect(calls, 'bcrypt.compare during authenticateApiKey').to.equal(0);
      } finally {
        bcrypt.compare = original;
      }
    });

    it('refuses the key of a user whose restapi_permission is off, without recording a login failure', async () => {
      const u = await newUser();
      const { key } = await t.core.apiKeys.create(op, { user_id: u.id });
      await t.core.authenticateApiKey(key!, 'restapi', '127.0.0.1');
      await t.core.users.update(op, u.id, { restapi_permission: false });
      await expectError(
        t.core.authenticateApiKey(key!, 'restapi', '127.0.0.1'),
        'not-authenticated/invalid-credentials',
      );
      expect(await actions(t.core, { user_id: u.id, action: 'failedlogin' })).to.deep.equal([]);
    });

    it('lets a user make keys for themselves but not for others; site admins for anyone', async () => {
      const u = await newUser();
      const other = await newUser();
      const p = await principalFor(t.core, u.id);
      const own = await t.core.apiKeys.create(p, {});
      expect(own.user_id).to.equal(u.id);
      await expectError(
        t.core.apiKeys.create(p, { user_id: other.id }),
        'not-authorized/user-id-without-site-admin',
      );
      await expectError(
        t.core.apiKeys.list(p, { user_id: other.id }),
        'not-authorized/cant-act-for-other-user',
      );
      expect((await t.core.apiKeys.list(p, {})).items.map((k) => k.id)).to.deep.equal([own.id]);
      const admin = await siteAdmin('restapi');
      expect((await t.core.apiKeys.create(admin, { user_id: other.id })).user_id).to.equal(other.id);
    });
    describe('with the clock moved (credential cache off)', () => {
      // Time travel: last_use_at and expires_at are compared with the clock, so these tests move
      // them in the database. The core cannot see such a change while the key sits in its
      // credential cache (it is what another instance's change looks like), so this core runs
      // without the cache.
      let k: TestCore;
      before(async () => {
        k = await openTestCore({ accounts: { credential_cache_seconds: 0 } });
      });
      after(async () => k.close());
      const makeKey = async (fields: Record<string, unknown> = {}) => {
        const u = await k.core.users.create(op, { username: unique('clock'), password: PASSWORD });
        return k.core.apiKeys.create(op, { user_id: u.id, ...fields });
      };
      const setKeyTimes = (id: number, times: { last_use_at?: Date; expires_at?: Date }) =>
        dbOf(k.core).work((em) => em.update(ApiKeyEntity, { id }, times));
      const lastUse = async (id: number) =>
        (await dbOf(k.core).read((em) => em.findOneByOrFail(ApiKeyEntity, { id }))).last_use_at;
      const use = (key: string) => k.core.authenticateApiKey(key, 'restapi', '127.0.0.1');

      it('sets last_use_at on first use and rewrites it at most once per 3 hours', async () => {
        const { id, key } = await makeKey();
        expect(await lastUse(id)).to.equal(null);
        const before = Date.now();
        await use(key!);
        expect((await lastUse(id))!.getTime()).to.be.within(before, Date.now());

        const twoHoursAgo = new Date(Date.now() - 2 * 3_600_000);
        await setKeyTimes(id, { last_use_at: twoHoursAgo });
        await use(key!);
        expect((await lastUse(id))!.getTime()).to.equal(twoHoursAgo.getTime());

        await setKeyTimes(id, { last_use_at: new Date(Date.now() - 4 * 3_600_000) });
        const at = Date.now();
        await use(key!);
        expect((await lastUse(id))!.getTime()).to.be.within(at, Date.now());
      });

      it('refuses an expired key', async () => {
        const { id, key } = await makeKey({ expires_at: new Date(Date.now() + 3_600_000).toISOString() });
        await use(key!);
        await setKeyTimes(id, { expires_at: new Date(Date.now() - 1000) });
        await expectError(use(key!), 'not-authenticated/invalid-credentials');
      });
    });
  });

  describe('sessions', () => {
    // Time travel: an idle timeout of hours is tested by moving last_active_at into the past.
    const idleFor = (minutes: number, sessionId: string) =>
      dbOf(t.core).work((em) =>
        em.update(
          SessionEntity,
          { id_digest: createHash('sha256').update(sessionId).digest('hex') },
          { last_active_at: new Date(Date.now() - minutes * 60_000) },
        ),
      );
    const open = async (username: string, ip = freshIp()) =>
      (await t.core.sessions.create({ interface: 'restapi', ip, username, password: PASSWORD })).id;

    it('a created session authenticates as its user until destroyed', async () => {
      const u = await newUser();
      const ip = freshIp();
      const id = await open(u.username, ip);
      expect(id).to.match(/^[0-9a-f]{64}$/);
      const p = await t.core.sessions.authenticate(id, 'restapi', ip);
      expect(p.user?.id).to.equal(u.id);
      expect(p.sessionDigest).to.be.a('string');
      // only a digest of the id is stored
      const stored = await dbOf(t.core).read((em) => em.findBy(SessionEntity, { user_id: u.id }));
      expect(stored).to.have.length(1);
      expect(stored[0]!.id_digest).to.not.equal(id);
      await t.core.sessions.destroy(id);
      await expectError(
        t.core.sessions.authenticate(id, 'restapi', ip),
        'not-authenticated/authentication-required',
      );
      // destroying an unknown or ended session is not an error (SPEC: always an empty array)
      await t.core.sessions.destroy(id);
      await t.core.sessions.destroy('nonsense');
    });

    it('refuses bad credentials without creating a session', async () => {
      const u = await newUser();
      await expectError(
        t.core.sessions.create({
          interface: 'restapi',
          ip: freshIp(),
          username: u.username,
          password: 'wrong-one',
        }),
        'not-authenticated/invalid-username-or-password',
      );
      expect(await dbOf(t.core).read((em) => em.countBy(SessionEntity, { user_id: u.id }))).to.equal(0);
      await expectError(
        t.core.sessions.authenticate('z'.repeat(64), 'restapi', '127.0.0.1'),
        'not-authenticated/authentication-required',
      );
    });

    it('expires after the idle timeout, and not before', async () => {
      const u = await newUser();
      const idle = t.config.sessions.idle_timeout_minutes;
      const id = await open(u.username);
      await idleFor(idle - 1, id);
      await t.core.sessions.authenticate(id, 'restapi', '127.0.0.1');
      await idleFor(idle + 1, id);
      await expectError(
        t.core.sessions.authenticate(id, 'restapi', '127.0.0.1'),
        'not-authenticated/authentication-required',
      );
    });

    it('stays alive while used: a request refreshes the idle clock', async () => {
      const u = await newUser();
      const idle = t.config.sessions.idle_timeout_minutes;
      const id = await open(u.username);
      await idleFor(idle - 1, id);
      await t.core.sessions.authenticate(id, 'restapi', '127.0.0.1');
      const row = await dbOf(t.core).read((em) =>
        em.findOneByOrFail(SessionEntity, { id_digest: createHash('sha256').update(id).digest('hex') }),
      );
      expect(Date.now() - row.last_active_at.getTime()).to.be.lessThan(60_000);
      // so two more idle minutes (idle + 1 in all since login) do not end it
      await idleFor(2, id);
      await t.core.sessions.authenticate(id, 'restapi', '127.0.0.1');
    });

    it('is refused once the user loses restapi_permission', async () => {
      const u = await newUser();
      const id = await open(u.username);
      await t.core.users.update(op, u.id, { restapi_permission: false });
      await expectError(
        t.core.sessions.authenticate(id, 'restapi', '127.0.0.1'),
        'not-authenticated/invalid-credentials',
      );
    });

    describe('reauthentication', () => {
      it('a session changing its password must send it again; a right header works', async () => {
        const u = await newUser();
        const id = await open(u.username);
        const p = await t.core.sessions.authenticate(id, 'restapi', '127.0.0.1');
        await expectError(
          t.core.users.update(p, u.id, { password: 'brand-new-password' }),
          'not-authorized/reauthentication-needed-action',
        );
        await expectError(
          t.core.users.update(p, u.id, { password: 'brand-new-password' }, PASSWORD),
          'bad-request/reauthentication-needed-fields',
        );
        await t.core.users.update(p, u.id, { password: 'brand-new-password' }, `password:${PASSWORD}`);
        await t.core.gate.login({
          interface: 'ftp',
          ip: freshIp(),
          username: u.username,
          password: 'brand-new-password',
        });
        await expectError(
          t.core.gate.login({ interface: 'ftp', ip: freshIp(), username: u.username, password: PASSWORD }),
          'not-authenticated/invalid-username-or-password',
        );
      });

      it('a wrong password fails; the last allowed wrong try ends the session', async () => {
        const attempts = t.config.sessions.reauthentication_attempts;
        expect(attempts).to.be.greaterThan(1);
        const u = await newUser();
        const id = await open(u.username);
        const p = await t.core.sessions.authenticate(id, 'restapi', '127.0.0.1');
        const change = () =>
          t.core.users.update(p, u.id, { password: 'never-applied-pw' }, 'password:wrong-guess');
        for (let i = 1; i < attempts; i++) {
          await expectError(change(), 'not-authorized/reauthentication-failed');
          await t.core.sessions.authenticate(id, 'restapi', '127.0.0.1');
        }
        await expectError(change(), 'not-authorized/reauthentication-failed-final');
        await expectError(
          t.core.sessions.authenticate(id, 'restapi', '127.0.0.1'),
          'not-authenticated/authentication-required',
        );
        // the password never changed
        await t.core.gate.login({
          interface: 'ftp',
          ip: freshIp(),
          username: u.username,
          password: PASSWORD,
        });
      });

      it('a session creating an API key must reauthenticate too', async () => {
        const u = await newUser();
        const p = await t.core.sessions.authenticate(await open(u.username), 'restapi', '127.0.0.1');
        await expectError(t.core.apiKeys.create(p, {}), 'not-authorized/reauthentication-needed-action');
        expect(await dbOf(t.core).read((em) => em.countBy(ApiKeyEntity, { user_id: u.id }))).to.equal(0);
        const made = await t.core.apiKeys.create(p, {}, `password:${PASSWORD}`);
        expect(made.key).to.match(/^[0-9a-f]{64}$/);
      });

      it('API-key principals need no header', async () => {
        const u = await newUser();
        const { key } = await t.core.apiKeys.create(op, { user_id: u.id });
        const p = await t.core.authenticateApiKey(key!, 'restapi', '127.0.0.1');
        await t.core.users.update(p, u.id, { password: 'changed-by-key' });
        await t.core.gate.login({
          interface: 'ftp',
          ip: freshIp(),
          username: u.username,
          password: 'changed-by-key',
        });
      });
    });
  });
});
