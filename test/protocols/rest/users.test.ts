/**
 * GET /users for an admin page that must stay fast at 10,000 users (extensions: `search` over
 * username, name and e-mail in any case; `sort_by[username|created_at|last_login_at]`), still paged
 * by SPEC's cursors; `locked_until` on the User and POST /users/:id/unlock; a site admin revoking
 * another user's API key.
 */
import { expect } from 'chai';
import { dbKind, startTestGateway, type Response, type TestGateway } from '../../helpers/gateway.ts';
import { insertUsers } from '../../helpers/users.ts';
import { API, createKey, createUser, expectError, keyAuth, login, sessionAuth, unique } from './client.ts';

type UserJson = {
  id: number;
  username: string;
  created_at: string;
  last_login_at: string | null;
  locked_until: string | null;
};

describe(`REST users: search, sort, lockout (${dbKind})`, function () {
  this.timeout(60_000);
  let gw: TestGateway;
  let site: Record<string, string>;
  before(async () => {
    gw = await startTestGateway();
    site = keyAuth(gw.siteKey);
  });
  after(async () => gw?.stop());

  const get = (query: string, headers = site) => gw.request('GET', `${API}/users?${query}`, { headers });
  const users = (r: Response): UserJson[] => {
    expect(r.status, r.text).to.equal(200);
    return r.json as UserJson[];
  };
  const next = (r: Response) => r.headers['x-svc-cursor-next'] as string | undefined;
  const prev = (r: Response) => r.headers['x-svc-cursor-prev'] as string | undefined;

  /** all follows X-Svc-Cursor-Next from `query` to the end and returns every user in order. */
  async function all(query: string, perPage = 3): Promise<UserJson[]> {
    const seen: UserJson[] = [];
    let r = await get(`${query}&per_page=${perPage}`);
    seen.push(...users(r));
    for (let i = 0; next(r) && i < 100; i++) {
      r = await get(`${query}&per_page=${perPage}&cursor=${encodeURIComponent(next(r)!)}`);
      seen.push(...users(r));
    }
    expect(next(r)).to.equal(undefined);
    return seen;
  }

  describe('search and sort', () => {
    const tag = unique('srch').toLowerCase();
    const made: UserJson[] = [];
    before(async () => {
      const fields = [
        { username: `${tag}-Zed`, name: 'Zed Zulu', email: 'zed@example.com' },
        { username: `${tag}-amy`, name: 'Amy Adams', email: 'AMY@Example.org' },
        { username: `${tag}-Bob`, name: 'Robert Tables', email: 'bob@example.net' },
        { username: `${tag}-cy_1`, name: '100% Cy', email: 'cy@example.com' },
        { username: `${tag}-dee`, name: 'Dee', email: 'dee@example.com' },
      ];
      for (const f of fields) made.push((await createUser(gw, f)) as unknown as UserJson);
      // Two of them log in, Amy after Dee.
      await login(gw, `${tag}-dee`, 'user-password-1');
      await new Promise((r) => setTimeout(r, 5));
      await login(gw, `${tag}-amy`, 'user-password-1');
    });
    const names = (list: UserJson[]) => list.map((u) => u.username.slice(tag.length + 1));

    it('search finds users by username, name or e-mail, in any case', async () => {
      expect(names(users(await get(`search=${tag}`)))).to.deep.equal(['Zed', 'amy', 'Bob', 'cy_1', 'dee']);
      expect(names(users(await get(`search=${tag.toUpperCase()}-BOB`)))).to.deep.equal(['Bob']);
      expect(names(users(await get('search=robert%20TABLES')))).to.deep.equal(['Bob']);
      expect(names(users(await get('search=amy%40example.ORG')))).to.deep.equal(['amy']);
      expect(users(await get('search=nobody-has-this'))).to.deep.equal([]);
      // LIKE's wildcards are text here: `%` and `_` match only themselves.
      expect(names(users(await get('search=100%25')))).to.deep.equal(['cy_1']);
      expect(names(users(await get(`search=${tag}-cy_`)))).to.deep.equal(['cy_1']);
      expect(users(await get(`search=${tag}-c_`))).to.deep.equal([]);
      // Blank is no filter: the bootstrap admin is listed too.
      expect(users(await get('search=')).map((u) => u.username)).to.include('admin');
    });

    it('sort_by[username] orders by name in any case, both ways, across pages', async () => {
      const asc = await all(`search=${tag}&sort_by[username]=asc`, 2);
      expect(names(asc)).to.deep.equal(['amy', 'Bob', 'cy_1', 'dee', 'Zed']);
      const desc = await all(`search=${tag}&sort_by[username]=desc`, 2);
      expect(names(desc)).to.deep.equal(['Zed', 'dee', 'cy_1', 'Bob', 'amy']);
    });

    it('sort_by[created_at] and sort_by[last_login_at] (never logged in counts as oldest)', async () => {
      expect(names(await all(`search=${tag}&sort_by[created_at]=desc`, 2))).to.deep.equal([
        'dee',
        'cy_1',
        'Bob',
        'amy',
        'Zed',
      ]);
      const logins = await all(`search=${tag}&sort_by[last_login_at]=desc`, 2);
      // Ties (never logged in) go by creation, in the same direction.
      expect(names(logins)).to.deep.equal(['amy', 'dee', 'cy_1', 'Bob', 'Zed']);
      expect(logins[0]!.last_login_at).to.be.a('string');
      expect(logins[4]!.last_login_at).to.equal(null);
      expect(names(await all(`search=${tag}&sort_by[last_login_at]=asc`, 2))).to.deep.equal([
        'Zed',
        'Bob',
        'cy_1',
        'dee',
        'amy',
      ]);
    });

    it('X-Svc-Cursor-Prev leads back under a sort and a search', async () => {
      const q = `search=${tag}&sort_by[username]=desc&per_page=2`;
      const p1 = await get(q);
      const p2 = await get(`${q}&cursor=${encodeURIComponent(next(p1)!)}`);
      const p3 = await get(`${q}&cursor=${encodeURIComponent(next(p2)!)}`);
      expect(names(users(p3))).to.deep.equal(['amy']);
      const back2 = await get(`${q}&cursor=${encodeURIComponent(prev(p3)!)}`);
      expect(names(users(back2))).to.deep.equal(names(users(p2)));
      const back1 = await get(`${q}&cursor=${encodeURIComponent(prev(back2)!)}`);
      expect(names(users(back1))).to.deep.equal(['Zed', 'dee']);
      expect(prev(back1)).to.equal(undefined);
    });

    it('a cursor of one search or sort is refused by another (400 invalid-cursor)', async () => {
      const p1 = await get(`search=${tag}&sort_by[username]=asc&per_page=2`);
      const cursor = encodeURIComponent(next(p1)!);
      expectError(
        await get(`search=${tag}&sort_by[username]=desc&cursor=${cursor}`),
        400,
        'bad-request/invalid-cursor',
      );
      expectError(
        await get(`search=other&sort_by[username]=asc&cursor=${cursor}`),
        400,
        'bad-request/invalid-cursor',
      );
      expectError(await get(`cursor=${cursor}`), 400, 'bad-request/invalid-cursor');
    });

    it('refuses a sort it does not offer, two fields, or a direction other than asc or desc', async () => {
      expectError(await get('sort_by[password]=asc'), 400, 'bad-request/invalid-filter-field');
      expectError(
        await get('sort_by[username]=asc&sort_by[created_at]=asc'),
        400,
        'bad-request/invalid-filter-combination',
      );
      expectError(await get('sort_by[username]=up'), 400, 'bad-request/invalid-filter-param-value');
      expectError(await get(`search=${'x'.repeat(101)}`), 422, 'processing-failure/model-save-error');
    });

    it('a listed user is the user GET /users/:id shows: flags, groups, root, times', async () => {
      const g = await gw.request('POST', `${API}/groups`, { headers: site, body: { name: unique('grp') } });
      expect(g.status, g.text).to.equal(201);
      const oddName = unique('odd').toLowerCase();
      const odd = await createUser(gw, {
        username: oddName,
        ftp_permission: false,
        sftp_permission: false,
        attachments_permission: true,
        require_password_change: true,
        site_admin: true,
        allowed_ips: '127.0.0.0/8',
        user_root: 'somewhere/',
        notes: 'listed',
        group_ids: String((g.json as { id: number }).id),
      });
      await login(gw, oddName, 'user-password-1');
      for (const query of [`search=${oddName}`, `search=${oddName}&sort_by[last_login_at]=desc`]) {
        const [listed] = users(await get(query));
        const one = await gw.request('GET', `${API}/users/${odd.id}`, { headers: site });
        expect(one.status, one.text).to.equal(200);
        expect(listed).to.deep.equal(one.json);
        expect(listed).to.include({ ftp_permission: false, site_admin: true, user_root: 'somewhere/' });
        expect((listed as unknown as { group_ids: string }).group_ids).to.equal(
          String((g.json as { id: number }).id),
        );
      }
    });

    it('is for site admins only', async () => {
      const u = await createUser(gw);
      const session = await login(gw, u.username, u.password);
      expectError(
        await get(`search=${tag}`, sessionAuth(session)),
        403,
        'not-authorized/site-admin-required',
      );
    });
  });

  describe('10,000 users', () => {
    before(async function () {
      this.timeout(120_000);
      await insertUsers(gw.core, 10_000, 'crowd');
    });

    it('a search finds the one user among them; a sorted walk pages without repeats', async () => {
      const one = users(await get('search=CROWD04321&per_page=50'));
      expect(one.map((u) => u.username)).to.deep.equal(['crowd04321']);
      const byMail = users(await get('search=crowd0999&sort_by[username]=desc&per_page=5'));
      expect(byMail.map((u) => u.username)).to.deep.equal([
        'crowd09999',
        'crowd09998',
        'crowd09997',
        'crowd09996',
        'crowd09995',
      ]);
      // Deep in the list by username: the page after crowd05000 starts at crowd05001.
      let r = await get('search=crowd&sort_by[username]=asc&per_page=1000');
      for (let i = 0; i < 5; i++)
        r = await get(
          `search=crowd&sort_by[username]=asc&per_page=1000&cursor=${encodeURIComponent(next(r)!)}`,
        );
      const page6 = users(r);
      expect(page6[0]!.username).to.equal('crowd05000');
      expect(page6.at(-1)!.username).to.equal('crowd05999');
      const newest = users(await get('sort_by[created_at]=asc&per_page=2&search=crowd'));
      expect(newest.map((u) => u.username)).to.deep.equal(['crowd00000', 'crowd00001']);
    });
  });

  describe('lockout', () => {
    it('locked_until says when a lockout ends; POST /users/:id/unlock ends it and the password works again', async () => {
      const u = await createUser(gw);
      const fresh = users(await get(`search=${u.username}`))[0]!;
      expect(fresh.locked_until).to.equal(null);
      for (let i = 0; i < 5; i++) {
        const r = await gw.request('POST', `${API}/sessions`, {
          body: { username: u.username, password: 'wrong-password-1' },
        });
        expect(r.status).to.equal(401);
      }
      const locked = await gw.request('GET', `${API}/users/${u.id}`, { headers: site });
      expect(Date.parse(locked.json.locked_until as string)).to.be.greaterThan(Date.now());
      const refused = await gw.request('POST', `${API}/sessions`, {
        body: { username: u.username, password: u.password },
      });
      expectError(refused, 401, 'not-authenticated/locked-out');

      const unlocked = await gw.request('POST', `${API}/users/${u.id}/unlock`, { headers: site });
      expect(unlocked.status, unlocked.text).to.equal(200);
      expect(unlocked.json).to.include({ id: u.id, locked_until: null });
      expect((await gw.request('GET', `${API}/users/${u.id}`, { headers: site })).json.locked_until).to.equal(
        null,
      );
      const ok = await gw.request('POST', `${API}/sessions`, {
        body: { username: u.username, password: u.password },
      });
      expect(ok.status, ok.text).to.equal(200);
      const history = await gw.request('GET', `${API}/history/users/${u.id}`, { headers: site });
      expect(history.json.map((a: { action: string }) => a.action)).to.include('login');
    });

    it('unlock is for site admins; an unknown user is 404', async () => {
      const u = await createUser(gw);
      const session = await login(gw, u.username, u.password);
      expectError(
        await gw.request('POST', `${API}/users/${u.id}/unlock`, { headers: sessionAuth(session) }),
        403,
        'not-authorized/site-admin-required',
      );
      expectError(
        await gw.request('POST', `${API}/users/99999999/unlock`, { headers: site }),
        404,
        'not-found/user-not-found',
      );
    });
  });

  describe('API keys of another user', () => {
    it('a site admin lists, creates (key shown once) and revokes a key of a user; the key then gets 401', async () => {
      const u = await createUser(gw);
      const admin = sessionAuth(await login(gw, 'admin', 'admin-password'));
      const made = await gw.request('POST', `${API}/api_keys`, {
        headers: { ...admin, 'X-Svc-Reauthentication': 'password:admin-password' },
        body: { user_id: u.id, name: 'laptop' },
      });
      expect(made.status, made.text).to.equal(201);
      expect(made.json.key).to.be.a('string');
      const listed = await gw.request('GET', `${API}/api_keys?user_id=${u.id}`, { headers: admin });
      expect(listed.json.map((k: { id: number }) => k.id)).to.deep.equal([made.json.id]);
      expect(listed.json[0]).to.not.have.property('key');
      const own = keyAuth(made.json.key as string);
      expect((await gw.request('GET', `${API}/api_key`, { headers: own })).status).to.equal(200);

      const revoked = await gw.request('DELETE', `${API}/api_keys/${made.json.id}`, { headers: admin });
      expect(revoked.status, revoked.text).to.equal(200);
      expect(revoked.json).to.deep.equal([]);
      expectError(
        await gw.request('GET', `${API}/api_key`, { headers: own }),
        401,
        'not-authenticated/invalid-credentials',
      );
      expect(
        (await gw.request('GET', `${API}/api_keys?user_id=${u.id}`, { headers: admin })).json,
      ).to.deep.equal([]);
      // A user's key cannot revoke another user's key.
      const other = await createKey(gw, (await createUser(gw)).id);
      const theirs = await createKey(gw, u.id);
      expect(
        (await gw.request('DELETE', `${API}/api_keys/${theirs.id}`, { headers: keyAuth(other.key) })).status,
      ).to.be.oneOf([403, 404]);
    });
  });
});
