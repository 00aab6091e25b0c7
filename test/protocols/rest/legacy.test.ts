/**
 * SPEC "Versioning" 2 and "Authentication" API key 3: the earlier form of the interface, addressed
 * without /api/rest/v1 (`/users.xml`), speaks XML only and takes HTTP Basic with a site-wide key.
 */
import { expect } from 'chai';
import { startTestGateway, type TestGateway } from '../../helpers/gateway.ts';
import {
  API,
  asList,
  basicAuth,
  createKey,
  createUser,
  keyAuth,
  parseXml,
  unique,
  type XmlDoc,
} from './client.ts';

describe('REST legacy form', () => {
  let gw: TestGateway;
  let basic: Record<string, string>;
  before(async () => {
    gw = await startTestGateway();
    basic = basicAuth(gw.siteKey);
  });
  after(async () => gw.stop());

  const xmlError = (text: string): XmlDoc => parseXml(text).error;

  it('GET /users.xml with HTTP Basic and the site-wide key → 200 XML list', async () => {
    const u = await createUser(gw);
    const r = await gw.request('GET', '/users.xml', { headers: basic });
    expect(r.status, r.text).to.equal(200);
    expect(r.headers['content-type']).to.match(/^application\/xml/);
    const doc = parseXml(r.text);
    expect(doc.users['@_type']).to.equal('array');
    const names = asList(doc.users.user).map((x: { username: string }) => x.username);
    expect(names).to.include.members(['admin', u.username]);
  });

  it('answers XML even without an extension or with Accept: application/json', async () => {
    const u = await createUser(gw);
    for (const [path, headers] of [
      [`/users/${u.id}.xml`, {}],
      [`/users/${u.id}`, {}],
      [`/users/${u.id}`, { Accept: 'application/json' }],
    ] as const) {
      const r = await gw.request('GET', path, { headers: { ...basic, ...headers } });
      expect(r.status, `${path}: ${r.text}`).to.equal(200);
      expect(r.headers['content-type']).to.match(/^application\/xml/);
      expect(parseXml(r.text).user.username).to.equal(u.username);
    }
  });

  it("refuses a user's key, even a site admin's, with 403", async () => {
    const admin = await createUser(gw, { site_admin: true });
    const plain = await createUser(gw);
    for (const owner of [admin, plain]) {
      const { key } = await createKey(gw, owner.id);
      const r = await gw.request('GET', '/users.xml', { headers: basicAuth(key) });
      expect(r.status, r.text).to.equal(403);
      expect(r.headers['content-type']).to.match(/^application\/xml/);
      expect(xmlError(r.text).type).to.match(/^not-authorized\//);
      expect(xmlError(r.text)['http-code']['#text']).to.equal('403');
    }
  });

  it('refuses a JSON request (/users.json) with 406', async () => {
    const r = await gw.request('GET', '/users.json', { headers: basic });
    expect(r.status, r.text).to.equal(406);
    expect(r.headers['content-type']).to.match(/^application\/xml/);
    expect(xmlError(r.text).type).to.equal('bad-request/unsupported-http-response-format');
  });

  it('answers 401 without credentials, with X-SvcAPI-Key only, or with a session', async () => {
    const session = await gw.request('POST', `${API}/sessions`, {
      body: { username: 'admin', password: 'admin-password' },
    });
    expect(session.status).to.equal(200);
    for (const headers of [
      {},
      keyAuth(gw.siteKey),
      { 'X-SvcAPI-Auth': session.json.id as string },
      { Cookie: `SvcAPI=${session.json.id as string}` },
      basicAuth('f'.repeat(64)),
      basicAuth('admin', 'admin-password'),
    ]) {
      const r = await gw.request('GET', '/users.xml', { headers });
      expect(r.status, `${JSON.stringify(headers)}: ${r.text}`).to.equal(401);
      expect(r.headers['www-authenticate']).to.match(/^Basic /);
      const e = xmlError(r.text);
      expect(e.type).to.match(/^not-authenticated\//);
      for (const f of ['error', 'http-code', 'instance', 'title', 'type']) expect(e, f).to.have.property(f);
    }
  });

  it('POST /users.xml with an XML body creates a user (201, XML)', async () => {
    const username = unique('legacy');
    const r = await gw.request('POST', '/users.xml', {
      headers: { ...basic, 'Content-Type': 'application/xml' },
      body: `<user><username>${username}</username><password>legacy-password</password><ftp_permission type="boolean">false</ftp_permission></user>`,
    });
    expect(r.status, r.text).to.equal(201);
    expect(r.headers['content-type']).to.match(/^application\/xml/);
    const user = parseXml(r.text).user;
    expect(user.username).to.equal(username);
    expect(user.ftp_permission).to.deep.equal({ '@_type': 'boolean', '#text': 'false' });
    expect(user).to.not.have.property('password');
    // Visible through the versioned API, and the password works.
    const shown = await gw.request('GET', `${API}/users/${user.id['#text']}`, {
      headers: keyAuth(gw.siteKey),
    });
    expect(shown.json).to.include({ username, ftp_permission: false });
    const login = await gw.request('POST', `${API}/sessions`, {
      body: { username, password: 'legacy-password' },
    });
    expect(login.status, login.text).to.equal(200);
  });

  it('updates and deletes in XML', async () => {
    const u = await createUser(gw, { name: 'Before' });
    const put = await gw.request('PUT', `/users/${u.id}.xml`, {
      headers: { ...basic, 'Content-Type': 'application/xml' },
      body: '<user><name>After</name></user>',
    });
    expect(put.status, put.text).to.equal(200);
    expect(parseXml(put.text).user.name).to.equal('After');
    const del = await gw.request('DELETE', `/users/${u.id}.xml`, { headers: basic });
    expect(del.status, del.text).to.equal(200);
    expect(del.text).to.match(/<nil-classes type="array"\/>/);
    const gone = await gw.request('GET', `/users/${u.id}.xml`, { headers: basic });
    expect(gone.status).to.equal(404);
    expect(xmlError(gone.text).type).to.equal('not-found/user-not-found');
  });

  it('has no /sessions endpoint', async () => {
    const r = await gw.request('POST', '/sessions.xml', {
      headers: { 'Content-Type': 'application/xml' },
      body: '<session><username>admin</username><password>admin-password</password></session>',
    });
    expect(r.status, r.text).to.be.oneOf([401, 404]);
    expect(r.headers['set-cookie']).to.equal(undefined);
  });
});
