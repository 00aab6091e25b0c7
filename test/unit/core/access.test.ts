import { expect } from 'chai';
import { operatorPrincipal, type Principal } from '../../../src/core/index.ts';
import { requireCapability, rightsOn, type Capability } from '../../../src/core/access/rights.ts';
import type { ErrorType } from '../../../src/core/errors.ts';
import { PermissionEntity, type PermissionLevel } from '../../../src/db/entities.ts';
import { dbKind, openTestCore, type TestCore } from '../../helpers/gateway.ts';
import { expectError, principalFor, unique } from './fixtures.ts';
import { dbOf } from '../../helpers/internals.ts';

const ALL: Capability[] = ['list', 'read', 'write', 'delete', 'admin'];

// DESIGN.md "Permissions": what each level allows. `admin` (Folder Admin) is full plus admin.
const matrix: Record<PermissionLevel, Capability[]> = {
  full: ['list', 'read', 'write', 'delete'],
  readonly: ['list', 'read'],
  writeonly: ['write'],
  previewonly: ['list'],
  admin: ['list', 'read', 'write', 'delete', 'admin'],
};

// The SPEC error type a missing capability is reported with.
const refusal: Record<Capability, ErrorType> = {
  list: 'not-authorized/read-permission-required',
  read: 'not-authorized/read-permission-required',
  write: 'not-authorized/write-permission-required',
  delete: 'not-authorized/full-permission-required',
  admin: 'not-authorized/folder-admin-permission-required',
};

describe(`core access: permission matrix (${dbKind})`, () => {
  let t: TestCore;
  const op = operatorPrincipal();
  before(async () => {
    t = await openTestCore();
  });
  after(async () => t.close());

  const rights = async (p: Principal, path: string) =>
    [...(await dbOf(t.core).read((em) => rightsOn(em, p, path)))].sort();
  const require = (p: Principal, cap: Capability, path: string) =>
    dbOf(t.core).read((em) => requireCapability(em, p, cap, path));
  const newUser = async (fields: Record<string, unknown> = {}) =>
    t.core.users.create(op, { username: unique('u'), password: 'password-1', ...fields });
  const grant = (fields: Record<string, unknown>) => t.core.permissions.create(op, fields);
  const sorted = (caps: readonly Capability[]) => [...caps].sort();

  for (const [level, allowed] of Object.entries(matrix) as [PermissionLevel, Capability[]][]) {
    it(`${level}: allows exactly ${allowed.join(', ')} and refuses the rest with SPEC's types`, async () => {
      const user = await newUser();
      await grant({ path: `m/${level}`, permission: level, user_id: user.id });
      const p = await principalFor(t.core, user.id);
      expect(await rights(p, `m/${level}`)).to.deep.equal(sorted(allowed));
      for (const cap of ALL) {
        if (allowed.includes(cap)) await require(p, cap, `m/${level}/file.txt`);
        else await expectError(require(p, cap, `m/${level}/file.txt`), refusal[cap]);
      }
    });
  }

  it('applies a permission to its folder and everything below, not to siblings sharing a prefix or parents', async () => {
    const user = await newUser();
    await grant({ path: 'inh/a', permission: 'full', user_id: user.id });
    const p = await principalFor(t.core, user.id);
    const full = sorted(matrix.full);
    expect(await rights(p, 'inh/a')).to.deep.equal(full);
    expect(await rights(p, 'inh/a/b')).to.deep.equal(full);
    expect(await rights(p, 'inh/a/b/c')).to.deep.equal(full);
    expect(await rights(p, 'inh/ab')).to.deep.equal([]);
    expect(await rights(p, 'inh/ab/c')).to.deep.equal([]);
    expect(await rights(p, 'inh')).to.deep.equal([]);
    expect(await rights(p, '')).to.deep.equal([]);
    await expectError(require(p, 'read', 'inh'), 'not-authorized/read-permission-required');
    await expectError(require(p, 'write', 'inh/ab'), 'not-authorized/write-permission-required');
  });

  it('gives a permission on the site root to every path', async () => {
    const user = await newUser();
    await grant({ path: '', permission: 'readonly', user_id: user.id });
    const p = await principalFor(t.core, user.id);
    expect(await rights(p, '')).to.deep.equal(['list', 'read']);
    expect(await rights(p, 'any/where/deep')).to.deep.equal(['list', 'read']);
  });

  it("unites the user's own and their groups' permissions, on the path and its ancestors", async () => {
    const user = await newUser();
    const group = await t.core.groups.create(op, { name: unique('g'), user_ids: String(user.id) });
    await grant({ path: 'union', permission: 'previewonly', user_id: user.id });
    await grant({ path: 'union/x', permission: 'writeonly', group_id: group.id });
    await grant({ path: 'union/x/y', permission: 'readonly', group_id: group.id });
    const p = await principalFor(t.core, user.id);
    expect(await rights(p, 'union')).to.deep.equal(['list']);
    expect(await rights(p, 'union/x')).to.deep.equal(['list', 'write']);
    expect(await rights(p, 'union/x/y/z')).to.deep.equal(['list', 'read', 'write']);
    // another member of no group sees none of the group's rights
    const other = await newUser();
    expect(await rights(await principalFor(t.core, other.id), 'union/x/y')).to.deep.equal([]);
  });

  it("does not give one user's permission to another user", async () => {
    const owner = await newUser();
    const stranger = await newUser();
    await grant({ path: 'mine', permission: 'full', user_id: owner.id });
    const p = await principalFor(t.core, stranger.id);
    expect(await rights(p, 'mine')).to.deep.equal([]);
    await expectError(require(p, 'list', 'mine'), 'not-authorized/read-permission-required');
  });

  it('lets a site admin do everything everywhere, with no permission rows', async () => {
    const admin = await newUser({ site_admin: true });
    const p = await principalFor(t.core, admin.id);
    expect(await rights(p, '')).to.deep.equal(sorted(ALL));
    expect(await rights(p, 'nobody/granted/this')).to.deep.equal(sorted(ALL));
    for (const cap of ALL) await require(p, cap, 'nobody/granted/this');
  });

  it('lets a site-wide API key do everything everywhere', async () => {
    const { key } = await t.core.apiKeys.createSiteWide('access tests');
    const p = await t.core.authenticateApiKey(key!, 'restapi', '127.0.0.1');
    expect(p.user).to.equal(null);
    expect(await rights(p, 'x/y')).to.deep.equal(sorted(ALL));
    for (const cap of ALL) await require(p, cap, 'x/y');
  });

  it('gives a user with no permissions nothing, not even on the root', async () => {
    const user = await newUser();
    const p = await principalFor(t.core, user.id);
    expect(await rights(p, '')).to.deep.equal([]);
    expect(await rights(p, 'a/b')).to.deep.equal([]);
    for (const cap of ALL) await expectError(require(p, cap, 'a/b'), refusal[cap]);
  });

  it("takes a group's rights away when the user leaves the group (from either side)", async () => {
    const user = await newUser();
    const group = await t.core.groups.create(op, { name: unique('g'), user_ids: [user.id] });
    await grant({ path: 'team', permission: 'full', group_id: group.id });
    const p = await principalFor(t.core, user.id);
    expect(await rights(p, 'team/doc')).to.deep.equal(sorted(matrix.full));

    await t.core.users.update(op, user.id, { group_ids: '' });
    expect(await rights(p, 'team/doc')).to.deep.equal([]);
    await expectError(require(p, 'read', 'team/doc'), 'not-authorized/read-permission-required');

    await t.core.users.update(op, user.id, { group_ids: String(group.id) });
    expect(await rights(p, 'team/doc')).to.deep.equal(sorted(matrix.full));
    await t.core.groups.update(op, group.id, { user_ids: '' });
    expect(await rights(p, 'team/doc')).to.deep.equal([]);
  });

  it('takes the rights away when the permission is deleted', async () => {
    const user = await newUser();
    const perm = await grant({ path: 'gone', permission: 'full', user_id: user.id });
    const p = await principalFor(t.core, user.id);
    expect(await rights(p, 'gone')).to.not.be.empty;
    await t.core.permissions.remove(op, perm.id);
    expect(await rights(p, 'gone')).to.deep.equal([]);
  });

  describe('grant_permission on user_root', () => {
    const cases: [string, PermissionLevel[], Capability[]][] = [
      ['full', ['full'], ['delete', 'list', 'read', 'write']],
      ['read', ['readonly'], ['list', 'read']],
      ['write', ['writeonly'], ['write']],
      ['preview', ['previewonly'], ['list']],
      ['read+write', ['readonly', 'writeonly'], ['list', 'read', 'write']],
      ['preview+write', ['previewonly', 'writeonly'], ['list', 'write']],
    ];
    for (const [grantPermission, levels, caps] of cases) {
      it(`${grantPermission} creates ${levels.join(' + ')} on user_root`, async () => {
        const root = unique('home/r');
        const user = await newUser({ user_root: `${root}/`, grant_permission: grantPermission });
        expect(user).to.not.have.property('grant_permission');
        const rows = await dbOf(t.core).read((em) =>
          em.find(PermissionEntity, { where: { user_id: user.id }, order: { permission: 'ASC' } }),
        );
        expect(rows.map((r) => [r.path, r.permission, r.group_id])).to.deep.equal(
          [...levels].sort().map((l) => [root, l, null]),
        );
        const p = await principalFor(t.core, user.id);
        expect(await rights(p, `${root}/sub`)).to.deep.equal(caps);
        expect(await rights(p, 'home')).to.deep.equal([]);
      });
    }

    it('grants on the new user_root when both change in one update, without duplicating rows', async () => {
      const user = await newUser({ user_root: 'g1/', grant_permission: 'read' });
      await t.core.users.update(op, user.id, { user_root: 'g2/', grant_permission: 'read+write' });
      await t.core.users.update(op, user.id, { grant_permission: 'read' });
      const rows = await dbOf(t.core).read((em) =>
        em.find(PermissionEntity, { where: { user_id: user.id }, order: { path: 'ASC', permission: 'ASC' } }),
      );
      expect(rows.map((r) => `${r.path}:${r.permission}`)).to.deep.equal([
        'g1:readonly',
        'g2:readonly',
        'g2:writeonly',
      ]);
    });

    it('refuses an unknown grant_permission value', async () => {
      const username = unique('u');
      const err = await expectError(
        t.core.users.create(op, { username, password: 'password-1', grant_permission: 'everything' }),
        'processing-failure/model-save-error',
      );
      expect(err.model!.model_errors).to.have.property('grant_permission');
    });
  });
});

describe(`core access: effective rights and the Folder Admin's view (${dbKind})`, () => {
  let t: TestCore;
  const op = operatorPrincipal();
  before(async () => {
    t = await openTestCore();
  });
  after(async () => t.close());

  const newUser = async (fields: Record<string, unknown> = {}) =>
    t.core.users.create(op, { username: unique('u'), password: 'password-1', ...fields });
  const grant = (fields: Record<string, unknown>) => t.core.permissions.create(op, fields);
  /** each capability with the grants giving it, as "path:level via", "-" when refused */
  const explain = async (p: Principal, query: Record<string, unknown>) => {
    const e = await t.core.permissions.effective(p, query);
    return Object.fromEntries(
      e.capabilities.map((c) => [
        c.capability,
        c.allowed
          ? c.grants
              .map((g) =>
                g.via === 'site_admin' ? 'site admin' : `${g.path}:${g.permission} ${g.group_name ?? 'own'}`,
              )
              .join(', ')
          : '-',
      ]),
    );
  };

  it("names the grant of each capability: the user's own row, a group's, on the path or an ancestor", async () => {
    const user = await newUser();
    const group = await t.core.groups.create(op, { name: unique('eff'), user_ids: String(user.id) });
    await grant({ path: 'eff', permission: 'readonly', user_id: user.id });
    await grant({ path: 'eff/team', permission: 'writeonly', group_id: group.id });
    await grant({ path: 'eff/other', permission: 'full', group_id: group.id });
    const e = await t.core.permissions.effective(op, { user_id: user.id, path: '/eff/team/deep/' });
    expect(e).to.include({
      user_id: user.id,
      username: user.username,
      path: 'eff/team/deep',
      site_admin: false,
    });
    expect(await explain(op, { username: user.username.toUpperCase(), path: 'eff/team/deep' })).to.deep.equal(
      {
        list: 'eff:readonly own',
        read: 'eff:readonly own',
        write: `eff/team:writeonly ${group.name}`,
        delete: '-',
        admin: '-',
      },
    );
    // The same rows the checks use: what it allows is exactly what rightsOn gives.
    const p = await principalFor(t.core, user.id);
    const caps = [...(await dbOf(t.core).read((em) => rightsOn(em, p, 'eff/team/deep')))].sort();
    expect(
      e.capabilities
        .filter((c) => c.allowed)
        .map((c) => c.capability)
        .sort(),
    ).to.deep.equal(caps);
  });

  it('answers site admin for every capability of a site admin, and nothing for a user without rows', async () => {
    const admin = await newUser({ site_admin: true });
    const nobody = await newUser();
    const all = {
      list: 'site admin',
      read: 'site admin',
      write: 'site admin',
      delete: 'site admin',
      admin: 'site admin',
    };
    expect(await explain(op, { user_id: admin.id, path: 'any/where' })).to.deep.equal(all);
    const none = { list: '-', read: '-', write: '-', delete: '-', admin: '-' };
    expect(await explain(op, { user_id: nobody.id, path: 'any/where' })).to.deep.equal(none);
    expect(await explain(op, { user_id: nobody.id })).to.deep.equal(none);
  });

  it('lets a Folder Admin ask inside their folders only, and refuses plain users and unknown users in words', async () => {
    const folderAdmin = await newUser();
    const member = await newUser();
    await grant({ path: 'fa/mine', permission: 'admin', user_id: folderAdmin.id });
    await grant({ path: 'fa', permission: 'full', user_id: member.id });
    const p = await principalFor(t.core, folderAdmin.id);
    expect((await explain(p, { user_id: member.id, path: 'fa/mine/x' })).delete).to.equal('fa:full own');
    const outside = await expectError(
      t.core.permissions.effective(p, { user_id: member.id, path: 'fa' }),
      'not-authorized/folder-admin-permission-required',
    );
    expect(outside.message).to.equal('You need admin permission on /fa to do this');
    await expectError(
      t.core.permissions.effective(await principalFor(t.core, member.id), {
        user_id: folderAdmin.id,
        path: 'fa',
      }),
      'not-authorized/folder-admin-permission-required',
    );
    const unknown = await expectError(
      t.core.permissions.effective(op, { username: 'no-such-user-here', path: 'fa' }),
      'not-found/user-not-found',
    );
    expect(unknown.message).to.contain('no-such-user-here');
    await expectError(
      t.core.permissions.effective(op, { path: 'fa' }),
      'processing-failure/model-save-error',
    );
  });

  it('shows a Folder Admin every row on or below their folders, besides their own and their groups', async () => {
    const folderAdmin = await newUser();
    const a = await newUser();
    const b = await newUser();
    const group = await t.core.groups.create(op, { name: unique('fa'), user_ids: String(folderAdmin.id) });
    const adminRow = await grant({ path: 'scope/dept', permission: 'admin', group_id: group.id });
    const on = await grant({ path: 'scope/dept', permission: 'readonly', user_id: a.id });
    const below = await grant({ path: 'scope/dept/x/y', permission: 'full', user_id: b.id });
    const sibling = await grant({ path: 'scope/dept2', permission: 'full', user_id: a.id });
    const above = await grant({ path: 'scope', permission: 'full', user_id: b.id });
    const own = await grant({ path: 'elsewhere', permission: 'readonly', user_id: folderAdmin.id });
    const p = await principalFor(t.core, folderAdmin.id);
    const ids = async (filter?: Record<string, string>) =>
      (await t.core.permissions.list(p, { per_page: 1000, ...(filter ? { filter } : {}) })).items
        .map((r) => r.id)
        .sort((x, y) => x - y);
    expect(await ids()).to.deep.equal([adminRow.id, on.id, below.id, own.id].sort((x, y) => x - y));
    expect(await ids({ path: 'scope/dept2' })).to.deep.equal([]);
    expect(await ids({ path: 'scope/dept/x/y' })).to.deep.equal([below.id]);
    // applies_to: the rows that count on a path, on it and its ancestors, within what one may see
    expect(await ids({ applies_to: 'scope/dept/x/y/z' })).to.deep.equal(
      [adminRow.id, on.id, below.id].sort((x, y) => x - y),
    );
    const adminView = (await t.core.permissions.list(op, { filter: { applies_to: 'scope/dept/x' } })).items;
    expect(adminView.map((r) => r.id).sort((x, y) => x - y)).to.deep.equal(
      [above.id, adminRow.id, on.id].sort((x, y) => x - y),
    );
    expect(adminView.map((r) => r.id)).not.to.include(sibling.id);
    // A plain user still sees only their own rows.
    const plain = (await t.core.permissions.list(await principalFor(t.core, a.id), {})).items;
    expect(plain.map((r) => r.id).sort((x, y) => x - y)).to.deep.equal([on.id, sibling.id]);
  });

  it('refuses a Folder Admin granting or revoking outside their folders, and allows it inside', async () => {
    const folderAdmin = await newUser();
    const someone = await newUser();
    await grant({ path: 'fb/mine', permission: 'admin', user_id: folderAdmin.id });
    const outsideRow = await grant({ path: 'fb/theirs', permission: 'readonly', user_id: someone.id });
    const p = await principalFor(t.core, folderAdmin.id);
    const inside = await t.core.permissions.create(p, {
      path: 'fb/mine/sub',
      permission: 'full',
      username: someone.username,
    });
    await t.core.permissions.remove(p, inside.id);
    // A Folder Admin cannot list groups; they name one (our extension group_name).
    const group = await t.core.groups.create(op, { name: unique('by name') });
    const byName = await t.core.permissions.create(p, {
      path: 'fb/mine',
      permission: 'readonly',
      group_name: group.name,
    });
    expect(byName).to.include({ group_id: group.id, group_name: group.name, user_id: null });
    const unknown = await expectError(
      t.core.permissions.create(p, { path: 'fb/mine', permission: 'readonly', group_name: 'no such group' }),
      'processing-failure/model-save-error',
    );
    expect(unknown.model!.model_errors).to.have.property('group_name');
    await expectError(
      t.core.permissions.create(p, { path: 'fb/theirs', permission: 'full', user_id: someone.id }),
      'not-authorized/folder-admin-permission-required',
    );
    await expectError(
      t.core.permissions.remove(p, outsideRow.id),
      'not-authorized/folder-admin-permission-required',
    );
  });
});
