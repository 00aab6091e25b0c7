/**
 * SPEC "Resources and their fields" and "Endpoints": CRUD of users, groups, permissions,
 * notifications and API keys over real HTTPS, with SPEC's status codes (201 on create, 200
 * otherwise, DELETE → 200 []), fields as SPEC writes them, partial updates, reauthentication, and
 * SPEC's rules for the path fields (user_root, permission and notification path).
 */
import { expect } from 'chai';
import { startTestGateway, type Response, type TestGateway } from '../../helpers/gateway.ts';
import { API, createKey, createUser, expectError, keyAuth, login, sessionAuth, unique } from './client.ts';

const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;

describe('REST resources', () => {
  let gw: TestGateway;
  let site: Record<string, string>;
  before(async () => {
    gw = await startTestGateway();
    site = keyAuth(gw.siteKey);
  });
  after(async () => gw.stop());

  const call = (method: string, path: string, body?: unknown, headers?: Record<string, string>) =>
    gw.request(method, `${API}${path}`, {
      headers: headers ?? site,
      ...(body === undefined ? {} : { body }),
    });
  const ok = async (method: string, path: string, body?: unknown, headers?: Record<string, string>) => {
    const r = await call(method, path, body, headers);
    expect(r.status, `${method} ${path}: ${r.text}`).to.equal(method === 'POST' ? 201 : 200);
    expect(r.headers['content-type']).to.match(/^application\/json/);
    return r.json;
  };
  const canLogin = async (username: string, password: string) =>
    (await gw.request('POST', `${API}/sessions`, { body: { username, password } })).status === 200;
  const idsOf = (s: string) =>
    s === ''
      ? []
      : s
          .split(',')
          .map(Number)
          .sort((a, b) => a - b);

  describe('users', () => {
    it('POST answers 201 with every SPEC field, defaults applied, and no password', async () => {
      const username = unique('alice');
      const u = await ok('POST', '/users', { username, password: 'alice-password-1' });
      expect(u.id).to.be.a('number');
      expect(Number.isInteger(u.id)).to.equal(true);
      expect(u).to.include({
        username,
        name: '',
        email: '',
        notes: '',
        group_ids: '',
        ftp_permission: true,
        web_permission: true,
        attachments_permission: false,
        self_managed: true,
        require_password_change: false,
        allowed_ips: '',
        user_root: '',
        last_login_at: null,
      });
      expect(u.created_at).to.match(ISO);
      for (const hidden of ['password', 'password_hash', 'grant_permission'])
        expect(u, hidden).to.not.have.property(hidden);
      expect(JSON.stringify(u)).to.not.include('alice-password-1');
      expect(await canLogin(username, 'alice-password-1')).to.equal(true);
    });

    it('POST keeps every field given; GET /users/:id and GET /users show the same user', async () => {
      const username = unique('bob');
      const body = {
        username,
        password: 'bob-password-12',
        name: 'Bob Builder',
        email: 'bob@example.com',
        notes: 'line one\nline two',
        ftp_permission: false,
        web_permission: true,
        attachments_permission: true,
        self_managed: false,
        require_password_change: true,
        allowed_ips: '10.0.0.0/8\n192.168.1.7',
        user_root: 'homes/bob/',
      };
      const created = await ok('POST', '/users', body);
      const { password: _password, ...visible } = body;
      expect(created).to.include(visible);
      const shown = await ok('GET', `/users/${created.id}`);
      expect(shown).to.deep.equal(created);
      const list = (await ok('GET', '/users')) as { id: number }[];
      expect(list.find((x) => x.id === created.id)).to.deep.equal(created);
    });

    it('PUT changes only the fields given', async () => {
      const u = await createUser(gw, {
        name: 'Carol',
        email: 'carol@example.com',
        notes: 'keep me',
        ftp_permission: false,
        allowed_ips: '127.0.0.1',
        user_root: 'homes/carol/',
      });
      const before = await ok('GET', `/users/${u.id}`);
      const after = await ok('PUT', `/users/${u.id}`, { name: 'Carol Changed' });
      expect(after).to.deep.equal({ ...before, name: 'Carol Changed' });
      const again = await ok('PUT', `/users/${u.id}`, { ftp_permission: true, notes: '' });
      expect(again).to.deep.equal({ ...before, name: 'Carol Changed', ftp_permission: true, notes: '' });
      expect(await ok('GET', `/users/${u.id}`)).to.deep.equal(again);
      expect(await canLogin(u.username, u.password)).to.equal(true);
    });

    it('PUT with a password changes it (site-wide key, no reauthentication)', async () => {
      const u = await createUser(gw);
      const r = await ok('PUT', `/users/${u.id}`, { password: 'a-new-password-9' });
      expect(r).to.not.have.property('password');
      expect(await canLogin(u.username, 'a-new-password-9')).to.equal(true);
      expect(await canLogin(u.username, u.password)).to.equal(false);
    });

    it('DELETE answers 200 [] and the user is gone', async () => {
      const u = await createUser(gw);
      const { key } = await createKey(gw, u.id);
      const sid = await login(gw, u.username, u.password);
      expect((await call('GET', '/api_key', undefined, keyAuth(key))).status).to.equal(200);
      expect(await ok('DELETE', `/users/${u.id}`)).to.deep.equal([]);
      expect((await call('GET', `/users/${u.id}`, undefined, sessionAuth(sid))).status).to.equal(401);
      expectError(await call('GET', `/users/${u.id}`), 404, 'not-found/user-not-found');
      expectError(await call('DELETE', `/users/${u.id}`), 404, 'not-found/user-not-found');
      expectError(await call('PUT', `/users/${u.id}`, { name: 'x' }), 404, 'not-found/user-not-found');
      const list = (await ok('GET', '/users')) as { id: number }[];
      expect(list.map((x) => x.id)).to.not.include(u.id);
      expect(await canLogin(u.username, u.password)).to.equal(false);
      expect((await call('GET', '/api_key', undefined, keyAuth(key))).status).to.equal(401);
    });

    it('grant_permission creates permissions on user_root, visible in GET /permissions, never returned', async () => {
      const u = await ok('POST', '/users', {
        username: unique('granted'),
        password: 'granted-password',
        user_root: 'homes/granted/',
        grant_permission: 'read+write',
      });
      expect(u).to.not.have.property('grant_permission');
      const perms = (await ok('GET', '/permissions')) as {
        user_id: number;
        path: string;
        permission: string;
      }[];
      const mine = perms.filter((p) => p.user_id === u.id);
      expect(mine.map((p) => [p.path, p.permission]).sort()).to.deep.equal([
        ['homes/granted', 'readonly'],
        ['homes/granted', 'writeonly'],
      ]);
      const shown = await ok('GET', `/users/${u.id}`);
      expect(shown).to.not.have.property('grant_permission');

      const put = await ok('PUT', `/users/${u.id}`, { grant_permission: 'full' });
      expect(put).to.not.have.property('grant_permission');
      const after = (await ok('GET', '/permissions')) as { user_id: number; permission: string }[];
      expect(
        after
          .filter((p) => p.user_id === u.id)
          .map((p) => p.permission)
          .sort(),
      ).to.deep.equal(['full', 'readonly', 'writeonly']);
    });

    it('grant_permission refuses values outside SPEC with 422 and creates nothing', async () => {
      const username = unique('badgrant');
      const r = await call('POST', '/users', {
        username,
        password: 'bad-grant-pass',
        grant_permission: 'admin',
      });
      expectError(r, 422, 'processing-failure/model-save-error');
      expect(r.json.model_errors).to.have.property('grant_permission');
      const list = (await ok('GET', '/users')) as { username: string }[];
      expect(list.map((x) => x.username)).to.not.include(username);
    });
  });

  describe('groups', () => {
    it('CRUD with user_ids and group_ids kept consistent', async () => {
      const [a, b, c] = [await createUser(gw), await createUser(gw), await createUser(gw)];
      const name = unique('team');
      const g = await ok('POST', '/groups', { name, notes: 'the team', user_ids: `${a.id},${b.id}` });
      expect(Object.keys(g).sort()).to.deep.equal(['id', 'name', 'notes', 'user_ids']);
      expect(g).to.include({ name, notes: 'the team' });
      expect(g.user_ids).to.be.a('string');
      expect(idsOf(g.user_ids)).to.deep.equal([a.id, b.id].sort((x, y) => x - y));
      expect(await ok('GET', `/groups/${g.id}`)).to.deep.equal(g);
      const list = (await ok('GET', '/groups')) as { id: number }[];
      expect(list.find((x) => x.id === g.id)).to.deep.equal(g);
      expect((await ok('GET', `/users/${a.id}`)).group_ids).to.equal(String(g.id));
      expect((await ok('GET', `/users/${c.id}`)).group_ids).to.equal('');

      // Omitted fields, such as name or membership, are unchanged (SPEC "Groups").
      const notes = await ok('PUT', `/groups/${g.id}`, { notes: 'changed notes' });
      expect(notes).to.deep.equal({ ...g, notes: 'changed notes' });
      const renamed = await ok('PUT', `/groups/${g.id}`, { name: `${name}-renamed` });
      expect(renamed).to.deep.equal({ ...g, notes: 'changed notes', name: `${name}-renamed` });
      const members = await ok('PUT', `/groups/${g.id}`, { user_ids: String(c.id) });
      expect(members).to.deep.equal({ ...renamed, user_ids: String(c.id) });
      expect((await ok('GET', `/users/${a.id}`)).group_ids).to.equal('');
      expect((await ok('GET', `/users/${c.id}`)).group_ids).to.equal(String(g.id));

      // The other side: a user's group_ids moves them in and out of groups.
      const g2 = await ok('POST', '/groups', { name: unique('second') });
      expect(g2.user_ids).to.equal('');
      const u = await ok('PUT', `/users/${a.id}`, { group_ids: `${g2.id},${g.id}` });
      expect(u.group_ids).to.be.a('string');
      expect(idsOf(u.group_ids)).to.deep.equal([g.id, g2.id].sort((x, y) => x - y));
      expect(idsOf((await ok('GET', `/groups/${g.id}`)).user_ids)).to.deep.equal(
        [a.id, c.id].sort((x, y) => x - y),
      );
      expect((await ok('GET', `/groups/${g2.id}`)).user_ids).to.equal(String(a.id));

      expect(await ok('DELETE', `/groups/${g.id}`)).to.deep.equal([]);
      expectError(await call('GET', `/groups/${g.id}`), 404, 'not-found/group-not-found');
      expectError(await call('DELETE', `/groups/${g.id}`), 404, 'not-found/group-not-found');
      expect((await ok('GET', `/users/${a.id}`)).group_ids).to.equal(String(g2.id));
      expect((await ok('GET', `/users/${c.id}`)).group_ids).to.equal('');
    });

    it('an empty user_ids empties the group', async () => {
      const a = await createUser(gw);
      const g = await ok('POST', '/groups', { name: unique('emptied'), user_ids: String(a.id) });
      expect((await ok('PUT', `/groups/${g.id}`, { user_ids: '' })).user_ids).to.equal('');
      expect((await ok('GET', `/users/${a.id}`)).group_ids).to.equal('');
    });

    it('deleting a user removes them from their groups', async () => {
      const [a, b] = [await createUser(gw), await createUser(gw)];
      const g = await ok('POST', '/groups', { name: unique('leavers'), user_ids: `${a.id},${b.id}` });
      await ok('DELETE', `/users/${a.id}`);
      expect((await ok('GET', `/groups/${g.id}`)).user_ids).to.equal(String(b.id));
    });

    it('unknown user ids in user_ids are a 422 and change nothing', async () => {
      const a = await createUser(gw);
      const g = await ok('POST', '/groups', { name: unique('strict'), user_ids: String(a.id) });
      const r = await call('PUT', `/groups/${g.id}`, { name: 'never-applied', user_ids: `${a.id},999999` });
      expectError(r, 422, 'processing-failure/model-save-error');
      expect(await ok('GET', `/groups/${g.id}`)).to.deep.equal(g);
      const name = unique('never');
      expectError(
        await call('POST', '/groups', { name, user_ids: '999998' }),
        422,
        'processing-failure/model-save-error',
      );
      const list = (await ok('GET', '/groups')) as { name: string }[];
      expect(list.map((x) => x.name)).to.not.include(name);
    });
  });

  describe('permissions', () => {
    it('POST by user_id, username or group_id answers 201; GET lists; DELETE answers 200 []', async () => {
      const u = await createUser(gw);
      const g = await ok('POST', '/groups', { name: unique('permgroup') });

      const byId = await ok('POST', '/permissions', {
        path: 'projects/alpha',
        permission: 'full',
        user_id: u.id,
      });
      expect(byId).to.include({
        path: 'projects/alpha',
        permission: 'full',
        user_id: u.id,
        username: u.username,
        group_id: null,
      });
      expect(byId.id).to.be.a('number');
      const byName = await ok('POST', '/permissions', {
        path: 'projects/beta',
        permission: 'readonly',
        username: u.username,
      });
      expect(byName).to.include({
        user_id: u.id,
        username: u.username,
        permission: 'readonly',
        group_id: null,
      });
      const byGroup = await ok('POST', '/permissions', {
        path: 'projects/gamma',
        permission: 'writeonly',
        group_id: g.id,
      });
      expect(byGroup).to.include({ group_id: g.id, user_id: null, permission: 'writeonly' });
      const preview = await ok('POST', '/permissions', {
        path: 'projects/delta',
        permission: 'previewonly',
        user_id: u.id,
      });
      expect(preview.permission).to.equal('previewonly');

      const list = (await ok('GET', '/permissions')) as { id: number }[];
      for (const p of [byId, byName, byGroup, preview])
        expect(list.find((x) => x.id === p.id)).to.deep.equal(p);

      expect(await ok('DELETE', `/permissions/${byId.id}`)).to.deep.equal([]);
      const after = (await ok('GET', '/permissions')) as { id: number }[];
      expect(after.map((x) => x.id)).to.not.include(byId.id);
      expect(after.map((x) => x.id)).to.include(byName.id);
      expectError(await call('DELETE', `/permissions/${byId.id}`), 404, 'not-found/permission-not-found');
    });

    it('refuses user_id with group_id, neither, or an unknown permission level with 422', async () => {
      const u = await createUser(gw);
      const g = await ok('POST', '/groups', { name: unique('both') });
      const before = ((await ok('GET', '/permissions')) as unknown[]).length;
      for (const body of [
        { path: 'p/both', permission: 'full', user_id: u.id, group_id: g.id },
        { path: 'p/none', permission: 'full' },
        { path: 'p/level', permission: 'everything', user_id: u.id },
        { path: 'p/unknown', permission: 'full', username: unique('ghost') },
      ]) {
        expectError(await call('POST', '/permissions', body), 422, 'processing-failure/model-save-error');
      }
      expect((await ok('GET', '/permissions')) as unknown[]).to.have.length(before);
    });
  });

  describe('notifications', () => {
    it('POST by user_id or username answers 201 with id and username; GET lists; DELETE answers 200 []', async () => {
      const u = await createUser(gw);
      const n1 = await ok('POST', '/notifications', { path: 'inbox/reports', user_id: u.id });
      expect(Object.keys(n1).sort()).to.deep.equal(['id', 'path', 'user_id', 'username']);
      expect(n1).to.include({ path: 'inbox/reports', user_id: u.id, username: u.username });
      const n2 = await ok('POST', '/notifications', { path: 'inbox/other', username: u.username });
      expect(n2).to.include({ path: 'inbox/other', user_id: u.id, username: u.username });

      const list = (await ok('GET', '/notifications')) as { id: number }[];
      expect(list.find((x) => x.id === n1.id)).to.deep.equal(n1);
      expect(list.find((x) => x.id === n2.id)).to.deep.equal(n2);

      expect(await ok('DELETE', `/notifications/${n1.id}`)).to.deep.equal([]);
      const after = (await ok('GET', '/notifications')) as { id: number }[];
      expect(after.map((x) => x.id)).to.not.include(n1.id);
      expect(after.map((x) => x.id)).to.include(n2.id);
      const again = await call('DELETE', `/notifications/${n1.id}`);
      expect(again.status, again.text).to.equal(404);
      expect(again.json.type).to.match(/^not-found\//);
    });

    it('a user manages their own notifications only', async () => {
      const [me, them] = [await createUser(gw), await createUser(gw)];
      const theirs = await ok('POST', '/notifications', { path: 'theirs', user_id: them.id });
      const h = keyAuth((await createKey(gw, me.id)).key);
      const mine = await ok('POST', '/notifications', { path: 'mine' }, h);
      expect(mine).to.include({ user_id: me.id, username: me.username });
      const forThem = await call('POST', '/notifications', { path: 'sneaky', user_id: them.id }, h);
      expect(forThem.status, forThem.text).to.equal(403);
      const list = (await ok('GET', '/notifications', undefined, h)) as { id: number }[];
      expect(list.map((x) => x.id)).to.deep.equal([mine.id]);
      const del = await call('DELETE', `/notifications/${theirs.id}`, undefined, h);
      expect(del.status, del.text).to.equal(404);
      expect((await ok('GET', '/notifications')).map((x: { id: number }) => x.id)).to.include(theirs.id);
    });
  });

  describe('api_keys', () => {
    it('POST answers 201 with the key once; GET /api_keys/:id and lists never show it', async () => {
      const u = await createUser(gw);
      const expires = '2031-05-06T07:08:09.000Z';
      const created = await ok('POST', '/api_keys', {
        user_id: u.id,
        name: 'ci',
        description: 'for the CI',
        expires_at: expires,
        permission_set: 'full',
      });
      expect(created.key).to.be.a('string').with.length.greaterThan(20);
      expect(created).to.include({
        user_id: u.id,
        name: 'ci',
        description: 'for the CI',
        expires_at: expires,
        permission_set: 'full',
        last_use_at: null,
      });
      expect(created.id).to.be.a('number');
      expect(created.created_at).to.match(ISO);
      expect(created.descriptive_label).to.be.a('string').and.not.equal('');
      expect(created.descriptive_label).to.not.equal(created.key);
      for (const f of ['platform', 'url']) expect(created).to.have.property(f);

      const shown = await ok('GET', `/api_keys/${created.id}`);
      expect(shown).to.not.have.property('key');
      expect(JSON.stringify(shown)).to.not.include(created.key);
      const { key: _key, ...rest } = created;
      expect({ ...shown, last_use_at: null }).to.deep.equal(rest);
      const list = await ok('GET', `/api_keys?user_id=${u.id}`);
      expect(JSON.stringify(list)).to.not.include(created.key);
      expect(list.map((k: { id: number }) => k.id)).to.deep.equal([created.id]);
    });

    it('GET /api_key with a key returns that key; with a session 403 must-authenticate-with-api-key', async () => {
      const u = await createUser(gw);
      const k1 = await createKey(gw, u.id, { name: 'one' });
      const k2 = await createKey(gw, u.id, { name: 'two' });
      for (const k of [k1, k2]) {
        const r = await ok('GET', '/api_key', undefined, keyAuth(k.key));
        expect(r).to.include({ id: k.id, user_id: u.id, name: k.name });
        expect(r).to.not.have.property('key');
        expect(r.last_use_at).to.match(ISO);
      }
      const sid = await login(gw, u.username, u.password);
      expectError(
        await call('GET', '/api_key', undefined, sessionAuth(sid)),
        403,
        'not-authorized/must-authenticate-with-api-key',
      );
      const siteKey = await ok('GET', '/api_key');
      expect(siteKey.user_id).to.equal(null);
      expect(siteKey.permission_set).to.equal('full');
    });

    it("GET /api_keys?user_id=0 lists the caller's own keys", async () => {
      const [me, them] = [await createUser(gw), await createUser(gw)];
      const mine = [await createKey(gw, me.id), await createKey(gw, me.id)];
      await createKey(gw, them.id);
      const sid = await login(gw, me.username, me.password);
      for (const h of [keyAuth(mine[0]!.key), sessionAuth(sid)]) {
        for (const q of ['?user_id=0', '']) {
          const list = await ok('GET', `/api_keys${q}`, undefined, h);
          expect(list.map((k: { id: number }) => k.id).sort()).to.deep.equal(mine.map((k) => k.id).sort());
          expect(list.every((k: { user_id: number }) => k.user_id === me.id)).to.equal(true);
        }
      }
    });

    it('sort_by[expires_at] and filter_gt[expires_at] work', async () => {
      const u = await createUser(gw);
      const dates = ['2032-01-01T00:00:00.000Z', '2030-01-01T00:00:00.000Z', '2031-01-01T00:00:00.000Z'];
      for (const expires_at of dates) await createKey(gw, u.id, { expires_at });
      const expiries = (list: { expires_at: string }[]) => list.map((k) => k.expires_at);

      const desc = await ok('GET', `/api_keys?user_id=${u.id}&sort_by[expires_at]=desc`);
      expect(expiries(desc)).to.deep.equal([...dates].sort().reverse());
      const asc = await ok('GET', `/api_keys?user_id=${u.id}&sort_by%5Bexpires_at%5D=asc`);
      expect(expiries(asc)).to.deep.equal([...dates].sort());
      const gt = await ok('GET', `/api_keys?user_id=${u.id}&filter_gt[expires_at]=2030-06-01T00:00:00Z`);
      expect(expiries(gt).sort()).to.deep.equal(['2031-01-01T00:00:00.000Z', '2032-01-01T00:00:00.000Z']);
      const gtEdge = await ok('GET', `/api_keys?user_id=${u.id}&filter_gt[expires_at]=2031-01-01T00:00:00Z`);
      expect(expiries(gtEdge)).to.deep.equal(['2032-01-01T00:00:00.000Z']);
      const gteq = await ok('GET', `/api_keys?user_id=${u.id}&filter_gteq[expires_at]=2031-01-01T00:00:00Z`);
      expect(expiries(gteq).sort()).to.deep.equal(['2031-01-01T00:00:00.000Z', '2032-01-01T00:00:00.000Z']);
      const lt = await ok(
        'GET',
        `/api_keys?user_id=${u.id}&filter_lt[expires_at]=2031-01-01T00:00:00Z&sort_by[expires_at]=desc`,
      );
      expect(expiries(lt)).to.deep.equal(['2030-01-01T00:00:00.000Z']);
    });

    it('sort_by[expires_at] puts keys that never expire after every date, on every database', async () => {
      const u = await createUser(gw);
      const never = await createKey(gw, u.id);
      const k2030 = await createKey(gw, u.id, { expires_at: '2030-01-01T00:00:00.000Z' });
      const k2031 = await createKey(gw, u.id, { expires_at: '2031-01-01T00:00:00.000Z' });
      const order = async (dir: string) =>
        ((await ok('GET', `/api_keys?user_id=${u.id}&sort_by[expires_at]=${dir}`)) as { id: number }[]).map(
          (k) => k.id,
        );
      expect(await order('asc')).to.deep.equal([k2030.id, k2031.id, never.id]);
      expect(await order('desc')).to.deep.equal([never.id, k2031.id, k2030.id]);
      // Paging a sorted list keeps the order.
      const p1 = await call('GET', `/api_keys?user_id=${u.id}&sort_by[expires_at]=desc&per_page=2`);
      const cursor = p1.headers['x-svc-cursor-next'] as string;
      const p2 = await call(
        'GET',
        `/api_keys?user_id=${u.id}&sort_by[expires_at]=desc&per_page=2&cursor=${encodeURIComponent(cursor)}`,
      );
      expect([...p1.json, ...p2.json].map((k: { id: number }) => k.id)).to.deep.equal([
        never.id,
        k2031.id,
        k2030.id,
      ]);
    });

    it("a site admin lists another user's keys; a regular user cannot (403)", async () => {
      const [owner, nosy] = [await createUser(gw), await createUser(gw)];
      const k = await createKey(gw, owner.id);
      const admin = await createUser(gw, { site_admin: true });
      const adminSession = sessionAuth(await login(gw, admin.username, admin.password));
      const seen = await ok('GET', `/api_keys?user_id=${owner.id}`, undefined, adminSession);
      expect(seen.map((x: { id: number }) => x.id)).to.deep.equal([k.id]);
      expect((await ok('GET', `/api_keys/${k.id}`, undefined, adminSession)).id).to.equal(k.id);

      for (const h of [
        keyAuth((await createKey(gw, nosy.id)).key),
        sessionAuth(await login(gw, nosy.username, nosy.password)),
      ]) {
        const r = await call('GET', `/api_keys?user_id=${owner.id}`, undefined, h);
        expect(r.status, r.text).to.equal(403);
        expect(r.json.type).to.match(/^not-authorized\//);
        expect(r.text).to.not.include(k.descriptive_label as string);
        const one = await call('GET', `/api_keys/${k.id}`, undefined, h);
        expect([403, 404]).to.include(one.status);
        expect(one.text).to.not.include(k.descriptive_label as string);
      }
    });

    it('a user creates a key for themself with their key, but not for someone else', async () => {
      const [me, them] = [await createUser(gw), await createUser(gw)];
      const h = keyAuth((await createKey(gw, me.id)).key);
      const mine = await ok('POST', '/api_keys', { name: 'mine' }, h);
      expect(mine.user_id).to.equal(me.id);
      expect((await ok('GET', '/api_key', undefined, keyAuth(mine.key))).id).to.equal(mine.id);
      const r = await call('POST', '/api_keys', { user_id: them.id }, h);
      expect(r.status, r.text).to.equal(403);
      expect(await ok('GET', `/api_keys?user_id=${them.id}`)).to.deep.equal([]);
    });

    it('DELETE /api_keys/:id answers 200 [] and the key stops working', async () => {
      const u = await createUser(gw);
      const k = await createKey(gw, u.id);
      expect(await ok('DELETE', `/api_keys/${k.id}`)).to.deep.equal([]);
      expectError(await call('GET', `/api_keys/${k.id}`), 404, 'not-found/api-key-not-found');
      expect((await call('GET', '/api_key', undefined, keyAuth(k.key))).status).to.equal(401);
    });
  });

  describe('reauthentication', () => {
    it('a session changing a password needs X-Svc-Reauthentication: password:<PASSWORD>', async () => {
      const u = await createUser(gw);
      const sid = await login(gw, u.username, u.password);
      const change = (headers: Record<string, string>) =>
        call(
          'PUT',
          `/users/${u.id}`,
          { password: 'brand-new-password' },
          { ...sessionAuth(sid), ...headers },
        );

      expectError(await change({}), 403, 'not-authorized/reauthentication-needed-action');
      expect(await canLogin(u.username, u.password)).to.equal(true);
      expectError(
        await change({ 'X-Svc-Reauthentication': u.password }),
        400,
        'bad-request/reauthentication-needed-fields',
      );
      expectError(
        await change({ 'X-Svc-Reauthentication': 'password:wrong-password' }),
        403,
        'not-authorized/reauthentication-failed',
      );
      expect(await canLogin(u.username, 'brand-new-password')).to.equal(false);
      const r = await change({ 'X-Svc-Reauthentication': `password:${u.password}` });
      expect(r.status, r.text).to.equal(200);
      expect(await canLogin(u.username, 'brand-new-password')).to.equal(true);
      expect(await canLogin(u.username, u.password)).to.equal(false);
    });

    it('ends the session after 3 wrong reauthentication passwords (reauthentication-failed-final)', async () => {
      const u = await createUser(gw);
      const sid = await login(gw, u.username, u.password);
      const attempt = () =>
        call(
          'PUT',
          `/users/${u.id}`,
          { password: 'never-applied-pw' },
          { ...sessionAuth(sid), 'X-Svc-Reauthentication': 'password:guess-guess' },
        );
      expectError(await attempt(), 403, 'not-authorized/reauthentication-failed');
      expectError(await attempt(), 403, 'not-authorized/reauthentication-failed');
      expectError(await attempt(), 403, 'not-authorized/reauthentication-failed-final');
      const after = await call('GET', `/users/${u.id}`, undefined, sessionAuth(sid));
      expect(after.status, after.text).to.equal(401);
      expect(await canLogin(u.username, u.password)).to.equal(true);
      expect(await canLogin(u.username, 'never-applied-pw')).to.equal(false);
    });

    it('a site admin session needs it too, to change anyone’s password', async () => {
      const admin = await createUser(gw, { site_admin: true });
      const target = await createUser(gw);
      const sid = await login(gw, admin.username, admin.password);
      const r = await call(
        'PUT',
        `/users/${target.id}`,
        { password: 'admin-set-password' },
        sessionAuth(sid),
      );
      expectError(r, 403, 'not-authorized/reauthentication-needed-action');
      expect(await canLogin(target.username, target.password)).to.equal(true);
      const ok2 = await call(
        'PUT',
        `/users/${target.id}`,
        { password: 'admin-set-password' },
        { ...sessionAuth(sid), 'X-Svc-Reauthentication': `password:${admin.password}` },
      );
      expect(ok2.status, ok2.text).to.equal(200);
      expect(await canLogin(target.username, 'admin-set-password')).to.equal(true);
    });

    it('a session changing other fields needs no reauthentication', async () => {
      const u = await createUser(gw);
      const sid = await login(gw, u.username, u.password);
      const r = await call('PUT', `/users/${u.id}`, { name: 'Just A Name' }, sessionAuth(sid));
      expect(r.status, r.text).to.equal(200);
      expect(r.json.name).to.equal('Just A Name');
    });

    it('POST /api_keys with a session needs it', async () => {
      const u = await createUser(gw);
      const sid = await login(gw, u.username, u.password);
      const create = (headers: Record<string, string>) =>
        call('POST', '/api_keys', { name: 'from-session' }, { ...sessionAuth(sid), ...headers });
      expectError(await create({}), 403, 'not-authorized/reauthentication-needed-action');
      expectError(
        await create({ 'X-Svc-Reauthentication': 'password:not-it' }),
        403,
        'not-authorized/reauthentication-failed',
      );
      expect(await ok('GET', `/api_keys?user_id=${u.id}`)).to.deep.equal([]);
      const r = await create({ 'X-Svc-Reauthentication': `password:${u.password}` });
      expect(r.status, r.text).to.equal(201);
      expect(r.json.key).to.be.a('string');
      expect(r.json.user_id).to.equal(u.id);
    });

    it('with an API key no header is needed', async () => {
      const u = await createUser(gw);
      const h = keyAuth((await createKey(gw, u.id)).key);
      const k = await call('POST', '/api_keys', { name: 'from-key' }, h);
      expect(k.status, k.text).to.equal(201);
      const r = await call('PUT', `/users/${u.id}`, { password: 'changed-by-key-1' }, h);
      expect(r.status, r.text).to.equal(200);
      expect(await canLogin(u.username, 'changed-by-key-1')).to.equal(true);
    });
  });

  // SPEC's rules for the path-like fields (issue 11 item 6): user_root must not start with a slash
  // and must end with one; a permission's and a notification's path neither start nor end with
  // one. A value breaking the rule is refused with a model-save-error naming the rule, never
  // stored in another form.
  describe("path fields in SPEC's form", () => {
    /** refused asserts a model-save-error whose `field` messages and whose text name `rule`. */
    const refused = (r: Response, field: string, rule: RegExp) => {
      expectError(r, 422, 'processing-failure/model-save-error');
      const messages = (r.json.model_errors as Record<string, string[]>)[field];
      expect(messages, r.text).to.be.an('array');
      expect(messages!.join(' '), r.text).to.match(rule);
      expect(r.json.error, r.text).to.match(rule);
    };

    const LEADING = /must not start with a slash/;
    const TRAILING_NEEDED = /must end with a slash/;
    const TRAILING = /must not end with a slash/;

    describe('user_root', () => {
      it('POST /users refuses a leading slash or a missing trailing slash, and creates no user', async () => {
        const before = ((await call('GET', '/users')).json as unknown[]).length;
        for (const [root, rule] of [
          ['/partners/alice/', LEADING],
          ['/partners/alice', LEADING],
          ['partners/alice', TRAILING_NEEDED],
          ['/', LEADING],
        ] as const) {
          refused(
            await call('POST', '/users', {
              username: unique('root'),
              password: 'user-password-1',
              user_root: root,
            }),
            'user_root',
            rule,
          );
        }
        expect((await call('GET', '/users')).json as unknown[]).to.have.length(before);
      });

      it('POST /users keeps a value in SPEC form as given, and blank for the site root', async () => {
        expect((await createUser(gw, { user_root: 'partners/alice/' })).user_root).to.equal(
          'partners/alice/',
        );
        expect((await createUser(gw, { user_root: '' })).user_root).to.equal('');
      });

      it('PUT /users/:id refuses the same values and leaves user_root unchanged', async () => {
        const u = await createUser(gw, { user_root: 'homes/kept/' });
        refused(
          await call('PUT', `/users/${u.id}`, { user_root: 'homes/other' }),
          'user_root',
          TRAILING_NEEDED,
        );
        refused(await call('PUT', `/users/${u.id}`, { user_root: '/homes/other/' }), 'user_root', LEADING);
        expect((await call('GET', `/users/${u.id}`)).json.user_root).to.equal('homes/kept/');
        const moved = await call('PUT', `/users/${u.id}`, { user_root: 'homes/other/' });
        expect(moved.status, moved.text).to.equal(200);
        expect(moved.json.user_root).to.equal('homes/other/');
      });

      it('grant_permission with a refused user_root creates no permission', async () => {
        const before = ((await call('GET', '/permissions')).json as unknown[]).length;
        refused(
          await call('POST', '/users', {
            username: unique('granted'),
            password: 'user-password-1',
            user_root: '/homes/granted',
            grant_permission: 'full',
          }),
          'user_root',
          LEADING,
        );
        expect((await call('GET', '/permissions')).json as unknown[]).to.have.length(before);
      });
    });

    describe('permission path', () => {
      it('POST /permissions refuses a leading or trailing slash and stores nothing', async () => {
        const u = await createUser(gw);
        for (const [path, rule] of [
          ['/projects/alpha', LEADING],
          ['projects/alpha/', TRAILING],
          ['/', LEADING],
        ] as const) {
          refused(
            await call('POST', '/permissions', { path, permission: 'full', user_id: u.id }),
            'path',
            rule,
          );
        }
        const mine = (await call('GET', '/permissions')).json as { user_id: number }[];
        expect(mine.filter((p) => p.user_id === u.id)).to.deep.equal([]);
        const ok = await call('POST', '/permissions', {
          path: 'projects/alpha',
          permission: 'full',
          user_id: u.id,
        });
        expect(ok.status, ok.text).to.equal(201);
        expect(ok.json.path).to.equal('projects/alpha');
      });
    });

    describe('notification path', () => {
      it('POST /notifications refuses a leading or trailing slash and stores nothing', async () => {
        const u = await createUser(gw);
        refused(await call('POST', '/notifications', { path: '/reports', user_id: u.id }), 'path', LEADING);
        refused(await call('POST', '/notifications', { path: 'reports/', user_id: u.id }), 'path', TRAILING);
        const mine = (await call('GET', '/notifications')).json as { user_id: number }[];
        expect(mine.filter((n) => n.user_id === u.id)).to.deep.equal([]);
      });
    });
  });
});
