/**
 * SPEC "Request and response formats": the response format by path extension (which wins, per
 * DESIGN.md) or Accept, SPEC's XML typing, and request bodies in JSON, XML (any root element,
 * nil="true" as null) and form encoding.
 */
import { expect } from 'chai';
import { startTestGateway, type Response, type TestGateway } from '../../helpers/gateway.ts';
import { API, asList, createKey, createUser, keyAuth, parseXml, unique } from './client.ts';

const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;

describe('REST formats', () => {
  let gw: TestGateway;
  let site: Record<string, string>;
  let user: Awaited<ReturnType<typeof createUser>>;
  before(async () => {
    gw = await startTestGateway();
    site = keyAuth(gw.siteKey);
    user = await createUser(gw, { name: 'Xml Person', notes: 'a < b & c' });
  });
  after(async () => gw.stop());

  const get = (path: string, headers: Record<string, string> = {}) =>
    gw.request('GET', `${API}${path}`, { headers: { ...site, ...headers } });
  const isJson = (r: { headers: Record<string, unknown> }) =>
    expect(r.headers['content-type']).to.match(/^application\/json/);
  const isXml = (r: { headers: Record<string, unknown>; text: string }) => {
    expect(r.headers['content-type']).to.match(/^application\/xml/);
    expect(r.text).to.match(/^<\?xml version="1\.0" encoding="UTF-8"\?>/);
  };

  describe('response format', () => {
    it('answers JSON when no Accept is sent, and for */*', async () => {
      for (const headers of [{}, { Accept: '*/*' }, { Accept: 'application/json' }] as Record<
        string,
        string
      >[]) {
        const r = await get(`/users/${user.id}`, headers);
        expect(r.status, r.text).to.equal(200);
        isJson(r);
        expect(r.json.username).to.equal(user.username);
      }
    });

    it('answers XML for Accept: application/xml (and text/xml)', async () => {
      for (const accept of ['application/xml', 'text/xml', 'text/html, application/xml;q=0.9']) {
        const r = await get(`/users/${user.id}`, { Accept: accept });
        expect(r.status, r.text).to.equal(200);
        isXml(r);
        expect(parseXml(r.text).user.username).to.equal(user.username);
      }
    });

    it('honours Accept quality values', async () => {
      const x = await get('/users', { Accept: 'application/json;q=0.2, application/xml;q=0.8' });
      isXml(x);
      const j = await get('/users', { Accept: 'application/xml;q=0.2, application/json;q=0.8' });
      isJson(j);
    });

    it('.json and .xml path extensions win over Accept', async () => {
      const j = await get(`/users/${user.id}.json`, { Accept: 'application/xml' });
      expect(j.status, j.text).to.equal(200);
      isJson(j);
      expect(j.json.id).to.equal(user.id);
      const x = await get(`/users/${user.id}.xml`, { Accept: 'application/json' });
      expect(x.status, x.text).to.equal(200);
      isXml(x);
      expect(parseXml(x.text).user.id['#text']).to.equal(String(user.id));
      const list = await get('/users.xml', { Accept: 'application/json' });
      isXml(list);
      const listJ = await get('/users.json', { Accept: 'application/xml' });
      isJson(listJ);
      expect(listJ.json).to.be.an('array');
      // The extension also overrides an Accept that allows neither JSON nor XML.
      const html = await get('/users.json', { Accept: 'text/html' });
      expect(html.status, html.text).to.equal(200);
      isJson(html);
    });

    it('answers 406 unsupported-http-response-format for Accept: text/html only', async () => {
      for (const accept of ['text/html', 'image/png, text/plain']) {
        const r = await get('/users', { Accept: accept });
        expect(r.status, r.text).to.equal(406);
        isJson(r);
        expect(r.json).to.include({ type: 'bad-request/unsupported-http-response-format', 'http-code': 406 });
        expect(r.json).to.include.all.keys('error', 'instance', 'title');
      }
    });
  });

  describe('XML typing', () => {
    it('types a user as SPEC does: integer, boolean, datetime, nil, plain strings', async () => {
      const r = await get(`/users/${user.id}.xml`);
      expect(r.status, r.text).to.equal(200);
      isXml(r);
      // Exact spellings SPEC shows.
      expect(r.text).to.include(`<id type="integer">${user.id}</id>`);
      expect(r.text).to.include('<ftp_permission type="boolean">true</ftp_permission>');
      expect(r.text).to.include('<attachments_permission type="boolean">false</attachments_permission>');
      expect(r.text).to.match(/<created_at type="datetime">[^<]+<\/created_at>/);
      expect(r.text).to.include('<last_login_at nil="true"/>');

      const doc = parseXml(r.text);
      expect(Object.keys(doc)).to.deep.equal(['?xml', 'user']);
      const u = doc.user;
      expect(u.id).to.deep.equal({ '@_type': 'integer', '#text': String(user.id) });
      expect(u.ftp_permission).to.deep.equal({ '@_type': 'boolean', '#text': 'true' });
      expect(u.self_managed).to.deep.equal({ '@_type': 'boolean', '#text': 'true' });
      expect(u.created_at['@_type']).to.equal('datetime');
      expect(u.created_at['#text']).to.match(ISO);
      expect(new Date(u.created_at['#text']).toISOString()).to.equal(user.created_at);
      expect(u.last_login_at).to.deep.equal({ '@_nil': 'true' });
      expect(u.username).to.equal(user.username);
      expect(u.name).to.equal('Xml Person');
      // Entities are escaped and read back as written.
      expect(u.notes).to.equal('a < b & c');
      expect(r.text).to.not.include('a < b & c');
      // group_ids is a string in SPEC, not an array or a number.
      expect(u.group_ids).to.equal('');
      expect(u).to.not.have.property('password');
      expect(u).to.not.have.property('grant_permission');
    });

    it('types a group with user_ids as a string', async () => {
      const other = await createUser(gw);
      const g = await gw.request('POST', `${API}/groups.xml`, {
        headers: site,
        body: { name: unique('xmlgroup'), user_ids: `${user.id},${other.id}` },
      });
      expect(g.status, g.text).to.equal(201);
      isXml(g);
      const group = parseXml(g.text).group;
      expect(group.id['@_type']).to.equal('integer');
      expect(group.user_ids).to.equal(`${user.id},${other.id}`);
    });

    it('renders lists as <users type="array"><user>…</user></users>', async () => {
      const r = await get('/users.xml');
      expect(r.status, r.text).to.equal(200);
      isXml(r);
      expect(r.text).to.match(/<users type="array"><user><id type="integer">/);
      const doc = parseXml(r.text);
      expect(Object.keys(doc)).to.deep.equal(['?xml', 'users']);
      expect(doc.users['@_type']).to.equal('array');
      const items = asList(doc.users.user);
      const json = await get('/users');
      expect(items).to.have.length(json.json.length);
      expect(items.map((u: { username: string }) => u.username)).to.deep.equal(
        json.json.map((u: { username: string }) => u.username),
      );
      expect(items.every((u: { id: { '@_type': string } }) => u.id['@_type'] === 'integer')).to.equal(true);
    });

    it('renders a one-item list as an array too', async () => {
      const lonely = await createUser(gw);
      const { id } = await createKey(gw, lonely.id);
      const r = await get(`/api_keys.xml?user_id=${lonely.id}`);
      expect(r.status, r.text).to.equal(200);
      expect(r.text).to.match(/<api_keys type="array"><api_key><id type="integer">\d+<\/id>/);
      const doc = parseXml(r.text);
      expect(asList(doc.api_keys.api_key)).to.have.length(1);
      expect(doc.api_keys.api_key.id['#text']).to.equal(String(id));
      expect(doc.api_keys.api_key.expires_at).to.deep.equal({ '@_nil': 'true' });
      expect(doc.api_keys.api_key.user_id).to.deep.equal({ '@_type': 'integer', '#text': String(lonely.id) });
    });

    it('renders an empty list as <nil-classes type="array"/> (and [] in JSON)', async () => {
      const nobody = await createUser(gw);
      const r = await get(`/api_keys.xml?user_id=${nobody.id}`);
      expect(r.status, r.text).to.equal(200);
      isXml(r);
      expect(r.text).to.match(/^<\?xml[^>]*\?>\s*<nil-classes type="array"\/>\s*$/);
      const j = await get(`/api_keys.json?user_id=${nobody.id}`);
      expect(j.text).to.equal('[]');
    });

    it('answers DELETE with <nil-classes type="array"/> in XML', async () => {
      const doomed = await createUser(gw);
      const r = await gw.request('DELETE', `${API}/users/${doomed.id}.xml`, { headers: site });
      expect(r.status, r.text).to.equal(200);
      isXml(r);
      expect(r.text).to.match(/<nil-classes type="array"\/>\s*$/);
    });

    it('renders the error object in XML with the same fields', async () => {
      const r = await get('/users/999999.xml');
      expect(r.status, r.text).to.equal(404);
      isXml(r);
      const e = parseXml(r.text).error;
      expect(e).to.be.an('object');
      expect(e.type).to.equal('not-found/user-not-found');
      expect(e['http-code']).to.deep.equal({ '@_type': 'integer', '#text': '404' });
      expect(e.error).to.be.a('string').and.not.equal('');
      expect(e.title).to.be.a('string').and.not.equal('');
      expect(e.instance).to.be.a('string').and.not.equal('');
    });

    it('renders a model-save error in XML with errors, model_errors and model_error_keys', async () => {
      const r = await gw.request('POST', `${API}/users.xml`, {
        headers: { ...site, 'Content-Type': 'application/xml' },
        body: `<user><username>${'u'.repeat(51)}</username><password>long-enough-pw</password></user>`,
      });
      expect(r.status, r.text).to.equal(422);
      isXml(r);
      const e = parseXml(r.text).error;
      expect(e.type).to.equal('processing-failure/model-save-error');
      expect(e['http-code']['#text']).to.equal('422');
      expect(e.errors['@_type']).to.equal('array');
      expect(asList(e.errors.error).join(' ')).to.match(/username/i);
      expect(e.model_errors).to.have.property('username');
      expect(e.model_error_keys).to.have.property('username');
    });
  });

  describe('request bodies', () => {
    const created = async (r: Response) => {
      expect(r.status, r.text).to.equal(201);
      const shown = await get(`/users/${r.json.id}`);
      expect(shown.status).to.equal(200);
      return shown.json;
    };

    it('creates a user from JSON', async () => {
      const username = unique('json');
      const u = await created(
        await gw.request('POST', `${API}/users`, {
          headers: { ...site, 'Content-Type': 'application/json; charset=utf-8' },
          body: JSON.stringify({ username, password: 'json-password', ftp_permission: false }),
        }),
      );
      expect(u).to.include({ username, ftp_permission: false });
    });

    it('creates a user from XML with a <user> root, typed or untyped', async () => {
      const username = unique('xml');
      const r = await gw.request('POST', `${API}/users`, {
        headers: { ...site, 'Content-Type': 'application/xml' },
        body:
          `<?xml version="1.0" encoding="UTF-8"?>\n<user><username>${username}</username>` +
          '<password>xml-password</password><ftp_permission type="boolean">false</ftp_permission>' +
          '<attachments_permission>true</attachments_permission><name>X &amp; Y</name></user>',
      });
      isJson(r);
      const u = await created(r);
      expect(u).to.include({ username, ftp_permission: false, attachments_permission: true, name: 'X & Y' });
    });

    it('creates a user from XML with any root element', async () => {
      const username = unique('whatever');
      const u = await created(
        await gw.request('POST', `${API}/users`, {
          headers: { ...site, 'Content-Type': 'text/xml' },
          body: `<whatever><username>${username}</username><password>whatever-pw</password><notes>hi</notes></whatever>`,
        }),
      );
      expect(u).to.include({ username, notes: 'hi' });
    });

    it('creates a user from a form-encoded body', async () => {
      const username = unique('form');
      const u = await created(
        await gw.request('POST', `${API}/users`, {
          headers: { ...site, 'Content-Type': 'application/x-www-form-urlencoded' },
          body: `username=${username}&password=form-password&name=Form+User&web_permission=false&allowed_ips=10.0.0.1%0A10.0.0.2`,
        }),
      );
      expect(u).to.include({
        username,
        name: 'Form User',
        web_permission: false,
        allowed_ips: '10.0.0.1\n10.0.0.2',
      });
    });

    it('reads an XML body and answers in JSON or XML independently', async () => {
      const username = unique('mixed');
      const r = await gw.request('POST', `${API}/users.xml`, {
        headers: site,
        body: { username, password: 'mixed-password' },
      });
      expect(r.status, r.text).to.equal(201);
      isXml(r);
      expect(parseXml(r.text).user.username).to.equal(username);
    });

    it('takes nil="true" as null', async () => {
      const g = await gw.request('POST', `${API}/groups`, { headers: site, body: { name: unique('nil') } });
      // group_id null with a user_id: a plain empty element would not be an integer.
      const r = await gw.request('POST', `${API}/permissions.xml`, {
        headers: { ...site, 'Content-Type': 'application/xml' },
        body: `<permission><path>nil/test</path><permission>readonly</permission><user_id type="integer">${user.id}</user_id><group_id nil="true"/></permission>`,
      });
      expect(r.status, r.text).to.equal(201);
      const p = parseXml(r.text).permission;
      expect(p.group_id).to.deep.equal({ '@_nil': 'true' });
      expect(p.user_id['#text']).to.equal(String(user.id));
      // And the other way round.
      const r2 = await gw.request('POST', `${API}/permissions`, {
        headers: { ...site, 'Content-Type': 'application/xml' },
        body: `<permission><path>nil/test2</path><permission>full</permission><user_id nil="true"/><group_id>${g.json.id}</group_id></permission>`,
      });
      expect(r2.status, r2.text).to.equal(201);
      expect(r2.json).to.include({ user_id: null, group_id: g.json.id });
      // An API key with no expiry.
      const k = await gw.request('POST', `${API}/api_keys`, {
        headers: { ...site, 'Content-Type': 'application/xml' },
        body: `<api_key><user_id type="integer">${user.id}</user_id><expires_at nil="true"/></api_key>`,
      });
      expect(k.status, k.text).to.equal(201);
      expect(k.json.expires_at).to.equal(null);
    });

    it('accepts its own XML back: PUT of a GET leaves the user unchanged', async () => {
      const target = await createUser(gw, { name: 'Round Trip', allowed_ips: '10.1.2.3', user_root: 'rt/' });
      const before = await get(`/users/${target.id}`);
      const xml = await get(`/users/${target.id}.xml`);
      const put = await gw.request('PUT', `${API}/users/${target.id}`, {
        headers: { ...site, 'Content-Type': 'application/xml' },
        body: xml.text,
      });
      expect(put.status, put.text).to.equal(200);
      expect(put.json).to.deep.equal(before.json);
    });
  });
});
