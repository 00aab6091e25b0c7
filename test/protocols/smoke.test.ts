import { expect } from 'chai';
import { startTestGateway, type TestGateway } from '../helpers/gateway.ts';

describe('smoke', () => {
  let gw: TestGateway;
  before(async () => {
    gw = await startTestGateway();
  });
  after(async () => gw.stop());
  it('serves /healthz and a key-authenticated GET /api_key', async () => {
    expect((await gw.request('GET', '/healthz')).status).to.equal(200);
    const r = await gw.request('GET', '/api/rest/v1/api_key', { headers: { 'X-SvcAPI-Key': gw.siteKey } });
    expect(r.status, r.text).to.equal(200);
    expect(r.json.user_id).to.equal(null);
  });
});
