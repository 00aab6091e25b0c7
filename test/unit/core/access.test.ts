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
