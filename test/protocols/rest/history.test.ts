/**
 * SPEC "History (recent actions)" over real HTTPS: /history/files/{path}, /history/folders/{path},
 * /history/users/{id}, /history/login and /history, with SPEC's Action fields in JSON and XML,
 * the 24-hour limit, start_at/end_at, sort_by, filter and filter_prefix, cursor pagination and
 * "Access by endpoint".
 *
 * Account actions and logins are made through the API. No file API records Actions yet, so the
 * file actions (create, update, move) are written through the core's own recordAction, the
 * function the file operations will call; actions in the past are such rows with `when` moved back.
 */
import { expect } from 'chai';
import { recordAction, type ActionFields } from '../../../src/core/actions/record.ts';
import { ActionEntity } from '../../../src/db/entities.ts';
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
import { dbOf } from '../../helpers/internals.ts';

/** Action is SPEC's Action as the JSON answer carries it. */
interface Action {
  id: number;
  path: string;
  when: string;
  destination: string;
  source: string;
  display: string;
  ip: string;
  targets: unknown[];
  user_id: number | null;
  username: string;
  action: string;
  failure_type: string;
  interface: string;
}

const ACTION_FIELDS = [
  'id',
  'path',
  'when',
  'destination',
  'source',
  'display',
  'ip',
  'targets',
  'user_id',
  'username',
  'action',
  'failure_type',
  'interface',
];
const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;
const HOUR = 3_600_000;

type User = { id: number; username: string; password: string };

describe('REST history', () => {
  let gw: TestGateway;
  let site: Record<string, string>;
  let alice: User;
  let bob: User;
  let aliceKey: Record<string, string>;
  let bobKey: Record<string, string>;
  let aliceSession: Record<string, string>;
  let adminSession: Record<string, string>;
  /** ids of the actions made in `before`, by what they are */
  const ids = {} as Record<
    | 'aliceCreated'
    | 'groupCreated'
    | 'permission'
    | 'aliceLogin'
    | 'aliceFailed'
    | 'nobodyFailed'
    | 'reportCreate'
    | 'reportUpdate'
    | 'reportMove'
    | 'deep'
    | 'betaNotes'
    | 'alphabet'
    | 'upper',
    number
  >;

  /** fileAction writes a file Action the way the file operations will (see the header) and returns its id. */
  const fileAction = (user: User | null, fields: ActionFields, when?: Date): Promise<number> =>
    dbOf(gw.core).work(async (em) => {
      await recordAction(em, null, {
        interface: 'restapi',
        ip: '127.0.0.1',
        user: user ? { id: user.id, username: user.username } : { id: null, username: '' },
        ...fields,
      });
      const row = await em.findOne(ActionEntity, { where: {}, order: { id: 'DESC' } });
      if (when) await em.update(ActionEntity, { id: row!.id }, { when });
      return row!.id;
    });

  /** newest is the id of the latest action, e.g. the one an API call just recorded. */
  const newest = async (): Promise<number> =>
    (await dbOf(gw.core).read((em) => em.findOne(ActionEntity, { where: {}, order: { id: 'DESC' } })))!.id;

  const get = (path: string, headers: Record<string, string> = site) =>
    gw.request('GET', `${API}${path}`, { headers });
  const list = async (path: string, headers: Record<string, string> = site): Promise<Action[]> => {
    const r = await get(path, headers);
    expect(r.status, `${path}: ${r.text}`).to.equal(200);
    expect(r.headers['content-type']).to.match(/^application\/json/);
    expect(r.json).to.be.an('array');
    return r.json as Action[];
  };
  const idsOf = (actions: Action[]) => actions.map((a) => a.id);
  /** excludes asserts that none of `unwanted` is in `got` (chai's negated members passes if one is missing). */
  const excludes = (got: number[], unwanted: number[]) => {
    for (const id of unwanted) expect(got).to.not.include(id);
  };
  const q = (params: Record<string, string>) =>
    `?${Object.entries(params)
      .map(([k, v]) => `${k}=${encodeURIComponent(v)}`)
      .join('&')}`;

  before(async () => {
    gw = await startTestGateway();
    site = keyAuth(gw.siteKey);
    // Account actions through the API, by the site-wide key (user_id null).
    alice = await createUser(gw);
    ids.aliceCreated = await newest();
    bob = await createUser(gw);
    const admin = await createUser(gw, { site_admin: true });
    aliceKey = keyAuth((await createKey(gw, alice.id)).key);
    bobKey = keyAuth((await createKey(gw, bob.id)).key);
    const g = await gw.request('POST', `${API}/groups`, {
      headers: site,
      body: { name: unique('group'), user_ids: String(bob.id) },
    });
    expect(g.status, g.text).to.equal(201);
    ids.groupCreated = await newest();
    const perm = await gw.request('POST', `${API}/permissions`, {
      headers: site,
      body: { path: 'projects/alpha', permission: 'readonly', user_id: alice.id },
    });
    expect(perm.status, perm.text).to.equal(201);
    ids.permission = await newest();

    // Logins and failed logins through POST /sessions.
    aliceSession = sessionAuth(await login(gw, alice.username, alice.password));
    ids.aliceLogin = await newest();
    const wrong = await gw.request('POST', `${API}/sessions`, {
      body: { username: alice.username, password: 'not-her-password' },
    });
    expectError(wrong, 401, 'not-authenticated/invalid-username-or-password');
    ids.aliceFailed = await newest();
    const nobody = await gw.request('POST', `${API}/sessions`, {
      body: { username: unique('nobody'), password: 'whatever-password' },
    });
    expectError(nobody, 401, 'not-authenticated/invalid-username-or-password');
    ids.nobodyFailed = await newest();
    adminSession = sessionAuth(await login(gw, admin.username, admin.password));

    // File actions (see the header).
    ids.reportCreate = await fileAction(alice, { action: 'create', path: 'projects/alpha/report.txt' });
    ids.reportUpdate = await fileAction(bob, { action: 'update', path: 'projects/alpha/report.txt' });
    ids.reportMove = await fileAction(bob, {
      action: 'move',
      path: 'projects/alpha/report.txt',
      source: 'projects/alpha/report.txt',
      destination: 'projects/beta/report.txt',
      targets: [{ type: 'file', path: 'projects/beta/report.txt' }],
    });
    ids.deep = await fileAction(alice, { action: 'create', path: 'projects/alpha/deep/inner.txt' });
    ids.betaNotes = await fileAction(bob, { action: 'create', path: 'projects/beta/notes.txt' });
    // Traps: a sibling folder sharing the prefix, and the same path in another case.
    ids.alphabet = await fileAction(bob, { action: 'create', path: 'projects/alphabet/x.txt' });
    ids.upper = await fileAction(bob, { action: 'create', path: 'Projects/alpha/upper.txt' });
  });
  after(async () => gw.stop());

  describe('endpoints', () => {
    it('/history/files/{path} lists actions whose path, source or destination is the file, newest first', async () => {
      const report = await list('/history/files/projects/alpha/report.txt');
      expect(idsOf(report)).to.deep.equal([ids.reportMove, ids.reportUpdate, ids.reportCreate]);
      // A move shows in the history of both ends.
      expect(idsOf(await list('/history/files/projects/beta/report.txt'))).to.deep.equal([ids.reportMove]);
      expect(await list('/history/files/projects/alpha/nothing-here.txt')).to.deep.equal([]);
    });

    it('/history/folders/{path} lists actions on the folder and inside it, not on look-alikes', async () => {
      const alpha = idsOf(await list('/history/folders/projects/alpha'));
      expect(alpha).to.have.members([
        ids.permission,
        ids.reportCreate,
        ids.reportUpdate,
        ids.reportMove,
        ids.deep,
      ]);
      excludes(alpha, [ids.alphabet, ids.upper, ids.betaNotes]);
      // The move into beta is in beta's history, by its destination.
      expect(idsOf(await list('/history/folders/projects/beta'))).to.have.members([
        ids.reportMove,
        ids.betaNotes,
      ]);
      // Paths are case-sensitive.
      expect(idsOf(await list('/history/folders/Projects'))).to.deep.equal([ids.upper]);
    });

    it('/history/folders with no path is the root: every action with a path, not logins or user changes', async () => {
      for (const path of ['/history/folders', '/history/folders/']) {
        const root = idsOf(await list(path));
        expect(root).to.include.members([ids.permission, ids.reportCreate, ids.alphabet, ids.upper]);
        excludes(root, [ids.aliceLogin, ids.aliceFailed, ids.aliceCreated]);
      }
    });

    it("/history/users/{id} lists that user's actions only", async () => {
      const mine = await list(`/history/users/${alice.id}`);
      expect(idsOf(mine)).to.include.members([ids.aliceLogin, ids.aliceFailed, ids.reportCreate, ids.deep]);
      expect(mine.every((a) => a.user_id === alice.id)).to.equal(true);
      excludes(idsOf(mine), [ids.reportUpdate, ids.aliceCreated]);
      const bobs = await list(`/history/users/${bob.id}`);
      expect(idsOf(bobs)).to.include.members([ids.reportUpdate, ids.reportMove, ids.betaNotes]);
      expect(bobs.every((a) => a.user_id === bob.id)).to.equal(true);
      expect(await list('/history/users/999999')).to.deep.equal([]);
    });

    it('/history/login lists logins and failed logins only, with failure_type', async () => {
      const logins = await list('/history/login');
      expect(logins.map((a) => a.action).every((a) => a === 'login' || a === 'failedlogin')).to.equal(true);
      expect(idsOf(logins)).to.include.members([ids.aliceLogin, ids.aliceFailed, ids.nobodyFailed]);
      const byId = new Map(logins.map((a) => [a.id, a]));
      expect(byId.get(ids.aliceLogin)).to.include({ action: 'login', user_id: alice.id, failure_type: '' });
      expect(byId.get(ids.aliceFailed)).to.include({
        action: 'failedlogin',
        user_id: alice.id,
        failure_type: 'password_mismatch',
      });
      expect(byId.get(ids.nobodyFailed)).to.include({
        action: 'failedlogin',
        user_id: null,
        failure_type: 'username_not_found',
      });
      excludes(idsOf(logins), [ids.aliceCreated, ids.reportCreate]);
    });

    it('/history lists every kind of action by everyone to the site-wide key, newest first', async () => {
      const all = await list('/history');
      expect(idsOf(all)).to.include.members(Object.values(ids));
      const sorted = [...all].sort((a, b) => b.when.localeCompare(a.when) || b.id - a.id);
      expect(idsOf(all)).to.deep.equal(idsOf(sorted));
      const kinds = new Set(all.map((a) => a.action));
      for (const kind of ['user_create', 'api_key_create', 'group_create', 'permission_create', 'login'])
        expect(kinds, kind).to.include(kind);
    });

    it('answers 400 for a malformed or missing path', async () => {
      expectError(await get('/history/files/projects/../secret'), 400, 'bad-request/invalid-path');
      expectError(await get('/history/folders/a//b'), 400, 'bad-request/invalid-path');
      expectError(await get('/history/files'), 400, 'bad-request/request-params-required');
      expectError(await get('/history/users/abc'), 404, 'not-found/user-not-found');
    });
  });

  describe('the Action resource', () => {
    it("has exactly SPEC's fields with their types; targets is an array, when a date-time", async () => {
      const all = await list('/history');
      for (const a of all) {
        expect(Object.keys(a).sort(), JSON.stringify(a)).to.deep.equal([...ACTION_FIELDS].sort());
        expect(Number.isInteger(a.id)).to.equal(true);
        expect(a.when).to.match(ISO);
        expect(Date.now() - Date.parse(a.when)).to.be.within(0, 24 * HOUR);
        expect(a.targets).to.be.an('array');
        for (const f of [
          'path',
          'destination',
          'source',
          'display',
          'ip',
          'username',
          'action',
          'failure_type',
        ])
          expect(a[f as keyof Action], f).to.be.a('string');
        expect(a.user_id === null || Number.isInteger(a.user_id)).to.equal(true);
      }
      const created = all.find((a) => a.id === ids.aliceCreated)!;
      expect(created).to.include({
        action: 'user_create',
        interface: 'restapi',
        user_id: null,
        ip: '127.0.0.1',
      });
      expect(created.targets).to.deep.equal([{ type: 'user', id: alice.id, username: alice.username }]);
      expect(created.display).to.include(alice.username);
      const move = all.find((a) => a.id === ids.reportMove)!;
      expect(move).to.include({
        path: 'projects/alpha/report.txt',
        source: 'projects/alpha/report.txt',
        destination: 'projects/beta/report.txt',
        username: bob.username,
        interface: 'restapi',
      });
      expect(move.targets).to.deep.equal([{ type: 'file', path: 'projects/beta/report.txt' }]);
      const loginAction = all.find((a) => a.id === ids.aliceLogin)!;
      expect(loginAction).to.include({ interface: 'restapi', username: alice.username, path: '' });
    });

    it('is typed in XML: integer, datetime, array and nil', async () => {
      const r = await get('/history/login.xml');
      expect(r.status, r.text).to.equal(200);
      expect(r.headers['content-type']).to.match(/^application\/xml/);
      const doc = parseXml(r.text);
      expect(doc.actions['@_type']).to.equal('array');
      const items = asList(doc.actions.action);
      const failed = items.find((a) => a.id['#text'] === String(ids.nobodyFailed));
      expect(failed, r.text).to.not.equal(undefined);
      expect(failed.id['@_type']).to.equal('integer');
      expect(failed.when['@_type']).to.equal('datetime');
      expect(failed.when['#text']).to.match(ISO);
      expect(failed.targets['@_type']).to.equal('array');
      expect(failed.user_id['@_nil']).to.equal('true');
      expect(failed.action).to.equal('failedlogin');
      expect(failed.failure_type).to.equal('username_not_found');
      const ok = items.find((a) => a.id['#text'] === String(ids.aliceLogin));
      expect(ok.user_id).to.deep.include({ '@_type': 'integer', '#text': String(alice.id) });
      const withTargets = parseXml((await get(`/history/users/${bob.id}.xml`)).text);
      const move = asList(withTargets.actions.action).find((a) => a.id['#text'] === String(ids.reportMove));
      expect(move.targets['@_type']).to.equal('array');
      expect(asList(move.targets.target)[0].path).to.equal('projects/beta/report.txt');
    });

    it('keeps .json/.xml in a /history/files path as part of the name; Accept picks the format', async () => {
      const id = await fileAction(alice, { action: 'create', path: 'docs/mé data.json' });
      const x = await get('/history/files/docs/m%C3%A9%20data.json', { ...site, Accept: 'application/xml' });
      expect(x.status, x.text).to.equal(200);
      expect(x.headers['content-type']).to.match(/^application\/xml/);
      const item = parseXml(x.text).actions.action;
      expect(item.id['#text']).to.equal(String(id));
      expect(item.path).to.equal('docs/mé data.json');
      expect(idsOf(await list('/history/files/docs/m%C3%A9%20data.json'))).to.deep.equal([id]);
      // On the other history endpoints the extension is the format, as everywhere else.
      const u = await get(`/history/users/${alice.id}.json`, { ...site, Accept: 'application/xml' });
      expect(u.headers['content-type']).to.match(/^application\/json/);
    });

    it('display=parent shows the folder the action happened in', async () => {
      const [a] = await list(`/history/files/projects/beta/notes.txt?display=parent`);
      expect(a!.display).to.equal('/projects/beta');
      const [b] = await list(`/history/files/projects/beta/notes.txt?display=full`);
      expect(b!.display).to.equal('');
      expectError(await get('/history/login?display=sideways'), 400, 'bad-request/request-params-invalid');
    });
  });

  describe('time', () => {
    it('shows only the last 24 hours, whatever start_at asks', async () => {
      const old = await fileAction(
        alice,
        { action: 'create', path: 'old/ancient.txt' },
        new Date(Date.now() - 25 * HOUR),
      );
      const fresh = await fileAction(alice, { action: 'update', path: 'old/ancient.txt' });
      expect(idsOf(await list('/history/files/old/ancient.txt'))).to.deep.equal([fresh]);
      const since = q({ start_at: new Date(Date.now() - 48 * HOUR).toISOString() });
      expect(idsOf(await list(`/history/files/old/ancient.txt${since}`))).to.deep.equal([fresh]);
      expect(idsOf(await list('/history'))).to.not.include(old);
      expect(idsOf(await list(`/history/users/${alice.id}`))).to.not.include(old);
      expect(idsOf(await list('/history/folders/old'))).to.deep.equal([fresh]);
    });

    it('start_at (inclusive) and end_at (exclusive) narrow the window; blank means none', async () => {
      const now = Date.now();
      const t3 = await fileAction(
        bob,
        { action: 'create', path: 'timeline/t.txt' },
        new Date(now - 3 * HOUR),
      );
      const t2 = await fileAction(
        bob,
        { action: 'update', path: 'timeline/t.txt' },
        new Date(now - 2 * HOUR),
      );
      const t1 = await fileAction(
        bob,
        { action: 'update', path: 'timeline/t.txt' },
        new Date(now - 1 * HOUR),
      );
      const at = (ms: number) => new Date(ms).toISOString();
      const path = '/history/files/timeline/t.txt';
      expect(idsOf(await list(path))).to.deep.equal([t1, t2, t3]);
      expect(idsOf(await list(`${path}${q({ start_at: at(now - 2.5 * HOUR) })}`))).to.deep.equal([t1, t2]);
      expect(idsOf(await list(`${path}${q({ end_at: at(now - 1.5 * HOUR) })}`))).to.deep.equal([t2, t3]);
      expect(
        idsOf(await list(`${path}${q({ start_at: at(now - 2.5 * HOUR), end_at: at(now - 1.5 * HOUR) })}`)),
      ).to.deep.equal([t2]);
      expect(idsOf(await list(`${path}${q({ start_at: at(now - 2 * HOUR) })}`))).to.deep.equal([t1, t2]);
      expect(idsOf(await list(`${path}${q({ end_at: at(now - 2 * HOUR) })}`))).to.deep.equal([t3]);
      expect(idsOf(await list(`${path}?start_at=&end_at=`))).to.deep.equal([t1, t2, t3]);
      // An offset is honoured: the same instant written in another zone.
      const plusTwo = new Date(now - 2.5 * HOUR + 2 * HOUR).toISOString().replace('Z', '+02:00');
      expect(idsOf(await list(`${path}${q({ start_at: plusTwo })}`))).to.deep.equal([t1, t2]);
    });

    it('answers 400 datetime-parse for a start_at or end_at that is not an ISO 8601 date-time', async () => {
      for (const bad of ['yesterday', '2024-02-30T00:00:00Z', '2024-01-01T25:00:00Z', '1700000000'])
        expectError(await get(`/history/login${q({ start_at: bad })}`), 400, 'bad-request/datetime-parse');
      expectError(
        await get(`/history/files/x.txt${q({ end_at: 'soon' })}`),
        400,
        'bad-request/datetime-parse',
      );
      expectError(await get('/history?start_at[x]=1'), 400, 'bad-request/datetime-parse');
    });
  });

  describe('sort_by', () => {
    let a: number;
    let b: number;
    let c: number;
    before(async () => {
      a = await fileAction(bob, { action: 'create', path: 'sorting/a.txt' }, new Date(Date.now() - 3_000));
      b = await fileAction(alice, { action: 'create', path: 'sorting/b.txt' }, new Date(Date.now() - 2_000));
      c = await fileAction(bob, { action: 'create', path: 'sorting/c.txt' }, new Date(Date.now() - 1_000));
    });
    const sorted = (sort: string) => list(`/history?filter_prefix[path]=sorting/${sort}`).then(idsOf);

    it('defaults to created_at desc', async () => {
      expect(await sorted('')).to.deep.equal([c, b, a]);
      expect(await sorted('&sort_by[created_at]=desc')).to.deep.equal([c, b, a]);
      expect(await sorted('&sort_by[created_at]=asc')).to.deep.equal([a, b, c]);
    });

    it('sorts by user_id, newest first within a user', async () => {
      expect(bob.id).to.be.greaterThan(alice.id);
      expect(await sorted('&sort_by[user_id]=desc')).to.deep.equal([c, a, b]);
      expect(await sorted('&sort_by[user_id]=asc')).to.deep.equal([b, c, a]);
      const mine = await list(`/history/users/${bob.id}?sort_by[user_id]=desc`);
      expect(mine.every((x) => x.user_id === bob.id)).to.equal(true);
    });

    it('sorts /history by path and folder', async () => {
      expect(await sorted('&sort_by[path]=asc')).to.deep.equal([a, b, c]);
      expect(await sorted('&sort_by[path]=desc')).to.deep.equal([c, b, a]);
      const byFolder = await list('/history?filter_prefix[path]=projects/&sort_by[folder]=asc');
      const folders = byFolder.map((x) => x.path.slice(0, x.path.lastIndexOf('/')));
      expect(folders).to.deep.equal([...folders].sort());
    });

    it('refuses a field the endpoint does not sort by, or a direction other than asc/desc', async () => {
      expectError(await get('/history/login?sort_by[path]=asc'), 400, 'bad-request/invalid-filter-field');
      expectError(
        await get(`/history/users/${bob.id}?sort_by[folder]=asc`),
        400,
        'bad-request/invalid-filter-field',
      );
      expectError(await get('/history?sort_by[when]=asc'), 400, 'bad-request/invalid-filter-field');
      expectError(await get('/history?sort_by[user_id]=up'), 400, 'bad-request/invalid-filter-param-value');
      expectError(await get('/history?sort_by=user_id'), 400, 'bad-request/invalid-filter-param');
    });
  });

  describe('filters on /history', () => {
    it("filter[user_id] keeps one user's actions", async () => {
      const bobs = await list(`/history?filter[user_id]=${bob.id}`);
      expect(idsOf(bobs)).to.include.members([ids.reportUpdate, ids.reportMove, ids.betaNotes]);
      expect(bobs.every((x) => x.user_id === bob.id)).to.equal(true);
    });

    it('filter[folder] keeps actions directly in that folder; `/` is the top level', async () => {
      const alpha = idsOf(await list('/history?filter[folder]=projects/alpha'));
      expect(alpha).to.have.members([ids.reportCreate, ids.reportUpdate, ids.reportMove]);
      expect(idsOf(await list('/history?filter[folder]=projects'))).to.include(ids.permission);
      const topLevel = await fileAction(alice, { action: 'create', path: 'top.txt' });
      const top = idsOf(await list('/history?filter[folder]=/'));
      expect(top).to.include(topLevel);
      excludes(top, [ids.aliceLogin, ids.reportCreate]);
      expect(idsOf(await list('/history?filter[folder]=/projects/alpha/'))).to.have.members(alpha);
    });

    it('filter[path] is an exact path', async () => {
      expect(idsOf(await list('/history?filter[path]=projects/alpha'))).to.deep.equal([ids.permission]);
    });

    it('filter_prefix[path] is a case-sensitive prefix', async () => {
      const pre = idsOf(await list('/history?filter_prefix[path]=projects/alpha'));
      expect(pre).to.include.members([ids.permission, ids.reportCreate, ids.deep, ids.alphabet]);
      excludes(pre, [ids.upper, ids.betaNotes, ids.aliceLogin]);
      expect(idsOf(await list('/history?filter_prefix[path]=Projects/'))).to.deep.equal([ids.upper]);
      expect(await list('/history?filter_prefix[path]=PROJECTS')).to.deep.equal([]);
    });

    it('combines filters and refuses unknown fields', async () => {
      const both = idsOf(await list(`/history?filter[user_id]=${alice.id}&filter_prefix[path]=projects/`));
      expect(both).to.have.members([ids.reportCreate, ids.deep]);
      expectError(await get('/history?filter[ip]=127.0.0.1'), 400, 'bad-request/invalid-filter-field');
      expectError(await get('/history?filter_prefix[folder]=a'), 400, 'bad-request/invalid-filter-field');
      expectError(await get('/history?filter[user_id]=bob'), 400, 'bad-request/invalid-filter-param-value');
      expectError(await get('/history?filter=projects'), 400, 'bad-request/invalid-filter-param');
    });
  });

  describe('filter[interface] and filter[action] on /history (extensions)', () => {
    let overSftp: number[];
    let overFtp: number;
    before(async () => {
      overSftp = [
        await fileAction(alice, { action: 'create', path: 'iface/a.txt', interface: 'sftp' }),
        await fileAction(bob, { action: 'update', path: 'iface/a.txt', interface: 'sftp' }),
        await fileAction(alice, { action: 'destroy', path: 'iface/b.txt', interface: 'sftp' }),
      ];
      overFtp = await fileAction(alice, { action: 'create', path: 'iface/c.txt', interface: 'ftp' });
    });

    it('filter[interface] keeps the actions made over that interface only', async () => {
      const sftp = await list('/history?filter[interface]=sftp');
      expect(idsOf(sftp)).to.have.members(overSftp);
      expect(idsOf(await list('/history?filter[interface]=ftp'))).to.deep.equal([overFtp]);
      const rest = await list('/history?filter[interface]=restapi&per_page=1000');
      expect(idsOf(rest)).to.include.members([ids.aliceLogin, ids.reportCreate]);
      excludes(idsOf(rest), [...overSftp, overFtp]);
      expect(await list('/history?filter[interface]=dav')).to.deep.equal([]);
    });

    it('filter[action] keeps one kind of action; logins and failed logins apart', async () => {
      const logins = await list('/history?filter[action]=login&per_page=1000');
      expect(idsOf(logins)).to.include(ids.aliceLogin);
      expect(logins.every((a) => a.action === 'login')).to.equal(true);
      const failed = idsOf(await list('/history?filter[action]=failedlogin&per_page=1000'));
      expect(failed).to.include.members([ids.aliceFailed, ids.nobodyFailed]);
      excludes(failed, [ids.aliceLogin]);
      expect(idsOf(await list('/history?filter[action]=permission_create'))).to.deep.equal([ids.permission]);
      expect(idsOf(await list('/history?filter[action]=move'))).to.deep.equal([ids.reportMove]);
    });

    it('combines with the other filters, dates and paging', async () => {
      const mine = `/history?filter[interface]=sftp&filter[user_id]=${alice.id}`;
      expect(idsOf(await list(mine))).to.have.members([overSftp[0], overSftp[2]]);
      expect(idsOf(await list('/history?filter[interface]=sftp&filter[action]=update'))).to.deep.equal([
        overSftp[1],
      ]);
      expect(idsOf(await list('/history?filter[action]=create&filter_prefix[path]=iface/'))).to.have.members([
        overSftp[0],
        overFtp,
      ]);
      const future = new Date(Date.now() + HOUR).toISOString();
      expect(
        await list(`/history?filter[interface]=sftp&start_at=${encodeURIComponent(future)}`),
      ).to.deep.equal([]);
      const first = await get('/history?filter[interface]=sftp&per_page=2');
      expect(idsOf(first.json as Action[])).to.deep.equal([overSftp[2], overSftp[1]]);
      const cursor = String(first.headers['x-svc-cursor-next']);
      const second = await list(`/history?filter[interface]=sftp&per_page=2&cursor=${cursor}`);
      expect(idsOf(second)).to.deep.equal([overSftp[0]]);
      // The cursor names its selection: another interface's listing refuses it.
      expectError(
        await get(`/history?filter[interface]=ftp&per_page=2&cursor=${cursor}`),
        400,
        'bad-request/invalid-cursor',
      );
    });

    it('filter[username] is filter[user_id] by name; an unknown name is refused in words', async () => {
      const byName = idsOf(
        await list(`/history?filter[username]=${bob.username.toUpperCase()}&per_page=1000`),
      );
      expect(byName).to.have.members(idsOf(await list(`/history?filter[user_id]=${bob.id}&per_page=1000`)));
      expect(byName).to.include(overSftp[1]);
      const nobody = await get('/history?filter[username]=no-such-user-here');
      expectError(nobody, 400, 'bad-request/invalid-filter-param-value');
      expect(JSON.stringify(nobody.json)).to.include('There is no user named no-such-user-here');
      expectError(
        await get(`/history?filter[username]=${bob.username}&filter[user_id]=${bob.id}`),
        400,
        'bad-request/invalid-filter-combination',
      );
    });

    it("refuses values outside SPEC's lists, in words", async () => {
      const bad = await get('/history?filter[interface]=gopher');
      expectError(bad, 400, 'bad-request/invalid-filter-param-value');
      expect(JSON.stringify(bad.json)).to.include('filter[interface] must be one of web, ftp');
      expectError(await get('/history?filter[action]=LOGIN'), 400, 'bad-request/invalid-filter-param-value');
      expectError(
        await get('/history?filter[action]=login%27--'),
        400,
        'bad-request/invalid-filter-param-value',
      );
      expectError(
        await get('/history?filter[interface][]=sftp'),
        400,
        'bad-request/invalid-filter-param-value',
      );
    });

    it("stays site admins' only", async () => {
      expectError(
        await get('/history?filter[interface]=sftp', aliceKey),
        403,
        'not-authorized/site-admin-required',
      );
    });
  });

  describe('cursor pagination', () => {
    const path = '/history/files/paging/p.txt';
    let made: number[];
    before(async () => {
      made = [];
      for (let i = 0; i < 5; i++)
        made.push(await fileAction(alice, { action: 'update', path: 'paging/p.txt' }));
      made.reverse(); // newest first, the default order
    });

    it('pages 5 actions 2 at a time with X-Svc-Cursor-Next and X-Svc-Cursor-Prev', async () => {
      const r1 = await get(`${path}?per_page=2`);
      expect(r1.status, r1.text).to.equal(200);
      expect(idsOf(r1.json)).to.deep.equal(made.slice(0, 2));
      expect(r1.headers['x-svc-cursor-prev']).to.equal(undefined);
      const next1 = r1.headers['x-svc-cursor-next'] as string;
      expect(next1).to.match(/^2:/);

      // An action recorded meanwhile does not shift the pages of a listing already begun.
      const later = await fileAction(alice, { action: 'update', path: 'paging/p.txt' });

      const r2 = await get(`${path}${q({ cursor: next1, per_page: '2' })}`);
      expect(r2.status, r2.text).to.equal(200);
      expect(idsOf(r2.json)).to.deep.equal(made.slice(2, 4));
      const next2 = r2.headers['x-svc-cursor-next'] as string;
      const prev2 = r2.headers['x-svc-cursor-prev'] as string;
      expect(next2).to.match(/^3:/);
      expect(prev2).to.match(/^1:/);

      const r3 = await get(`${path}${q({ cursor: next2 })}`);
      expect(r3.status, r3.text).to.equal(200);
      expect(idsOf(r3.json)).to.deep.equal(made.slice(4));
      expect(r3.headers['x-svc-cursor-next']).to.equal(undefined);
      expect(r3.headers['x-svc-cursor-prev']).to.match(/^2:/);

      const back = await get(`${path}${q({ cursor: prev2 })}`);
      expect(idsOf(back.json)).to.deep.equal(made.slice(0, 2));

      // A new listing sees the new action.
      expect(idsOf(await list(`${path}?per_page=2`))).to.deep.equal([later, made[0]]);
    });

    it('pages by keyset under every numeric sort: forward to the end and back to the start', async () => {
      for (const sort of ['created_at', 'user_id']) {
        for (const direction of ['asc', 'desc']) {
          const sortBy = { [`sort_by[${sort}]`]: direction };
          const whole = idsOf(await list(`${path}${q({ per_page: '100', ...sortBy })}`));
          const pages: number[][] = [];
          let r = await get(`${path}${q({ per_page: '2', ...sortBy })}`);
          pages.push(idsOf(r.json));
          while (r.headers['x-svc-cursor-next']) {
            r = await get(`${path}${q({ cursor: r.headers['x-svc-cursor-next'] as string, ...sortBy })}`);
            expect(r.status, r.text).to.equal(200);
            pages.push(idsOf(r.json));
          }
          expect(pages.flat(), `${sort} ${direction}`).to.deep.equal(whole);
          for (let i = pages.length - 2; i >= 0; i--) {
            r = await get(`${path}${q({ cursor: r.headers['x-svc-cursor-prev'] as string, ...sortBy })}`);
            expect(idsOf(r.json), `${sort} ${direction} back to page ${i + 1}`).to.deep.equal(pages[i]);
          }
          expect(r.headers['x-svc-cursor-prev']).to.equal(undefined);
        }
      }
    });

    it('pages a folder that is a sliver of a busy window the same as one that is not', async () => {
      // 6,000 actions, every 300th in sliver/ (more than the 5,000 newest a folder listing reads
      // in time order before it looks the rest up by the path indexes). An hour back, so they do not
      // push the other tests' Actions off the first page of /history, however slow the run.
      const now = Date.now() - 3_600_000;
      const sliver: number[] = [];
      const sliverAt = new Map<number, number>();
      for (let i = 0; i < 6000; i += 500) {
        await dbOf(gw.core).work(async (em) => {
          for (let j = i; j < i + 500; j++) {
            const path = j % 300 === 0 ? `sliver/d${j % 7}/f${j}.txt` : `busy/f${j}.txt`;
            const r = await em.insert(ActionEntity, {
              when: new Date(now - 6000 + j),
              action: 'create',
              path,
              interface: 'restapi',
            });
            if (path.startsWith('sliver/')) {
              sliver.push(Number(r.identifiers[0]!.id));
              sliverAt.set(Number(r.identifiers[0]!.id), now - 6000 + j);
            }
          }
        });
      }
      for (const direction of ['desc', 'asc']) {
        const expected = direction === 'desc' ? [...sliver].reverse() : sliver;
        for (const perPage of ['20', '7']) {
          const sortBy = { 'sort_by[created_at]': direction };
          const got: number[] = [];
          let r = await get(`/history/folders/sliver${q({ per_page: perPage, ...sortBy })}`);
          got.push(...idsOf(r.json));
          while (r.headers['x-svc-cursor-next']) {
            const cursor = r.headers['x-svc-cursor-next'] as string;
            r = await get(`/history/folders/sliver${q({ cursor, ...sortBy })}`);
            got.push(...idsOf(r.json));
          }
          expect(got, `${direction}, ${perPage} a page`).to.deep.equal(expected);
        }
        // start_at and end_at narrow it the same way, still more than the 5,000 read in time order.
        const [from, to] = [now - 6000 + 500, now - 6000 + 5800];
        const range = {
          start_at: new Date(from).toISOString(),
          end_at: new Date(to).toISOString(),
          'sort_by[created_at]': direction,
          per_page: '4',
        };
        const got: number[] = [];
        let r = await get(`/history/folders/sliver${q(range)}`);
        got.push(...idsOf(r.json));
        while (r.headers['x-svc-cursor-next']) {
          const cursor = r.headers['x-svc-cursor-next'] as string;
          r = await get(`/history/folders/sliver${q({ ...range, cursor })}`);
          got.push(...idsOf(r.json));
        }
        const within = expected.filter((id) => sliverAt.get(id)! >= from && sliverAt.get(id)! < to);
        expect(within).to.have.length(18);
        expect(got, `${direction}, start_at and end_at`).to.deep.equal(within);
      }
    });

    it('refuses a cursor under another sort_by, on another listing, or forged', async () => {
      const r1 = await get(`${path}?per_page=2`);
      const next = r1.headers['x-svc-cursor-next'] as string;
      expectError(
        await get(`${path}${q({ cursor: next, 'sort_by[user_id]': 'desc' })}`),
        400,
        'bad-request/invalid-cursor-type-for-sort',
      );
      expectError(
        await get(`${path}${q({ cursor: next, 'sort_by[created_at]': 'asc' })}`),
        400,
        'bad-request/invalid-cursor-type-for-sort',
      );
      // The default sort is created_at desc, so saying so keeps the cursor good.
      const same = await get(`${path}${q({ cursor: next, 'sort_by[created_at]': 'desc' })}`);
      expect(same.status, same.text).to.equal(200);
      expectError(
        await get(`/history/files/paging/other.txt${q({ cursor: next })}`),
        400,
        'bad-request/invalid-cursor',
      );
      expectError(await get(`/history/login${q({ cursor: next })}`), 400, 'bad-request/invalid-cursor');
      expectError(
        await get(`${path}${q({ cursor: `2:${'A'.repeat(60)}` })}`),
        400,
        'bad-request/invalid-cursor',
      );
      expectError(await get(`${path}?per_page=10001`), 400, 'bad-request/request-params-invalid');
      expectError(await get(`${path}?per_page=2&per_page=3`), 400, 'bad-request/request-params-invalid');
      expectError(await get(`${path}?cursor[x]=1`), 400, 'bad-request/invalid-cursor');
    });
  });

  describe('access', () => {
    it("a regular user's key or session gets 403 on /history, /history/login and another user's history", async () => {
      for (const who of [aliceKey, aliceSession]) {
        expectError(await get('/history', who), 403, 'not-authorized/site-admin-required');
        expectError(await get('/history/login', who), 403, 'not-authorized/site-admin-required');
        expectError(await get(`/history/users/${bob.id}`, who), 403, 'not-authorized/site-admin-required');
      }
    });

    it('a regular user sees their own user history', async () => {
      for (const who of [aliceKey, aliceSession]) {
        const mine = await list(`/history/users/${alice.id}`, who);
        expect(idsOf(mine)).to.include.members([ids.aliceLogin, ids.reportCreate]);
        expect(mine.every((a) => a.user_id === alice.id)).to.equal(true);
      }
    });

    it('file and folder history need a permission on the path (history-permission-required)', async () => {
      // alice has readonly on projects/alpha; bob has nothing.
      expect(idsOf(await list('/history/folders/projects/alpha', aliceKey))).to.include(ids.reportUpdate);
      expect(idsOf(await list('/history/folders/projects/alpha/deep', aliceSession))).to.deep.equal([
        ids.deep,
      ]);
      expect(idsOf(await list('/history/files/projects/alpha/report.txt', aliceKey))).to.have.length(3);
      const refused = 'not-authorized/history-permission-required';
      expectError(await get('/history/folders/projects/beta', aliceKey), 403, refused);
      expectError(await get('/history/folders/projects', aliceKey), 403, refused);
      expectError(await get('/history/folders', aliceKey), 403, refused);
      expectError(await get('/history/files/projects/alphabet/x.txt', aliceKey), 403, refused);
      expectError(await get('/history/folders/projects/alpha', bobKey), 403, refused);
    });

    it('site admins (session or key) and the site-wide key see everything', async () => {
      for (const who of [site, adminSession]) {
        expect(idsOf(await list('/history', who))).to.include.members([ids.aliceLogin, ids.reportMove]);
        expect(idsOf(await list('/history/login', who))).to.include(ids.aliceFailed);
        expect(idsOf(await list(`/history/users/${alice.id}`, who))).to.include(ids.aliceLogin);
        expect(idsOf(await list('/history/folders/projects/beta', who))).to.include(ids.betaNotes);
      }
    });

    it('answers 401 without credentials', async () => {
      for (const path of ['/history', '/history/login', '/history/files/a.txt', `/history/users/${alice.id}`])
        expect((await gw.request('GET', `${API}${path}`)).status, path).to.equal(401);
    });
  });
});
