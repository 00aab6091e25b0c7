/**
 * Bad input, one class per test: each answer is SPEC's error object with the right type and
 * status (DESIGN.md "Error statuses"), never a 500, never a stack trace, and nothing half-saved
 * (checked with a follow-up GET).
 */
import { expect } from 'chai';
import { startTestGateway, type TestGateway } from '../../helpers/gateway.ts';
import { API, createUser, expectError, keyAuth, unique } from './client.ts';

const MAX_BODY = 1000;

describe('REST errors', () => {
  let gw: TestGateway;
  let site: Record<string, string>;
  before(async () => {
    gw = await startTestGateway();
    site = keyAuth(gw.siteKey);
  });
  after(async () => gw.stop());

  const usernames = async (): Promise<string[]> => {
    const r = await gw.request('GET', `${API}/users`, { headers: site });
    expect(r.status, r.text).to.equal(200);
    return r.json.map((u: { username: string }) => u.username);
  };
  const postUser = (body: string, contentType: string) =>
    gw.request('POST', `${API}/users`, { headers: { ...site, 'Content-Type': contentType }, body });
  const show = async (path: string) => {
    const r = await gw.request('GET', `${API}${path}`, { headers: site });
    expect(r.status, r.text).to.equal(200);
    return r.json;
  };

  it('malformed JSON → 400 bad-request/invalid-body, nothing created', async () => {
    const username = unique('badjson');
    for (const body of [
      `{"username":"${username}","password":"long-enough-pw"`,
      `{"username":"${username}",}`,
      `{username: "${username}"}`,
      `{"username":"${username}"} trailing`,
    ]) {
      expectError(await postUser(body, 'application/json'), 400, 'bad-request/invalid-body');
    }
    expect(await usernames()).to.not.include(username);
  });

  it('malformed XML → 400 bad-request/invalid-body, nothing created', async () => {
    const username = unique('badxml');
    for (const body of [
      `<user><username>${username}</username><password>long-enough-pw</password>`,
      `<user><username>${username}</password></user>`,
      `<user><username>${username}</username></user><user/>`,
      `<user><username a="1" a="2">${username}</username><password>long-enough-pw</password></user>`,
      'not xml at all',
    ]) {
      expectError(await postUser(body, 'application/xml'), 400, 'bad-request/invalid-body');
    }
    expect(await usernames()).to.not.include(username);
  });

  it('XML entity expansion is refused or bounded, never a 500', async () => {
    const username = unique('laughs');
    const doctype =
      '<!DOCTYPE user [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">' +
      '<!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;"><!ENTITY d "&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;">' +
      '<!ENTITY e "&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;"><!ENTITY f "&e;&e;&e;&e;&e;&e;&e;&e;&e;&e;">]>';
    const started = Date.now();
    const r = await postUser(
      `${doctype}<user><username>${username}</username><password>long-enough-pw</password><notes>&f;&f;&f;&f;&f;&f;&f;&f;&f;&f;</notes></user>`,
      'application/xml',
    );
    expect(Date.now() - started).to.be.below(5000);
    expect(r.text.length).to.be.below(20_000);
    if (r.status === 201) {
      // Accepted without expanding the entities: what was stored is small.
      const shown = await show(`/users/${r.json.id}`);
      expect(shown.notes.length).to.be.below(1000);
    } else {
      expectError(r, 400, 'bad-request/invalid-body');
      expect(await usernames()).to.not.include(username);
    }
  });

  it('a JSON array, string, number or null body → 400 bad-request/invalid-body', async () => {
    const username = unique('notobject');
    for (const body of [
      `[{"username":"${username}","password":"long-enough-pw"}]`,
      '"hello"',
      '42',
      'null',
      'true',
    ]) {
      expectError(await postUser(body, 'application/json'), 400, 'bad-request/invalid-body');
    }
    expect(await usernames()).to.not.include(username);
  });

  describe(`with api.max_body_bytes ${MAX_BODY}`, () => {
    let small: TestGateway;
    before(async () => {
      small = await startTestGateway({ api: { max_body_bytes: MAX_BODY } });
    });
    after(async () => small.stop());

    it(`a body over api.max_body_bytes → 400 bad-request/invalid-body`, async () => {
      const h = keyAuth(small.siteKey);
      const post = (body: string, type: string) =>
        small.request('POST', `${API}/users`, { headers: { ...h, 'Content-Type': type }, body });
      const username = unique('big');
      const json = JSON.stringify({ username, password: 'long-enough-pw', notes: 'n'.repeat(MAX_BODY) });
      expectError(await post(json, 'application/json'), 400, 'bad-request/invalid-body');
      const xml = `<user><username>${username}</username><password>long-enough-pw</password><notes>${'n'.repeat(MAX_BODY)}</notes></user>`;
      expectError(await post(xml, 'application/xml'), 400, 'bad-request/invalid-body');
      const form = `username=${username}&password=long-enough-pw&notes=${'n'.repeat(MAX_BODY)}`;
      expectError(await post(form, 'application/x-www-form-urlencoded'), 400, 'bad-request/invalid-body');
      const list = await small.request('GET', `${API}/users`, { headers: h });
      expect(list.json.map((u: { username: string }) => u.username)).to.not.include(username);
      // Just under the limit is fine, and the server still answers.
      const fits = JSON.stringify({
        username,
        password: 'long-enough-pw',
        notes: 'n'.repeat(MAX_BODY - 100),
      });
      expect(Buffer.byteLength(fits)).to.be.below(MAX_BODY);
      const ok = await post(fits, 'application/json');
      expect(ok.status, ok.text).to.equal(201);
    });
  });

  it('an unsupported Content-Type → 415 bad-request/unsupported-media-type', async () => {
    const username = unique('plain');
    const json = JSON.stringify({ username, password: 'long-enough-pw' });
    for (const type of ['text/plain', 'application/octet-stream', 'multipart/form-data; boundary=x']) {
      expectError(await postUser(json, type), 415, 'bad-request/unsupported-media-type');
    }
    const noType = await gw.request('POST', `${API}/users`, { headers: site, body: Buffer.from(json) });
    expectError(noType, 415, 'bad-request/unsupported-media-type');
    expect(await usernames()).to.not.include(username);
  });

  it('wrong field types → 422 processing-failure/model-save-error with errors, model_errors, model_error_keys', async () => {
    const username = unique('typed');
    const r = await gw.request('POST', `${API}/users`, {
      headers: site,
      body: { username, password: 'long-enough-pw', ftp_permission: 'maybe' },
    });
    expectError(r, 422, 'processing-failure/model-save-error');
    expect(r.json.errors).to.be.an('array').that.is.not.empty;
    for (const e of r.json.errors) expect(e).to.be.a('string');
    expect(r.json.model_errors).to.have.all.keys('ftp_permission');
    expect(r.json.model_errors.ftp_permission).to.be.an('array').that.is.not.empty;
    expect(r.json.model_error_keys).to.have.all.keys('ftp_permission');
    expect(r.json.model_error_keys.ftp_permission).to.be.an('array').that.is.not.empty;

    const r2 = await gw.request('POST', `${API}/users`, {
      headers: site,
      body: { username: {}, password: ['long-enough-pw'], self_managed: 3, group_ids: 'one,two' },
    });
    expectError(r2, 422, 'processing-failure/model-save-error');
    expect(r2.json.model_errors).to.include.all.keys('username', 'password', 'self_managed', 'group_ids');
    expect(r2.json.errors).to.have.length.of.at.least(4);
    expect(await usernames()).to.not.include(username);

    // On update too, leaving the user as it was.
    const u = await createUser(gw, { name: 'Same' });
    const before = await show(`/users/${u.id}`);
    const put = await gw.request('PUT', `${API}/users/${u.id}`, {
      headers: site,
      body: { name: 'Changed', web_permission: 'perhaps' },
    });
    expectError(put, 422, 'processing-failure/model-save-error');
    expect(put.json.model_errors).to.have.all.keys('web_permission');
    expect(await show(`/users/${u.id}`)).to.deep.equal(before);
  });

  it('a missing username or password on create → 422', async () => {
    const r = await gw.request('POST', `${API}/users`, { headers: site, body: { name: 'No Username' } });
    expectError(r, 422, 'processing-failure/model-save-error');
    expect(r.json.model_errors).to.include.all.keys('username', 'password');
    const username = unique('nopw');
    const r2 = await gw.request('POST', `${API}/users`, { headers: site, body: { username } });
    expectError(r2, 422, 'processing-failure/model-save-error');
    expect(r2.json.model_errors).to.have.all.keys('password');
    expect(await usernames()).to.not.include(username);
  });

  describe('overlong strings (SPEC Limits) → 422, at the limit → accepted', () => {
    const userCases: [string, (n: number) => string, number][] = [
      ['username', (n) => unique('').padEnd(n, 'u'), 50],
      ['name', (n) => 'n'.repeat(n), 50],
      ['email', (n) => `${'e'.repeat(n - '@example.com'.length)}@example.com`, 50],
      ['user_root', (n) => `${'r'.repeat(n - 1)}/`, 250],
    ];
    for (const [field, make, limit] of userCases) {
      it(`user ${field}: ${limit + 1} characters → 422, ${limit} → 201`, async () => {
        const over = make(limit + 1);
        expect(over).to.have.length(limit + 1);
        const body = { username: unique('lim'), password: 'long-enough-pw', [field]: over };
        const r = await gw.request('POST', `${API}/users`, { headers: site, body });
        expectError(r, 422, 'processing-failure/model-save-error');
        expect(r.json.model_errors).to.have.all.keys(field);
        expect(await usernames()).to.not.include(body.username);

        const at = make(limit);
        expect(at).to.have.length(limit);
        const okBody = { username: unique('lim'), password: 'long-enough-pw', [field]: at };
        const ok = await gw.request('POST', `${API}/users`, { headers: site, body: okBody });
        expect(ok.status, ok.text).to.equal(201);
        expect(ok.json[field]).to.equal(at);

        // And on update, leaving the user unchanged.
        const before = await show(`/users/${ok.json.id}`);
        const put = await gw.request('PUT', `${API}/users/${ok.json.id}`, {
          headers: site,
          body: { [field]: make(limit + 1) },
        });
        expectError(put, 422, 'processing-failure/model-save-error');
        expect(await show(`/users/${ok.json.id}`)).to.deep.equal(before);
      });
    }

    it('group name: 51 characters → 422, 50 → 201', async () => {
      const over = unique('g').padEnd(51, 'g');
      expectError(
        await gw.request('POST', `${API}/groups`, { headers: site, body: { name: over } }),
        422,
        'processing-failure/model-save-error',
      );
      const groups = (await show('/groups')) as { name: string }[];
      expect(groups.map((g) => g.name)).to.not.include(over);
      const at = unique('g').padEnd(50, 'g');
      const ok = await gw.request('POST', `${API}/groups`, { headers: site, body: { name: at } });
      expect(ok.status, ok.text).to.equal(201);
      expect(ok.json.name).to.equal(at);
      const put = await gw.request('PUT', `${API}/groups/${ok.json.id}`, {
        headers: site,
        body: { name: `${at}x` },
      });
      expectError(put, 422, 'processing-failure/model-save-error');
      expect((await show(`/groups/${ok.json.id}`)).name).to.equal(at);
    });

    it('permission and notification path: 5001 characters → 422, 5000 → 201', async () => {
      const u = await createUser(gw);
      const path = (n: number) => `${'p'.repeat(99)}/`.repeat(Math.ceil(n / 100)).slice(0, n);
      expect(path(5001)).to.have.length(5001);
      const at = `${path(4999)}q`;
      expect(at).to.have.length(5000);
      const over = `${at}q`;
      for (const resource of ['permissions', 'notifications']) {
        const extra = resource === 'permissions' ? { permission: 'readonly' } : {};
        const r = await gw.request('POST', `${API}/${resource}`, {
          headers: site,
          body: { path: over, user_id: u.id, ...extra },
        });
        expectError(r, 422, 'processing-failure/model-save-error');
        expect(r.json.model_errors).to.have.all.keys('path');
        const ok = await gw.request('POST', `${API}/${resource}`, {
          headers: site,
          body: { path: at, user_id: u.id, ...extra },
        });
        expect(ok.status, `${resource}: ${ok.text.slice(0, 300)}`).to.equal(201);
        expect(ok.json.path).to.equal(at);
        const list = (await show(`/${resource}`)) as { path: string; user_id: number }[];
        expect(list.filter((x) => x.user_id === u.id).map((x) => x.path.length)).to.deep.equal([5000]);
      }
    });
  });

  describe('unknown and malformed ids → 404', () => {
    const big = ['999999', '2147483648', '9999999999', '999999999999999', '99999999999999999999'];
    it('unknown user, group, API key, permission and notification ids', async () => {
      for (const id of big) {
        for (const [method, path, type] of [
          ['GET', `/users/${id}`, 'not-found/user-not-found'],
          ['PUT', `/users/${id}`, 'not-found/user-not-found'],
          ['DELETE', `/users/${id}`, 'not-found/user-not-found'],
          ['GET', `/groups/${id}`, 'not-found/group-not-found'],
          ['PUT', `/groups/${id}`, 'not-found/group-not-found'],
          ['DELETE', `/groups/${id}`, 'not-found/group-not-found'],
          ['GET', `/api_keys/${id}`, 'not-found/api-key-not-found'],
          ['DELETE', `/api_keys/${id}`, 'not-found/api-key-not-found'],
          ['DELETE', `/permissions/${id}`, 'not-found/permission-not-found'],
        ] as const) {
          const r = await gw.request(method, `${API}${path}`, {
            headers: site,
            ...(method === 'PUT' ? { body: { notes: 'x' } } : {}),
          });
          expectError(r, 404, type);
        }
        const n = await gw.request('DELETE', `${API}/notifications/${id}`, { headers: site });
        expect(n.status, `${id}: ${n.text}`).to.equal(404);
        expect(n.json.type).to.match(/^not-found\//);
      }
    });

    it('non-numeric ids', async () => {
      for (const id of ['abc', '-1', '1.5', '1e3', '0x10', '%20', '1%2F2', 'admin']) {
        for (const [path, type] of [
          [`/users/${id}`, 'not-found/user-not-found'],
          [`/groups/${id}`, 'not-found/group-not-found'],
          [`/api_keys/${id}`, 'not-found/api-key-not-found'],
        ] as const) {
          const r = await gw.request('GET', `${API}${path}`, { headers: site });
          expect(r.status, `${path}: ${r.text}`).to.equal(404);
          expect(r.json.type, path).to.be.oneOf([type, 'not-found/resource-not-found']);
          expectError(r, 404, r.json.type);
        }
        const d = await gw.request('DELETE', `${API}/permissions/${id}`, { headers: site });
        expect(d.status, d.text).to.equal(404);
      }
    });
  });

  it('ids beyond the id range in bodies and queries → 4xx (422 for fields), never a 500', async () => {
    const u = await createUser(gw);
    const g = await gw.request('POST', `${API}/groups`, { headers: site, body: { name: unique('range') } });
    const before = { user: await show(`/users/${u.id}`), group: await show(`/groups/${g.json.id}`) };
    for (const huge of [2147483648, 9999999999, '9999999999', 99999999999999]) {
      for (const [method, path, body] of [
        ['POST', '/permissions', { path: 'range', permission: 'full', user_id: huge }],
        ['POST', '/permissions', { path: 'range', permission: 'full', group_id: huge }],
        ['POST', '/notifications', { path: 'range', user_id: huge }],
        ['POST', '/api_keys', { user_id: huge }],
        ['PUT', `/users/${u.id}`, { group_ids: String(huge) }],
        ['PUT', `/users/${u.id}`, { group_ids: [huge] }],
        ['PUT', `/groups/${g.json.id}`, { user_ids: `${u.id},${huge}` }],
      ] as const) {
        const r = await gw.request(method, `${API}${path}`, { headers: site, body });
        expectError(r, 422, 'processing-failure/model-save-error');
      }
      for (const q of [`user_id=${huge}`, `filter[user_id]=${huge}`]) {
        const path = q.startsWith('filter') ? '/permissions' : '/api_keys';
        const r = await gw.request('GET', `${API}${path}?${q}`, { headers: site });
        expect(r.status, `${path}?${q}: ${r.text}`).to.be.within(400, 499);
        expectError(r, r.status, r.json.type);
      }
    }
    expect(await show(`/users/${u.id}`)).to.deep.equal(before.user);
    expect(await show(`/groups/${g.json.id}`)).to.deep.equal(before.group);
  });

  it('a duplicate username → 422, case-insensitively, on create and on rename', async () => {
    const u = await createUser(gw, { name: 'Original' });
    for (const username of [u.username, u.username.toUpperCase()]) {
      const r = await gw.request('POST', `${API}/users`, {
        headers: site,
        body: { username, password: 'another-password', name: 'Impostor' },
      });
      expectError(r, 422, 'processing-failure/model-save-error');
      expect(r.json.model_errors).to.have.all.keys('username');
    }
    const all = (await show('/users')) as { username: string; name: string }[];
    expect(all.filter((x) => x.username.toLowerCase() === u.username.toLowerCase())).to.have.length(1);
    const other = await createUser(gw);
    const before = await show(`/users/${other.id}`);
    const rename = await gw.request('PUT', `${API}/users/${other.id}`, {
      headers: site,
      body: { username: u.username, name: 'Renamed' },
    });
    expectError(rename, 422, 'processing-failure/model-save-error');
    expect(await show(`/users/${other.id}`)).to.deep.equal(before);
    // The original's password still works (not overwritten).
    const login = await gw.request('POST', `${API}/sessions`, {
      body: { username: u.username, password: u.password },
    });
    expect(login.status, login.text).to.equal(200);
  });

  it('a duplicate group name → 422', async () => {
    const name = unique('dup');
    expect((await gw.request('POST', `${API}/groups`, { headers: site, body: { name } })).status).to.equal(
      201,
    );
    expectError(
      await gw.request('POST', `${API}/groups`, { headers: site, body: { name } }),
      422,
      'processing-failure/model-save-error',
    );
    const groups = (await show('/groups')) as { name: string }[];
    expect(groups.filter((g) => g.name === name)).to.have.length(1);
  });

  it('a bad cursor → 400 bad-request/invalid-cursor', async () => {
    for (let i = 0; i < 3; i++) await createUser(gw);
    for (let i = 0; i < 2; i++)
      await gw.request('POST', `${API}/groups`, { headers: site, body: { name: unique('c') } });
    const groups = await gw.request('GET', `${API}/groups?per_page=1`, { headers: site });
    const groupCursor = groups.headers['x-svc-cursor-next'] as string;
    expect(groupCursor).to.be.a('string');
    const users = await gw.request('GET', `${API}/users?per_page=1`, { headers: site });
    const userCursor = users.headers['x-svc-cursor-next'] as string;
    const [page, opaque] = [userCursor.split(':')[0], userCursor.split(':')[1]!];
    const flipped = `${opaque.slice(0, 10)}${opaque[10] === 'A' ? 'B' : 'A'}${opaque.slice(11)}`;
    for (const cursor of [
      'garbage',
      '2:garbage',
      `2:${'A'.repeat(60)}`,
      `${page}:${flipped}`,
      groupCursor,
      ':',
      '%00',
    ]) {
      const r = await gw.request('GET', `${API}/users?per_page=1&cursor=${encodeURIComponent(cursor)}`, {
        headers: site,
      });
      expectError(r, 400, 'bad-request/invalid-cursor');
    }
    // The real cursor works.
    const ok = await gw.request('GET', `${API}/users?per_page=1&cursor=${encodeURIComponent(userCursor)}`, {
      headers: site,
    });
    expect(ok.status, ok.text).to.equal(200);
  });

  it('per_page 0, 10001 or not an integer → 400', async () => {
    for (const perPage of ['0', '10001', '-1', '1.5', 'ten']) {
      const r = await gw.request('GET', `${API}/users?per_page=${perPage}`, { headers: site });
      expect(r.status, `${perPage}: ${r.text}`).to.equal(400);
      expectError(r, 400, r.json.type);
      expect(r.json.type).to.match(/^bad-request\//);
    }
    for (const perPage of ['1', '10000']) {
      const r = await gw.request('GET', `${API}/users?per_page=${perPage}`, { headers: site });
      expect(r.status, `${perPage}: ${r.text}`).to.equal(200);
    }
  });

  it('an unknown route → 404', async () => {
    for (const path of [
      `${API}/nothing-here`,
      `${API}/users/1/extra`,
      `${API}`,
      '/api/rest/v2/users',
      '/nothing',
    ]) {
      const r = await gw.request('GET', path, { headers: site });
      expect(r.status, `${path}: ${r.text}`).to.equal(404);
      expect(r.json?.type ?? r.text, path).to.match(/not-found/);
      expectNo500(r);
    }
  });

  it('a wrong method → 405 bad-request/method-not-allowed with Allow', async () => {
    for (const [method, path] of [
      ['PATCH', '/sessions'],
      ['GET', '/sessions'],
      ['PUT', '/sessions'],
      ['DELETE', '/users'],
      ['PUT', '/users'],
      ['POST', '/users/1'],
      ['PUT', '/permissions/1'],
    ] as const) {
      const r = await gw.request(method, `${API}${path}`, { headers: site });
      expectError(r, 405, 'bad-request/method-not-allowed');
      // RFC 9110 §15.5.6: a 405 response MUST carry Allow.
      expect(r.headers.allow, `${method} ${path}`).to.be.a('string').and.not.equal('');
      expect(r.headers.allow).to.not.include(method);
    }
  });

  it('malformed percent-encoding in the path → 400, not 500', async () => {
    for (const path of [`${API}/users/%E0%A4%A`, `${API}/users/%`, `${API}/users/%ZZ`, `${API}/%C0%AF`]) {
      const r = await gw.request('GET', path, { headers: site });
      expect(r.status, `${path}: ${r.text}`).to.equal(400);
      expectError(r, 400, r.json.type);
      expect(r.json.type).to.match(/^bad-request\//);
    }
  });
});

function expectNo500(r: { status: number; text: string }): void {
  expect(r.status).to.be.below(500);
  expect(r.text).to.not.match(/\n\s+at\s/);
}
