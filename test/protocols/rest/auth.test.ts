/**
 * SPEC "Authentication" over real HTTPS: API keys (header and HTTP Basic), sessions (header and
 * cookie), logout, the login gate's failures (wrong password, lockout, allowed_ips) and the
 * login Actions DESIGN.md asks for.
 */
import { expect } from 'chai';
import type { FindOptionsWhere } from 'typeorm';
import { ActionEntity, SessionEntity, type ActionRow } from '../../../src/db/entities.ts';
import { startTestGateway, type TestGateway } from '../../helpers/gateway.ts';
import {
  API,
  basicAuth,
  createKey,
  createUser,
  expectError,
  keyAuth,
  login,
  sessionAuth,
  SPEC_ERROR_FIELDS,
  unique,
} from './client.ts';
import { dbOf } from '../../helpers/internals.ts';

describe('REST authentication', () => {
  let gw: TestGateway;
  before(async () => {
    gw = await startTestGateway();
  });
  after(async () => gw.stop());

  const actions = (where: FindOptionsWhere<ActionRow>) =>
    dbOf(gw.core).read((em) => em.find(ActionEntity, { where, order: { id: 'ASC' } }));

  describe('API keys', () => {
    it('accepts the key in X-SvcAPI-Key', async () => {
      const r = await gw.request('GET', `${API}/users`, { headers: keyAuth(gw.siteKey) });
      expect(r.status, r.text).to.equal(200);
      expect(r.json).to.be.an('array');
      expect(r.json.map((u: { username: string }) => u.username)).to.include('admin');
    });

    it('accepts the key as the HTTP Basic username with any password, or none', async () => {
      for (const password of ['x', 'anything-at-all', '']) {
        const r = await gw.request('GET', `${API}/users`, { headers: basicAuth(gw.siteKey, password) });
        expect(r.status, `password ${JSON.stringify(password)}: ${r.text}`).to.equal(200);
        expect(r.json).to.be.an('array');
      }
    });

    it("accepts a user's key and answers as that user", async () => {
      const user = await createUser(gw);
      const { key } = await createKey(gw, user.id);
      const r = await gw.request('GET', `${API}/users/${user.id}`, { headers: keyAuth(key) });
      expect(r.status, r.text).to.equal(200);
      expect(r.json.username).to.equal(user.username);
    });

    it('refuses a bogus key with 401, in the header or by Basic', async () => {
      const bogus = ['bogus', 'f'.repeat(64), `${gw.siteKey.slice(0, -1)}0`];
      for (const key of bogus) {
        if (key === gw.siteKey) continue;
        const h = await gw.request('GET', `${API}/users`, { headers: keyAuth(key) });
        expect(h.status, `header ${key}: ${h.text}`).to.equal(401);
        expect(h.json.type).to.match(/^not-authenticated\//);
        expect(h.json).to.include.all.keys(...SPEC_ERROR_FIELDS);
        const b = await gw.request('GET', `${API}/users`, { headers: basicAuth(key) });
        expect(b.status, `basic ${key}: ${b.text}`).to.equal(401);
        expect(b.json.type).to.match(/^not-authenticated\//);
      }
    });

    it('refuses a deleted key', async () => {
      const user = await createUser(gw);
      const k = await createKey(gw, user.id);
      expect((await gw.request('GET', `${API}/api_key`, { headers: keyAuth(k.key) })).status).to.equal(200);
      const d = await gw.request('DELETE', `${API}/api_keys/${k.id}`, { headers: keyAuth(gw.siteKey) });
      expect(d.status, d.text).to.equal(200);
      const r = await gw.request('GET', `${API}/api_key`, { headers: keyAuth(k.key) });
      expect(r.status, r.text).to.equal(401);
    });

    it('refuses an expired key', async () => {
      const user = await createUser(gw);
      const { key } = await createKey(gw, user.id, {
        expires_at: new Date(Date.now() - 60_000).toISOString(),
      });
      const r = await gw.request('GET', `${API}/api_key`, { headers: keyAuth(key) });
      expect(r.status, r.text).to.equal(401);
    });

    it('records no login Action for API-key requests', async () => {
      const user = await createUser(gw);
      const { key } = await createKey(gw, user.id);
      const before = (await actions({ action: 'login' })).length;
      for (const headers of [keyAuth(key), basicAuth(key), keyAuth(gw.siteKey), basicAuth(gw.siteKey)]) {
        const r = await gw.request('GET', `${API}/api_key`, { headers });
        expect(r.status, r.text).to.equal(200);
      }
      expect(await actions({ action: 'login' })).to.have.length(before);
      expect(await actions({ user_id: user.id, action: 'login' })).to.have.length(0);
    });
  });

  describe('sessions', () => {
    it('POST /sessions answers 200 with an id, usable in X-SvcAPI-Auth and the SvcAPI cookie', async () => {
      const r = await gw.request('POST', `${API}/sessions`, {
        body: { username: 'admin', password: 'admin-password' },
      });
      expect(r.status, r.text).to.equal(200);
      expect(r.headers['content-type']).to.match(/^application\/json/);
      expect(Object.keys(r.json)).to.deep.equal(['id']);
      const id = r.json.id as string;
      expect(id).to.be.a('string').with.length.greaterThan(20);
      // The earlier form reads the session from the SvcAPI cookie; the response sets it.
      const setCookie = ([] as string[]).concat(r.headers['set-cookie'] ?? []);
      expect(setCookie.some((c) => c.startsWith(`SvcAPI=${id}`))).to.equal(true);

      const byHeader = await gw.request('GET', `${API}/users`, { headers: sessionAuth(id) });
      expect(byHeader.status, byHeader.text).to.equal(200);
      expect(byHeader.json).to.be.an('array');
      const byCookie = await gw.request('GET', `${API}/users`, { headers: { Cookie: `SvcAPI=${id}` } });
      expect(byCookie.status, byCookie.text).to.equal(200);
      expect(byCookie.json).to.be.an('array');
    });

    it('logs in by username case-insensitively and with form or XML bodies', async () => {
      const user = await createUser(gw);
      const form = await gw.request('POST', `${API}/sessions`, {
        headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
        body: `username=${encodeURIComponent(user.username.toUpperCase())}&password=${encodeURIComponent(user.password)}`,
      });
      expect(form.status, form.text).to.equal(200);
      const xml = await gw.request('POST', `${API}/sessions`, {
        headers: { 'Content-Type': 'application/xml' },
        body: `<session><username>${user.username}</username><password>${user.password}</password></session>`,
      });
      expect(xml.status, xml.text).to.equal(200);
      expect(xml.json.id).to.be.a('string');
    });

    it('DELETE /sessions answers 200 [] and ends the session', async () => {
      const id = await login(gw, 'admin', 'admin-password');
      expect((await gw.request('GET', `${API}/users`, { headers: sessionAuth(id) })).status).to.equal(200);
      const d = await gw.request('DELETE', `${API}/sessions`, { headers: sessionAuth(id) });
      expect(d.status, d.text).to.equal(200);
      expect(d.json).to.deep.equal([]);
      const after = await gw.request('GET', `${API}/users`, { headers: sessionAuth(id) });
      expectError(after, 401, 'not-authenticated/authentication-required');
      const byCookie = await gw.request('GET', `${API}/users`, { headers: { Cookie: `SvcAPI=${id}` } });
      expect(byCookie.status).to.equal(401);
    });

    it('DELETE /sessions ends a session sent in the SvcAPI cookie', async () => {
      const id = await login(gw, 'admin', 'admin-password');
      const d = await gw.request('DELETE', `${API}/sessions`, { headers: { Cookie: `SvcAPI=${id}` } });
      expect(d.status, d.text).to.equal(200);
      expect(d.json).to.deep.equal([]);
      expect((await gw.request('GET', `${API}/users`, { headers: sessionAuth(id) })).status).to.equal(401);
    });

    it('DELETE /sessions answers 200 [] for an invalid session, or none', async () => {
      for (const headers of [sessionAuth('not-a-session'), sessionAuth('a'.repeat(64)), {}]) {
        const d = await gw.request('DELETE', `${API}/sessions`, { headers });
        expect(d.status, d.text).to.equal(200);
        expect(d.json).to.deep.equal([]);
      }
    });

    it('logging one session out leaves the others working', async () => {
      const a = await login(gw, 'admin', 'admin-password');
      const b = await login(gw, 'admin', 'admin-password');
      expect(a).to.not.equal(b);
      await gw.request('DELETE', `${API}/sessions`, { headers: sessionAuth(a) });
      expect((await gw.request('GET', `${API}/users`, { headers: sessionAuth(b) })).status).to.equal(200);
    });

    it('refuses a wrong password with 401 invalid-username-or-password and SPEC error fields', async () => {
      const r = await gw.request('POST', `${API}/sessions`, {
        body: { username: 'admin', password: 'wrong-password' },
      });
      expectError(r, 401, 'not-authenticated/invalid-username-or-password');
      expect(r.headers['set-cookie']).to.equal(undefined);
    });

    it('answers an unknown username exactly like a wrong password', async () => {
      const r = await gw.request('POST', `${API}/sessions`, {
        body: { username: unique('nobody'), password: 'whatever-password' },
      });
      expectError(r, 401, 'not-authenticated/invalid-username-or-password');
    });

    it('refuses a login without username or password with 401', async () => {
      for (const body of [{}, { username: 'admin' }, { password: 'admin-password' }]) {
        const r = await gw.request('POST', `${API}/sessions`, { body });
        expect(r.status, `${JSON.stringify(body)}: ${r.text}`).to.equal(401);
        expect(r.json.type).to.match(/^not-authenticated\//);
      }
    });

    it('refuses a bogus session id with 401', async () => {
      for (const id of ['bogus', 'b'.repeat(64)]) {
        const h = await gw.request('GET', `${API}/users`, { headers: sessionAuth(id) });
        expect(h.status, h.text).to.equal(401);
        expect(h.json.type).to.match(/^not-authenticated\//);
        const c = await gw.request('GET', `${API}/users`, { headers: { Cookie: `SvcAPI=${id}` } });
        expect(c.status, c.text).to.equal(401);
      }
    });

    it('sets the SvcAPI cookie Secure and HttpOnly, and clears it on logout', async () => {
      const r = await gw.request('POST', `${API}/sessions`, {
        body: { username: 'admin', password: 'admin-password' },
      });
      const cookie = ([] as string[])
        .concat(r.headers['set-cookie'] ?? [])
        .find((c) => c.startsWith('SvcAPI='))!;
      expect(cookie).to.match(/;\s*secure/i);
      expect(cookie).to.match(/;\s*httponly/i);
      expect(cookie).to.match(/;\s*path=\//i);
      const d = await gw.request('DELETE', `${API}/sessions`, { headers: sessionAuth(r.json.id) });
      const cleared = ([] as string[])
        .concat(d.headers['set-cookie'] ?? [])
        .find((c) => c.startsWith('SvcAPI='));
      expect(cleared).to.match(/^SvcAPI=;/);
      expect(cleared).to.match(/expires=Thu, 01 Jan 1970/i);
    });

    it('expires a session idle for longer than sessions.idle_timeout_minutes', async () => {
      const user = await createUser(gw);
      const id = await login(gw, user.username, user.password);
      const fresh = await gw.request('GET', `${API}/users/${user.id}`, { headers: sessionAuth(id) });
      expect(fresh.status, fresh.text).to.equal(200);
      const idle = gw.config.sessions.idle_timeout_minutes * 60_000;
      await dbOf(gw.core).work((em) =>
        em.update(
          SessionEntity,
          { user_id: user.id },
          { last_active_at: new Date(Date.now() - idle - 60_000) },
        ),
      );
      const r = await gw.request('GET', `${API}/users/${user.id}`, { headers: sessionAuth(id) });
      expectError(r, 401, 'not-authenticated/authentication-required');
    });

    it("turning restapi_permission off refuses the user's open session and key at once", async () => {
      const user = await createUser(gw);
      const id = await login(gw, user.username, user.password);
      const { key } = await createKey(gw, user.id);
      for (const headers of [sessionAuth(id), keyAuth(key)])
        expect((await gw.request('GET', `${API}/users/${user.id}`, { headers })).status).to.equal(200);
      const put = await gw.request('PUT', `${API}/users/${user.id}`, {
        headers: keyAuth(gw.siteKey),
        body: { restapi_permission: false },
      });
      expect(put.status, put.text).to.equal(200);
      for (const headers of [sessionAuth(id), keyAuth(key)]) {
        const r = await gw.request('GET', `${API}/users/${user.id}`, { headers });
        expect(r.status, r.text).to.equal(401);
        expect(r.json.type).to.match(/^not-authenticated\//);
      }
    });

    it('refuses a user whose restapi_permission is off', async () => {
      const user = await createUser(gw, { restapi_permission: false });
      const r = await gw.request('POST', `${API}/sessions`, {
        body: { username: user.username, password: user.password },
      });
      expect(r.status, r.text).to.equal(401);
      expect(r.json.type).to.match(/^not-authenticated\//);
      const failed = await actions({ user_id: user.id, action: 'failedlogin' });
      expect(failed.map((a) => a.failure_type)).to.deep.equal(['no_restapi_permission']);
    });
  });

  it('GET /healthz answers 200 without credentials', async () => {
    const r = await gw.request('GET', '/healthz');
    expect(r.status, r.text).to.equal(200);
  });

  it('answers a request without credentials with 401 and WWW-Authenticate', async () => {
    for (const [method, path] of [
      ['GET', `${API}/users`],
      ['GET', `${API}/api_key`],
      ['POST', `${API}/groups`],
      ['GET', `${API}/permissions`],
    ] as const) {
      const r = await gw.request(method, path);
      expectError(r, 401, 'not-authenticated/authentication-required');
      expect(r.headers['www-authenticate'], `${method} ${path}`).to.match(/^Basic realm="[^"]+"/);
    }
  });

  it('locks a user out after 5 wrong passwords, even for the right one', async () => {
    const user = await createUser(gw);
    const from = '127.0.0.3';
    for (let i = 1; i <= 5; i++) {
      const r = await gw.request('POST', `${API}/sessions`, {
        body: { username: user.username, password: `wrong-password-${i}` },
        localAddress: from,
      });
      expectError(r, 401, 'not-authenticated/invalid-username-or-password');
    }
    const r = await gw.request('POST', `${API}/sessions`, {
      body: { username: user.username, password: user.password },
      localAddress: from,
    });
    expectError(r, 401, 'not-authenticated/locked-out');
    expect(r.headers['www-authenticate']).to.be.a('string');
    const failed = await actions({ user_id: user.id, action: 'failedlogin' });
    expect(failed.map((a) => a.failure_type)).to.deep.equal([
      ...Array<string>(5).fill('password_mismatch'),
      'locked_out',
    ]);
    expect(failed.every((a) => a.interface === 'restapi' && a.ip === from)).to.equal(true);
    expect(await actions({ user_id: user.id, action: 'login' })).to.have.length(0);
  });

  it('four wrong passwords do not lock a user out, and a good login resets the count', async () => {
    const user = await createUser(gw);
    const wrong = () =>
      gw.request('POST', `${API}/sessions`, { body: { username: user.username, password: 'nope-nope-1' } });
    for (let i = 0; i < 4; i++) expect((await wrong()).status).to.equal(401);
    await login(gw, user.username, user.password);
    for (let i = 0; i < 4; i++) expect((await wrong()).status).to.equal(401);
    await login(gw, user.username, user.password);
  });

  describe('allowed_ips', () => {
    it('refuses a login from another client address and admits one from an allowed address', async () => {
      const user = await createUser(gw, { allowed_ips: '127.0.0.1' });
      const denied = await gw.request('POST', `${API}/sessions`, {
        body: { username: user.username, password: user.password },
        localAddress: '127.0.0.2',
      });
      expect(denied.status, denied.text).to.equal(401);
      expect(denied.json.type).to.match(/^not-authenticated\//);
      expect(denied.json).to.include.all.keys(...SPEC_ERROR_FIELDS);
      expect(denied.json).to.not.have.property('id');

      const failed = await actions({ user_id: user.id, action: 'failedlogin' });
      expect(failed).to.have.length(1);
      expect(failed[0]).to.include({ failure_type: 'ip_mismatch', ip: '127.0.0.2', interface: 'restapi' });

      const id = await login(gw, user.username, user.password, '127.0.0.1');
      const own = await gw.request('GET', `${API}/users/${user.id}`, {
        headers: sessionAuth(id),
        localAddress: '127.0.0.1',
      });
      expect(own.status, own.text).to.equal(200);
    });

    it('applies to sessions and keys used later from another address', async () => {
      const user = await createUser(gw, { allowed_ips: '127.0.0.0/31' });
      const id = await login(gw, user.username, user.password, '127.0.0.1');
      const { key } = await createKey(gw, user.id);
      for (const headers of [sessionAuth(id), keyAuth(key)]) {
        const ok = await gw.request('GET', `${API}/users/${user.id}`, { headers, localAddress: '127.0.0.1' });
        expect(ok.status, ok.text).to.equal(200);
        const no = await gw.request('GET', `${API}/users/${user.id}`, { headers, localAddress: '127.0.0.2' });
        expect(no.status, no.text).to.equal(401);
        expect(no.json.type).to.match(/^not-authenticated\//);
      }
    });
  });

  describe('login Actions', () => {
    it('records a login Action with interface restapi and the client IP', async () => {
      const user = await createUser(gw);
      await login(gw, user.username, user.password, '127.0.0.2');
      const rows = await actions({ user_id: user.id, action: 'login' });
      expect(rows).to.have.length(1);
      expect(rows[0]).to.include({ interface: 'restapi', ip: '127.0.0.2', username: user.username });
      expect(rows[0]!.when.getTime()).to.be.closeTo(Date.now(), 60_000);

      // A request with the session is not another login.
      const id = await login(gw, user.username, user.password, '127.0.0.1');
      await gw.request('GET', `${API}/users/${user.id}`, { headers: sessionAuth(id) });
      const after = await actions({ user_id: user.id, action: 'login' });
      expect(after.map((a) => a.ip)).to.deep.equal(['127.0.0.2', '127.0.0.1']);
    });

    it('sets last_login_at on the user', async () => {
      const user = await createUser(gw);
      expect(user.last_login_at).to.equal(null);
      await login(gw, user.username, user.password);
      const r = await gw.request('GET', `${API}/users/${user.id}`, { headers: keyAuth(gw.siteKey) });
      expect(r.json.last_login_at).to.be.a('string');
      expect(Date.parse(r.json.last_login_at)).to.be.closeTo(Date.now(), 60_000);
    });
  });
});
