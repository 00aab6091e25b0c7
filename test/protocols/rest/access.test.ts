/**
 * SPEC "Access by endpoint" and "Users (site admin)": who may reach the account resources. A
 * regular user's key or session gets 403 `site-admin-required` on users and groups (and changes
 * nothing), site admins and the site-wide key get through, restricted keys do no administration.
 */
import { expect } from 'chai';
import { startTestGateway, type TestGateway } from '../../helpers/gateway.ts';
import {
  API,
  asList,
  createKey,
  createUser,
  expectError,
  keyAuth,
  login,
  parseXml,
  sessionAuth,
  unique,
} from './client.ts';

describe('REST access', () => {
  let gw: TestGateway;
  let site: Record<string, string>;
  let plain: { id: number; username: string; password: string };
  let other: { id: number; username: string; password: string };
  let groupId: number;
  /** the regular user's credentials, by how they were presented */
  let callers: Record<string, Record<string, string>>;
  /** a second site admin's credentials */
  let admins: Record<string, Record<string, string>>;

  before(async () => {
    gw = await startTestGateway();
    site = keyAuth(gw.siteKey);
    plain = await createUser(gw);
    other = await createUser(gw, { notes: 'untouched' });
    const admin = await createUser(gw, { site_admin: true });
    const g = await gw.request('POST', `${API}/groups`, {
      headers: site,
      body: { name: unique('group'), notes: 'untouched', user_ids: String(other.id) },
    });
    expect(g.status, g.text).to.equal(201);
    groupId = g.json.id;
    callers = {
      'user key': keyAuth((await createKey(gw, plain.id)).key),
      'user session': sessionAuth(await login(gw, plain.username, plain.password)),
    };
    admins = {
      'site-wide key': site,
      'site admin key': keyAuth((await createKey(gw, admin.id)).key),
      'site admin session': sessionAuth(await login(gw, admin.username, admin.password)),
      'bootstrap admin session': sessionAuth(await login(gw, 'admin', 'admin-password')),
    };
  });
  after(async () => gw.stop());

  const show = async (path: string) => {
    const r = await gw.request('GET', `${API}${path}`, { headers: site });
    expect(r.status, r.text).to.equal(200);
    return r.json;
  };

  describe('a regular user', () => {
    for (const how of ['user key', 'user session']) {
      describe(`by ${how}`, () => {
        const refused = async (method: string, path: string, body?: unknown) => {
          const r = await gw.request(method, `${API}${path}`, {
            headers: callers[how]!,
            ...(body === undefined ? {} : { body }),
          });
          expectError(r, 403, 'not-authorized/site-admin-required');
        };

        it('gets 403 site-admin-required listing, showing, creating, updating and deleting users', async () => {
          await refused('GET', '/users');
          await refused('GET', `/users/${other.id}`);
          const username = unique('sneaky');
          await refused('POST', '/users', { username, password: 'sneaky-password' });
          await refused('PUT', `/users/${other.id}`, { notes: 'changed' });
          await refused('DELETE', `/users/${other.id}`);
          const users = (await show('/users')) as { username: string }[];
          expect(users.map((u) => u.username)).to.not.include(username);
          expect((await show(`/users/${other.id}`)).notes).to.equal('untouched');
        });

        it('gets 403 site-admin-required listing, showing, creating, updating and deleting groups', async () => {
          await refused('GET', '/groups');
          await refused('GET', `/groups/${groupId}`);
          const name = unique('sneaky');
          await refused('POST', '/groups', { name });
          await refused('PUT', `/groups/${groupId}`, { notes: 'changed', user_ids: String(plain.id) });
          await refused('DELETE', `/groups/${groupId}`);
          const groups = (await show('/groups')) as { name: string }[];
          expect(groups.map((g) => g.name)).to.not.include(name);
          expect(await show(`/groups/${groupId}`)).to.include({
            notes: 'untouched',
            user_ids: String(other.id),
          });
        });

        it('reads their own user but not another', async () => {
          const own = await gw.request('GET', `${API}/users/${plain.id}`, { headers: callers[how]! });
          expect(own.status, own.text).to.equal(200);
          expect(own.json).to.include({ id: plain.id, username: plain.username });
          const r = await gw.request('GET', `${API}/users/${other.id}`, { headers: callers[how]! });
          expectError(r, 403, 'not-authorized/site-admin-required');
        });

        it('cannot make themself a site admin', async () => {
          const r = await gw.request('PUT', `${API}/users/${plain.id}`, {
            headers: callers[how]!,
            body: { site_admin: true },
          });
          expectError(r, 403, 'not-authorized/site-admin-required');
          expect((await show(`/users/${plain.id}`)).site_admin).to.equal(false);
        });

        it('gets 403 creating a permission', async () => {
          const r = await gw.request('POST', `${API}/permissions`, {
            headers: callers[how]!,
            body: { path: 'anything', permission: 'full', user_id: plain.id },
          });
          expect(r.status, r.text).to.equal(403);
          expect(r.json.type).to.match(/^not-authorized\//);
          const all = (await show(`/permissions`)) as { user_id: number; path: string }[];
          expect(all.some((p) => p.user_id === plain.id && p.path === 'anything')).to.equal(false);
        });
      });
    }
  });

  describe('site admins and the site-wide key', () => {
    const asAdmin = ['site-wide key', 'site admin key', 'site admin session', 'bootstrap admin session'];
    for (const how of asAdmin) {
      it(`${how}: lists, shows, creates, updates and deletes users and groups`, async () => {
        const h = admins[how]!;
        const call = (method: string, path: string, body?: unknown) =>
          gw.request(method, `${API}${path}`, { headers: h, ...(body === undefined ? {} : { body }) });

        const list = await call('GET', '/users');
        expect(list.status, list.text).to.equal(200);
        expect(list.json.map((u: { id: number }) => u.id)).to.include.members([plain.id, other.id]);
        expect((await call('GET', `/users/${other.id}`)).status).to.equal(200);
        const made = await call('POST', '/users', { username: unique('made'), password: 'made-password' });
        expect(made.status, made.text).to.equal(201);
        const put = await call('PUT', `/users/${made.json.id}`, { notes: 'by admin' });
        expect(put.status, put.text).to.equal(200);
        expect(put.json.notes).to.equal('by admin');
        const del = await call('DELETE', `/users/${made.json.id}`);
        expect(del.status, del.text).to.equal(200);
        expect(del.json).to.deep.equal([]);

        expect((await call('GET', '/groups')).status).to.equal(200);
        expect((await call('GET', `/groups/${groupId}`)).status).to.equal(200);
        const g = await call('POST', '/groups', { name: unique('g') });
        expect(g.status, g.text).to.equal(201);
        const gp = await call('PUT', `/groups/${g.json.id}`, { notes: 'by admin' });
        expect(gp.status, gp.text).to.equal(200);
        const gd = await call('DELETE', `/groups/${g.json.id}`);
        expect(gd.status, gd.text).to.equal(200);
        expect(gd.json).to.deep.equal([]);
      });
    }
  });

  it("revoking site_admin takes effect at once for that user's keys and sessions", async () => {
    const boss = await createUser(gw, { site_admin: true });
    const headers = [
      keyAuth((await createKey(gw, boss.id)).key),
      sessionAuth(await login(gw, boss.username, boss.password)),
    ];
    for (const h of headers)
      expect((await gw.request('GET', `${API}/users`, { headers: h })).status).to.equal(200);
    const put = await gw.request('PUT', `${API}/users/${boss.id}`, {
      headers: site,
      body: { site_admin: false },
    });
    expect(put.status, put.text).to.equal(200);
    for (const h of headers) {
      expectError(
        await gw.request('GET', `${API}/users`, { headers: h }),
        403,
        'not-authorized/site-admin-required',
      );
    }
  });

  describe('GET /permissions', () => {
    it("shows a regular user only their own and their groups' permissions; admins see all", async () => {
      const me = await createUser(gw);
      const someone = await createUser(gw);
      const mine = await gw.request('POST', `${API}/groups`, {
        headers: site,
        body: { name: unique('mine'), user_ids: String(me.id) },
      });
      const theirs = await gw.request('POST', `${API}/groups`, {
        headers: site,
        body: { name: unique('theirs'), user_ids: String(someone.id) },
      });
      const grant = async (body: Record<string, unknown>) => {
        const r = await gw.request('POST', `${API}/permissions`, { headers: site, body });
        expect(r.status, r.text).to.equal(201);
        return r.json.id as number;
      };
      const own = await grant({ path: 'perm/me', permission: 'full', user_id: me.id });
      const viaGroup = await grant({ path: 'perm/group', permission: 'readonly', group_id: mine.json.id });
      const notMine = await grant({ path: 'perm/someone', permission: 'full', user_id: someone.id });
      const notMyGroup = await grant({
        path: 'perm/other',
        permission: 'readonly',
        group_id: theirs.json.id,
      });

      for (const headers of [
        keyAuth((await createKey(gw, me.id)).key),
        sessionAuth(await login(gw, me.username, me.password)),
      ]) {
        const r = await gw.request('GET', `${API}/permissions`, { headers });
        expect(r.status, r.text).to.equal(200);
        expect(r.json.map((p: { id: number }) => p.id).sort()).to.deep.equal([own, viaGroup].sort());
      }
      const all = await gw.request('GET', `${API}/permissions`, { headers: admins['site admin session']! });
      expect(all.status, all.text).to.equal(200);
      expect(all.json.map((p: { id: number }) => p.id)).to.include.members([
        own,
        viaGroup,
        notMine,
        notMyGroup,
      ]);
    });
  });

  describe('restricted API keys', () => {
    it('a desktop_app key of a site admin gets 403 on admin endpoints', async () => {
      const admin = await createUser(gw, { site_admin: true });
      const { key } = await createKey(gw, admin.id, { permission_set: 'desktop_app' });
      const h = keyAuth(key);
      const name = unique('viadesktop');
      for (const [method, path, body] of [
        ['GET', '/users', undefined],
        ['GET', `/users/${other.id}`, undefined],
        ['POST', '/users', { username: name, password: 'desktop-password' }],
        ['PUT', `/users/${other.id}`, { notes: 'changed' }],
        ['DELETE', `/users/${other.id}`, undefined],
        ['GET', '/groups', undefined],
        ['POST', '/groups', { name }],
        ['DELETE', `/groups/${groupId}`, undefined],
        ['GET', '/permissions', undefined],
        ['POST', '/permissions', { path: 'x', permission: 'full', user_id: admin.id }],
        ['GET', '/api_keys', undefined],
        ['POST', '/api_keys', { user_id: admin.id }],
      ] as const) {
        const r = await gw.request(method, `${API}${path}`, {
          headers: h,
          ...(body === undefined ? {} : { body }),
        });
        expect(r.status, `${method} ${path}: ${r.text}`).to.equal(403);
        expect(r.json.type).to.match(/^not-authorized\//);
      }
      const users = (await show('/users')) as { username: string; id: number }[];
      expect(users.map((u) => u.username)).to.not.include(name);
      expect(users.map((u) => u.id)).to.include(other.id);
      expect((await show(`/users/${other.id}`)).notes).to.equal('untouched');
      // The key itself is still valid: GET /api_key is for any authenticated key.
      const me = await gw.request('GET', `${API}/api_key`, { headers: h });
      expect(me.status, me.text).to.equal(200);
      expect(me.json.permission_set).to.equal('desktop_app');
    });

    it('a desktop_app key of a regular user can neither read nor change its own user', async () => {
      const user = await createUser(gw, { name: 'Desk Top' });
      const { key } = await createKey(gw, user.id, { permission_set: 'desktop_app' });
      const get = await gw.request('GET', `${API}/users/${user.id}`, { headers: keyAuth(key) });
      expectError(get, 403, 'not-authorized/api-key-only-for-desktop-app');
      const put = await gw.request('PUT', `${API}/users/${user.id}`, {
        headers: keyAuth(key),
        body: { name: 'Changed', password: 'changed-by-desktop' },
      });
      expectError(put, 403, 'not-authorized/api-key-only-for-desktop-app');
      expect((await show(`/users/${user.id}`)).name).to.equal('Desk Top');
      const old = await gw.request('POST', `${API}/sessions`, {
        body: { username: user.username, password: user.password },
      });
      expect(old.status, old.text).to.equal(200);
    });
  });

  describe('admin page extensions', () => {
    const as = async (headers: Record<string, string>, method: string, path: string, body?: unknown) =>
      gw.request(method, `${API}${path}`, { headers, ...(body === undefined ? {} : { body }) });
    const grant = async (body: Record<string, unknown>) => {
      const r = await as(site, 'POST', '/permissions', body);
      expect(r.status, r.text).to.equal(201);
      return r.json.id as number;
    };

    it('GET /permissions/effective names the grant of each capability, for site and Folder Admins only', async () => {
      const member = await createUser(gw);
      const folderAdmin = await createUser(gw);
      const g = await as(site, 'POST', '/groups', { name: unique('eff'), user_ids: String(member.id) });
      const viaGroup = await grant({ path: 'rest-eff/team', permission: 'readonly', group_id: g.json.id });
      await grant({ path: 'rest-eff/team', permission: 'admin', user_id: folderAdmin.id });
      const expected = (caps: string[]) =>
        ['list', 'read', 'write', 'delete', 'admin'].map((c) => ({
          capability: c,
          allowed: caps.includes(c),
          grants: caps.includes(c)
            ? [
                {
                  via: 'group',
                  permission_id: viaGroup,
                  path: 'rest-eff/team',
                  permission: 'readonly',
                  group_id: g.json.id,
                  group_name: g.json.name,
                },
              ]
            : [],
        }));
      const q = `/permissions/effective?user_id=${member.id}&path=rest-eff/team/sub`;
      const fa = sessionAuth(await login(gw, folderAdmin.username, folderAdmin.password));
      for (const headers of [admins['site admin session']!, fa]) {
        const r = await as(headers, 'GET', q);
        expect(r.status, r.text).to.equal(200);
        expect(r.json).to.deep.equal({
          user_id: member.id,
          username: member.username,
          path: 'rest-eff/team/sub',
          site_admin: false,
          capabilities: expected(['list', 'read']),
        });
      }
      const xml = await as(site, 'GET', q.replace('effective?', 'effective.xml?'));
      expect(xml.status, xml.text).to.equal(200);
      const doc = parseXml(xml.text)['effective-rights'];
      expect(
        asList(doc.capabilities.capability).map((c: { capability: string }) => c.capability),
      ).to.deep.equal(['list', 'read', 'write', 'delete', 'admin']);
      const outside = await as(fa, 'GET', `/permissions/effective?user_id=${member.id}&path=rest-eff`);
      expectError(outside, 403, 'not-authorized/folder-admin-permission-required');
      expect(outside.json.error).to.equal('You need admin permission on /rest-eff to do this');
      expectError(
        await as(callers['user session']!, 'GET', q),
        403,
        'not-authorized/folder-admin-permission-required',
      );
      expectError(
        await as(site, 'GET', '/permissions/effective?username=nobody-by-this-name&path=x'),
        404,
        'not-found/user-not-found',
      );
    });

    it('a Folder Admin lists every permission in their folder, not beside it', async () => {
      const folderAdmin = await createUser(gw);
      const someone = await createUser(gw);
      const adminRow = await grant({ path: 'rest-fa/dept', permission: 'admin', user_id: folderAdmin.id });
      const inside = await grant({ path: 'rest-fa/dept/in', permission: 'full', user_id: someone.id });
      const beside = await grant({ path: 'rest-fa/dept-2', permission: 'full', user_id: someone.id });
      const above = await grant({ path: 'rest-fa', permission: 'readonly', user_id: someone.id });
      const fa = keyAuth((await createKey(gw, folderAdmin.id)).key);
      const ids = async (query: string) => {
        const r = await as(fa, 'GET', `/permissions${query}`);
        expect(r.status, r.text).to.equal(200);
        return r.json.map((p: { id: number }) => p.id).sort((x: number, y: number) => x - y);
      };
      const all = await ids('');
      expect(all).to.include.members([adminRow, inside]);
      expect(all).not.to.include.members([beside]);
      expect(all).not.to.include.members([above]);
      expect(await ids('?filter[applies_to]=rest-fa/dept/in/deeper')).to.deep.equal([adminRow, inside]);
      const refused = await as(fa, 'POST', '/permissions', {
        path: 'rest-fa/dept-2',
        permission: 'readonly',
        user_id: someone.id,
      });
      expectError(refused, 403, 'not-authorized/folder-admin-permission-required');
      expectError(
        await as(fa, 'DELETE', `/permissions/${beside}`),
        403,
        'not-authorized/folder-admin-permission-required',
      );
    });

    it('/groups/:id/members adds by username, pages with names, removes one, for site admins only', async () => {
      const a = await createUser(gw, { name: 'Ann Member' });
      const b = await createUser(gw);
      const g = await as(site, 'POST', '/groups', { name: unique('members'), user_ids: String(b.id) });
      const members = `/groups/${g.json.id}/members`;
      const added = await as(site, 'POST', members, { username: a.username.toUpperCase() });
      expect(added.status, added.text).to.equal(201);
      expect(added.json).to.deep.equal({ user_id: a.id, username: a.username, name: 'Ann Member' });
      const again = await as(site, 'POST', members, { user_id: a.id });
      expectError(again, 422, 'processing-failure/model-save-error');
      expect(again.json.error).to.contain('is already a member');
      expectError(
        await as(site, 'POST', members, { username: 'nobody-at-all' }),
        422,
        'processing-failure/model-save-error',
      );
      const first = await as(site, 'GET', `${members}?per_page=1`);
      expect(first.status, first.text).to.equal(200);
      expect(first.json.map((m: { user_id: number }) => m.user_id)).to.deep.equal([Math.min(a.id, b.id)]);
      const cursor = first.headers['x-svc-cursor-next'] as string;
      const second = await as(site, 'GET', `${members}?per_page=1&cursor=${encodeURIComponent(cursor)}`);
      expect(second.json.map((m: { user_id: number }) => m.user_id)).to.deep.equal([Math.max(a.id, b.id)]);
      expect((await show(`/groups/${g.json.id}`)).user_ids).to.equal(
        [a.id, b.id].sort((x, y) => x - y).join(','),
      );
      expectError(
        await as(callers['user key']!, 'POST', members, { user_id: a.id }),
        403,
        'not-authorized/site-admin-required',
      );
      expectError(await as(callers['user key']!, 'GET', members), 403, 'not-authorized/site-admin-required');
      const removed = await as(admins['site admin session']!, 'DELETE', `${members}/${b.id}`);
      expect(removed.status, removed.text).to.equal(200);
      expect((await show(`/groups/${g.json.id}`)).user_ids).to.equal(String(a.id));
      expectError(await as(site, 'DELETE', `${members}/${b.id}`), 404, 'not-found/user-not-found');
      expectError(await as(site, 'GET', '/groups/999999999/members'), 404, 'not-found/group-not-found');
    });
  });
});
