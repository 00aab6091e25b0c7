/**
 * Issue 7 over real HTTPS: webhook failure retry (site admins only), billing (`svc-gateway billing
 * import`, /invoices, /payments, cursor pages, the signed printable document).
 */
import { execFile } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { expect } from 'chai';
import { WebhookAttemptEntity } from '../../../src/db/entities.ts';
import { dbKind, startTestGateway, type TestGateway } from '../../helpers/gateway.ts';
import { API, createKey, createUser, expectError, keyAuth, unique } from './client.ts';
import { dbOf } from '../../helpers/internals.ts';

const run = promisify(execFile);
const ROOT = path.resolve(import.meta.dirname, '../../..');

const invoice = (id: number) => ({
  id,
  type: 'invoice',
  amount: 120.5,
  balance: 20.5,
  created_at: '2025-01-31T00:00:00Z',
  currency: 'USD',
  site_name: 'Example <Site>',
  invoice_line_items: [
    {
      amount: 120.5,
      created_at: '2025-01-31T00:00:00Z',
      description: 'Monthly plan',
      type: 'plan',
      service_start_at: '2025-01-01T00:00:00Z',
      service_end_at: '2025-01-31T00:00:00Z',
      plan: 'Power',
      site: 'example',
    },
  ],
  payment_line_items: [],
});
const payment = (id: number) => ({
  id,
  type: 'payment',
  amount: 100,
  balance: 0,
  created_at: '2025-02-01T00:00:00Z',
  currency: 'USD',
  method: 'credit_card',
  payment_type: 'charge',
  site_name: 'Example',
  invoice_line_items: [],
  payment_line_items: [{ amount: 100, created_at: '2025-02-01T00:00:00Z', invoice_id: 101, payment_id: id }],
});

describe(`REST events and billing (${dbKind})`, function () {
  this.timeout(60_000);
  let gw: TestGateway;
  let userKey: string;

  before(async () => {
    gw = await startTestGateway();
    const user = await createUser(gw, { username: unique('bill') });
    userKey = (await createKey(gw, user.id)).key;
  });
  after(() => gw.stop());

  describe('POST /action_webhook_failures/{id}/retry', () => {
    it('is for site admins: 403 for a user, 404 for an unknown id, 204 for a failed delivery', async () => {
      const r = await gw.request('POST', `${API}/action_webhook_failures/1/retry`, {
        headers: keyAuth(userKey),
      });
      expectError(r, 403, 'not-authorized/site-admin-required');
      const missing = await gw.request('POST', `${API}/action_webhook_failures/424242/retry`, {
        headers: keyAuth(gw.siteKey),
      });
      expectError(missing, 404, 'not-found/action-webhook-failure-not-found');
      // A failed delivery made directly (no webhook target needed to test the route).
      const id = await dbOf(gw.core).work(async (em) => {
        const d = await em.query(
          `INSERT INTO webhook_deliveries (action_id, created_at, url, method, request_headers, body, path, folder, status, attempts, next_attempt_at)
           VALUES (1, 0, 'http://127.0.0.1:9/x', 'POST', '{}', '{}', 'a', '', 'failed', 5, 0) RETURNING id`,
        );
        const deliveryId = Number((d as { id: number }[])[0]!.id);
        const res = await em.insert(WebhookAttemptEntity, {
          delivery_id: deliveryId,
          created_at: new Date(),
          status: 500,
          message: 'HTTP 500',
          success: false,
          request_headers: '{}',
          request_method: 'POST',
          request_url: 'http://127.0.0.1:9/x',
          path: 'a',
          folder: '',
        });
        return Number((res.identifiers[0] as { id: number }).id);
      });
      const ok = await gw.request('POST', `${API}/action_webhook_failures/${id}/retry`, {
        headers: keyAuth(gw.siteKey),
      });
      expect(ok.status, ok.text).to.equal(204);
      expect(ok.text).to.equal('');
    });
  });

  describe('billing', () => {
    before(async () => {
      const file = path.join(gw.config.data_dir, 'billing.json');
      const items = [invoice(101), invoice(102), invoice(103), payment(201)];
      writeFileSync(file, JSON.stringify(items));
      const env = {
        ...process.env,
        SVC_DATA_DIR: gw.config.data_dir,
        SVC_DATABASE_URL: gw.config.database.url,
        SVC_LOG_LEVEL: 'error',
      };
      const cli = ['--import', 'tsx', path.join(ROOT, 'src/cli.ts'), 'billing', 'import', file];
      const first = await run(process.execPath, cli, { env, cwd: ROOT });
      expect(first.stdout).to.match(/4 created, 0 updated, 0 unchanged/);
      const again = await run(process.execPath, cli, { env, cwd: ROOT });
      expect(again.stdout).to.match(/0 created, 0 updated, 4 unchanged/);
    });

    it('refuses a file with an invalid item whole, naming the item and field', async () => {
      const bad = [invoice(104), { ...invoice(105), amount: 'lots' }];
      const err = await gw.core.billing.import(bad).catch((e: unknown) => e);
      expect(err).to.have.property('type', 'bad-request/invalid-body');
      expect((err as Error).message).to.match(/item 2 \(id 105\): field amount/);
      const r = await gw.request('GET', `${API}/invoices/104`, { headers: keyAuth(userKey) });
      expectError(r, 404, 'not-found/invoice-not-found');
    });

    it('imports CSV with nested items as JSON cells', async () => {
      const csv = [
        'id,type,amount,balance,created_at,currency,method,site_name,payment_line_items',
        `202,payment,5.25,0,2025-03-01T00:00:00Z,EUR,paypal,Example,"${JSON.stringify([{ amount: 5.25, invoice_id: 102 }]).replace(/"/g, '""')}"`,
      ].join('\n');
      const result = await gw.core.billing.import(gw.core.billing.parseFile(csv));
      expect(result).to.deep.equal({ created: 1, updated: 0, unchanged: 0 });
      const r = await gw.request('GET', `${API}/payments/202`, { headers: keyAuth(userKey) });
      expect(r.status).to.equal(200);
      expect(r.json).to.include({
        id: 202,
        amount: 5.25,
        currency: 'EUR',
        method: 'paypal',
        type: 'payment',
      });
      expect(r.json.payment_line_items[0]).to.include({ amount: 5.25, invoice_id: 102 });
    });

    it('lists invoices with cursor pagination, and shows one with SPEC fields', async () => {
      const p1 = await gw.request('GET', `${API}/invoices?per_page=2`, { headers: keyAuth(userKey) });
      expect(p1.status).to.equal(200);
      expect(p1.json.map((i: { id: number }) => i.id)).to.deep.equal([101, 102]);
      const next = p1.headers['x-svc-cursor-next'] as string;
      expect(next).to.be.a('string');
      const p2 = await gw.request('GET', `${API}/invoices?per_page=2&cursor=${encodeURIComponent(next)}`, {
        headers: keyAuth(userKey),
      });
      expect(p2.json.map((i: { id: number }) => i.id)).to.deep.equal([103]);
      expect(p2.headers['x-svc-cursor-next']).to.equal(undefined);
      const one = await gw.request('GET', `${API}/invoices/101`, { headers: keyAuth(userKey) });
      expect(one.json).to.include.keys(
        'id',
        'amount',
        'balance',
        'created_at',
        'currency',
        'download_uri',
        'invoice_line_items',
        'method',
        'payment_line_items',
        'payment_reversed_at',
        'payment_type',
        'site_name',
        'type',
      );
      expect(one.json.invoice_line_items[0]).to.include({ amount: 120.5, plan: 'Power' });
      expectError(
        await gw.request('GET', `${API}/payments/101`, { headers: keyAuth(userKey) }),
        404,
        'not-found/payment-not-found',
      );
      const payments = await gw.request('GET', `${API}/payments`, { headers: keyAuth(userKey) });
      expect(payments.json.map((i: { id: number }) => i.id)).to.deep.equal([201, 202]);
      expectError(
        await gw.request('GET', `${API}/invoices`),
        401,
        'not-authenticated/authentication-required',
      );
    });

    it('download_uri is a signed printable HTML document', async () => {
      const one = await gw.request('GET', `${API}/invoices/101`, { headers: keyAuth(userKey) });
      const url = new URL(one.json.download_uri as string);
      const doc = await gw.request('GET', url.pathname);
      expect(doc.status).to.equal(200);
      expect(doc.headers['content-type']).to.match(/^text\/html/);
      expect(doc.text)
        .to.include('Invoice 101')
        .and.include('Monthly plan')
        .and.include('Example &#60;Site&#62;');
      const forged = await gw.request('GET', `${url.pathname}x`);
      expect(forged.status).to.equal(401);
    });
  });
});
