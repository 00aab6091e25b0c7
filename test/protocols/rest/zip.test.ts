/**
 * GET /zip/<folder> (our extension, used by the web interface): refused before the first byte,
 * in SPEC's error shape, when the caller may not read the folder; streamed whole when they may.
 */
import { expect } from 'chai';
import { startTestGateway, type TestGateway } from '../../helpers/gateway.ts';
import { API, createUser, keyAuth, login } from './client.ts';

describe('REST /zip', () => {
  let gw: TestGateway;
  before(async () => {
    gw = await startTestGateway();
    const site = { headers: keyAuth(gw.siteKey) };
    for (const folder of ['drop', 'drop/inner']) {
      const r = await gw.request('POST', `${API}/folders/${folder}`, site);
      expect(r.status, r.text).to.equal(201);
    }
  });
  after(() => gw?.stop());

  it('answers 403 read-permission-required to a writeonly user, before any byte of an archive', async () => {
    const user = await createUser(gw);
    const grant = await gw.request('POST', `${API}/permissions`, {
      headers: keyAuth(gw.siteKey),
      body: { path: 'drop', user_id: user.id, permission: 'writeonly' },
    });
    expect(grant.status, grant.text).to.equal(201);
    const session = await login(gw, user.username, user.password);
    const r = await gw.request('GET', `${API}/zip/drop`, { headers: { 'X-SvcAPI-Auth': session } });
    expect(r.status, r.text).to.equal(403);
    expect(r.headers['content-type']).to.not.include('zip');
    expect(r.json.type).to.equal('not-authorized/read-permission-required');
  });

  it('streams the folder to a reader', async () => {
    const r = await gw.request('GET', `${API}/zip/drop`, { headers: keyAuth(gw.siteKey) });
    expect(r.status, r.text).to.equal(200);
    expect(r.headers['content-type']).to.include('application/zip');
    expect(r.text.startsWith('PK')).to.equal(true);
  });
});
