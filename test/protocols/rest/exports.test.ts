/**
 * Issue 7 item 3 over real HTTPS: webhook-log exports. Create (site admin, Folder Admin, refused
 * without folder or path), the background build to `ready`, the signed CSV at results_url, and
 * the results endpoint's cursor pages (X-Svc-Cursor-Next only).
 */
import { renameSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { expect } from 'chai';
import { parse } from 'csv-parse/sync';
import { BlobGarbageEntity, ExportEntity, WebhookAttemptEntity } from '../../../src/db/entities.ts';
import { dbKind, startTestGateway, type TestGateway } from '../../helpers/gateway.ts';
import { API, createKey, createUser, expectError, keyAuth, unique } from './client.ts';
import { dbOf } from '../../helpers/internals.ts';

describe(`REST action notification exports (${dbKind})`, function () {
  this.timeout(60_000);
  let gw: TestGateway;
  let adminKey: string;
  let plainKey: string;
  const site = () => keyAuth(gw.siteKey);

  const ready = async (id: number, headers: Record<string, string>) => {
    for (let i = 0; i < 200; i++) {
      const r = await gw.request('GET', `${API}/action_notification_exports/${id}`, { headers });
      expect(r.status, r.text).to.equal(200);
      if (r.json.status !== 'building') return r.json as Record<string, unknown>;
      await new Promise((res) => setTimeout(res, 25));
    }
    throw new Error(`export ${id} never left building`);
  };

  before(async () => {
    gw = await startTestGateway({ events: { poll_interval_ms: 25 } });
    const admin = await createUser(gw, { username: unique('fadmin') });
    const plain = await createUser(gw, { username: unique('plain') });
    adminKey = (await createKey(gw, admin.id)).key;
    plainKey = (await createKey(gw, plain.id)).key;
    const r = await gw.request('POST', `${API}/permissions`, {
      headers: site(),
      body: { path: 'team', permission: 'admin', user_id: admin.id },
    });
    expect(r.status, r.text).to.equal(201);
    // 25 delivery records: 20 under team/ (odd ones failed with 500), 5 elsewhere.
    await dbOf(gw.core).work(async (em) => {
      const rows = [];
      for (let i = 0; i < 25; i++) {
        const path = i < 20 ? `team/sub/f${i}.txt` : `other/f${i}.txt`;
        rows.push({
          delivery_id: 1,
          created_at: new Date(Date.UTC(2025, 0, 1, 0, i)),
          status: i % 2 ? 500 : 200,
          message: i % 2 ? 'HTTP 500 "boom", really' : 'delivered (HTTP 200)',
          success: i % 2 === 0,
          request_headers: '{"Content-Type":"application/json"}',
          request_method: 'POST',
          request_url: i % 3 ? 'http://127.0.0.1:9/a' : 'http://127.0.0.1:9/b',
          path,
          folder: path.slice(0, path.lastIndexOf('/')),
        });
      }
      await em.insert(WebhookAttemptEntity, rows);
    });
  });
  after(() => gw.stop());

  it('builds a site admin export in the background; results_url is a signed CSV', async () => {
    const r = await gw.request('POST', `${API}/action_notification_exports`, {
      headers: site(),
      body: { start_at: '2025-01-01T00:00:00Z', end_at: '2025-01-02T00:00:00Z' },
    });
    expect(r.status, r.text).to.equal(201);
    expect(r.json.status).to.equal('building');
    expect(r.json.export_version).to.be.a('string');
    const done = await ready(r.json.id as number, site());
    expect(done.status).to.equal('ready');
    const url = new URL(done.results_url as string);
    const csv = await gw.request('GET', url.pathname);
    expect(csv.status).to.equal(200);
    expect(csv.headers['content-type']).to.match(/^text\/csv/);
    const rows = parse(csv.text, { columns: true }) as Record<string, string>[];
    expect(rows).to.have.length(25);
    expect(Object.keys(rows[0]!)).to.deep.equal([
      'id',
      'created_at',
      'status',
      'message',
      'success',
      'request_headers',
      'request_method',
      'request_url',
      'path',
      'folder',
    ]);
    // Quotes and commas survive the round trip.
    expect(rows[1]!.message).to.equal('HTTP 500 "boom", really');
    expect(rows[1]!.success).to.equal('false');
    expect(rows[0]!.created_at).to.equal(String(Date.UTC(2025, 0, 1) / 1000));
    expect((await gw.request('GET', `${url.pathname}x`)).status).to.equal(401);
  });

  it('filters by every query field, several values separated by commas', async () => {
    const r = await gw.request('POST', `${API}/action_notification_exports`, {
      headers: site(),
      body: {
        query_folder: 'team',
        query_status: '500',
        query_success: false,
        query_request_url: 'http://127.0.0.1:9/a,http://127.0.0.1:9/x',
        query_request_method: 'post',
      },
    });
    expect(r.status, r.text).to.equal(201);
    await ready(r.json.id as number, site());
    const page = await gw.request(
      'GET',
      `${API}/action_notification_export_results?action_notification_export_id=${r.json.id}`,
      { headers: site() },
    );
    expect(page.status, page.text).to.equal(200);
    const got = page.json as { path: string; status: number; request_url: string }[];
    // odd i < 20, not a multiple of 3: 1, 5, 7, 11, 13, 17, 19
    expect(got.map((g) => g.path)).to.deep.equal([1, 5, 7, 11, 13, 17, 19].map((i) => `team/sub/f${i}.txt`));
    const byPath = await gw.request('POST', `${API}/action_notification_exports`, {
      headers: site(),
      body: { query_path: 'team/sub/f2.txt,/other/f21.txt' },
    });
    await ready(byPath.json.id as number, site());
    const two = await gw.request(
      'GET',
      `${API}/action_notification_export_results?action_notification_export_id=${byPath.json.id}`,
      { headers: site() },
    );
    expect((two.json as { path: string }[]).map((g) => g.path)).to.deep.equal([
      'team/sub/f2.txt',
      'other/f21.txt',
    ]);
  });

  it('pages the results with X-Svc-Cursor-Next only', async () => {
    const r = await gw.request('POST', `${API}/action_notification_exports`, {
      headers: site(),
      body: { query_folder: 'team' },
    });
    await ready(r.json.id as number, site());
    const seen: number[] = [];
    let cursor = '';
    for (let n = 0; n < 10; n++) {
      const page = await gw.request(
        'GET',
        `${API}/action_notification_export_results?action_notification_export_id=${r.json.id}&per_page=6${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`,
        { headers: site() },
      );
      expect(page.status, page.text).to.equal(200);
      expect(page.headers['x-svc-cursor-prev']).to.equal(undefined);
      seen.push(...(page.json as { id: number }[]).map((x) => x.id));
      cursor = (page.headers['x-svc-cursor-next'] as string | undefined) ?? '';
      if (!cursor) break;
    }
    expect(seen).to.have.length(20);
    expect(new Set(seen).size).to.equal(20);
  });

  it('lets Folder Admins export their folder only, and non-admins only by folder or path', async () => {
    expectError(
      await gw.request('POST', `${API}/action_notification_exports`, {
        headers: keyAuth(adminKey),
        body: {},
      }),
      403,
      'not-authorized/non-admins-must-query-by-folder-or-path',
    );
    expectError(
      await gw.request('POST', `${API}/action_notification_exports`, {
        headers: keyAuth(adminKey),
        body: { query_folder: 'other' },
      }),
      403,
      'not-authorized/folder-admin-permission-required',
    );
    expectError(
      await gw.request('POST', `${API}/action_notification_exports`, {
        headers: keyAuth(plainKey),
        body: { query_folder: 'team' },
      }),
      403,
      'not-authorized/folder-admin-permission-required',
    );
    const mine = await gw.request('POST', `${API}/action_notification_exports`, {
      headers: keyAuth(adminKey),
      body: { query_folder: 'team/sub' },
    });
    expect(mine.status, mine.text).to.equal(201);
    const done = await ready(mine.json.id as number, keyAuth(adminKey));
    expect(done.status).to.equal('ready');
    const res = await gw.request(
      'GET',
      `${API}/action_notification_export_results?action_notification_export_id=${mine.json.id}`,
      { headers: keyAuth(adminKey) },
    );
    expect(res.json).to.have.length(20);
    // Someone else's export is not found for this user.
    expectError(
      await gw.request('GET', `${API}/action_notification_exports/${mine.json.id}`, {
        headers: keyAuth(plainKey),
      }),
      404,
      'not-found/action-notification-export-not-found',
    );
  });

  it("answers a Folder Admin with the folder's exports, full permission with 403, no permission with 404", async () => {
    const full = await createUser(gw, { username: unique('full') });
    const fullKey = (await createKey(gw, full.id)).key;
    const granted = await gw.request('POST', `${API}/permissions`, {
      headers: site(),
      body: { path: 'team', permission: 'full', user_id: full.id },
    });
    expect(granted.status, granted.text).to.equal(201);
    const team = await gw.request('POST', `${API}/action_notification_exports`, {
      headers: site(),
      body: { query_folder: 'team' },
    });
    expect(team.status, team.text).to.equal(201);
    const whole = await gw.request('POST', `${API}/action_notification_exports`, {
      headers: site(),
      body: {},
    });
    expect(whole.status, whole.text).to.equal(201);
    await ready(team.json.id as number, site());
    await ready(whole.json.id as number, site());
    const show = (id: unknown, key: string) =>
      gw.request('GET', `${API}/action_notification_exports/${id}`, { headers: keyAuth(key) });
    const results = (id: unknown, key: string) =>
      gw.request('GET', `${API}/action_notification_export_results?action_notification_export_id=${id}`, {
        headers: keyAuth(key),
      });

    // The Folder Admin of team reads the site admin's export of team, and its 20 results.
    const seen = await show(team.json.id, adminKey);
    expect(seen.status, seen.text).to.equal(200);
    expect(seen.json).to.include({ id: team.json.id, query_folder: 'team', status: 'ready' });
    const rows = await results(team.json.id, adminKey);
    expect(rows.status, rows.text).to.equal(200);
    expect(rows.json).to.have.length(20);
    // full is not Folder Admin: SPEC's access rule, named.
    expectError(await show(team.json.id, fullKey), 403, 'not-authorized/folder-admin-permission-required');
    expectError(await results(team.json.id, fullKey), 403, 'not-authorized/folder-admin-permission-required');
    // Without any permission on team the export is not there, exactly as an id no export has.
    for (const r of [
      await show(team.json.id, plainKey),
      await results(team.json.id, plainKey),
      await show(999999, plainKey),
      await results(999999, fullKey),
    ])
      expectError(r, 404, 'not-found/action-notification-export-not-found');
    // A whole-log export is the site's: no permission on the root, so not found for both.
    for (const key of [fullKey, adminKey])
      expectError(await show(whole.json.id, key), 404, 'not-found/action-notification-export-not-found');
  });

  it('rejects bad dates and fields, and a missing export id', async () => {
    expectError(
      await gw.request('POST', `${API}/action_notification_exports`, {
        headers: site(),
        body: { start_at: 'yesterday' },
      }),
      400,
      'bad-request/datetime-parse',
    );
    const bad = await gw.request('POST', `${API}/action_notification_exports`, {
      headers: site(),
      body: { query_status: 'teapot' },
    });
    expect(bad.status, bad.text).to.equal(422);
    expectError(
      await gw.request('GET', `${API}/action_notification_export_results`, { headers: site() }),
      400,
      'bad-request/request-params-required',
    );
  });

  it('streams an export larger than one read page into the CSV, in id order', async () => {
    // 4,500 records under big/: more than two of the builder's 2,000-row pages.
    await dbOf(gw.core).work(async (em) => {
      for (let start = 0; start < 4500; start += 500) {
        const rows = [];
        for (let i = start; i < start + 500; i++)
          rows.push({
            delivery_id: 2,
            created_at: new Date(Date.UTC(2025, 1, 1, 0, 0, i)),
            status: 200,
            message: 'delivered (HTTP 200)',
            success: true,
            request_headers: '{}',
            request_method: 'POST',
            request_url: 'http://127.0.0.1:9/big',
            path: `big/f${i}.txt`,
            folder: 'big',
          });
        await em.insert(WebhookAttemptEntity, rows);
      }
    });
    const r = await gw.request('POST', `${API}/action_notification_exports`, {
      headers: site(),
      body: { query_folder: 'big' },
    });
    expect(r.status, r.text).to.equal(201);
    const done = await ready(r.json.id as number, site());
    expect(done.status).to.equal('ready');
    const csv = await gw.request('GET', new URL(done.results_url as string).pathname);
    expect(csv.status).to.equal(200);
    expect(Number(csv.headers['content-length'])).to.equal(Buffer.byteLength(csv.text));
    const rows = parse(csv.text, { columns: true }) as Record<string, string>[];
    expect(rows).to.have.length(4500);
    expect(rows.map((x) => x.path)).to.deep.equal(Array.from({ length: 4500 }, (_, i) => `big/f${i}.txt`));
    const ids = rows.map((x) => Number(x.id));
    expect(ids.every((id, i) => i === 0 || id > ids[i - 1]!)).to.equal(true);
  });

  it('builds an export whose builder died, but never one another instance is building', async () => {
    const mk = async () => {
      const r = await gw.request('POST', `${API}/action_notification_exports`, {
        headers: site(),
        body: { query_folder: 'team' },
      });
      expect(r.status, r.text).to.equal(201);
      return r.json.id as number;
    };
    const [held, lapsed] = [await mk(), await mk()];
    // Claims as another instance would leave them: one still held, one whose holder died.
    await dbOf(gw.core).work(async (em) => {
      await em.update(
        ExportEntity,
        { id: held },
        { status: 'building', lease: 'other-instance', locked_until: new Date(Date.now() + 3_600_000) },
      );
      await em.update(
        ExportEntity,
        { id: lapsed },
        { status: 'building', lease: 'dead-instance', locked_until: new Date(Date.now() - 1000) },
      );
    });
    expect((await ready(lapsed, site())).status).to.equal('ready');
    await new Promise((res) => setTimeout(res, 200));
    const row = await dbOf(gw.core).read((em) => em.findOneByOrFail(ExportEntity, { id: held }));
    expect(row).to.include({ status: 'building', lease: 'other-instance' });
  });

  it('ends failed, saying why, when its CSV cannot be stored; results then answer export-not-ready', async () => {
    // A broken disk, as the blob store meets it: the blobs folder is a file.
    const blobs = path.join(gw.config.data_dir, 'blobs');
    renameSync(blobs, `${blobs}.moved`);
    writeFileSync(blobs, 'not a folder');
    try {
      const r = await gw.request('POST', `${API}/action_notification_exports`, {
        headers: site(),
        body: { query_folder: 'team' },
      });
      expect(r.status, r.text).to.equal(201);
      const done = await ready(r.json.id as number, site());
      expect(done).to.include({ status: 'failed', results_url: '' });
      const results = await gw.request(
        'GET',
        `${API}/action_notification_export_results?action_notification_export_id=${r.json.id}`,
        { headers: site() },
      );
      expectError(results, 422, 'processing-failure/export-not-ready');
      // Why, without the server's paths: an id to find the cause in the gateway's log.
      expect(results.json.error).to.match(/failed: the CSV could not be written \(error [0-9a-f-]{36};/);
      expect(results.json.error).not.to.include(gw.config.data_dir);
    } finally {
      rmSync(blobs);
      renameSync(`${blobs}.moved`, blobs);
    }
  });

  it('retention deletes exports older than retention_days and queues their CSV blobs', async () => {
    const r = await gw.request('POST', `${API}/action_notification_exports`, {
      headers: site(),
      body: { query_path: 'team/sub/f1.txt' },
    });
    const id = r.json.id as number;
    await ready(id, site());
    const before = await dbOf(gw.core).read((em) => em.findOneByOrFail(ExportEntity, { id }));
    expect(before.blob_id).to.be.a('string');
    const days = gw.core.config.events.retention_days;
    await gw.core.events.retention.tick(new Date(Date.now() + (days + 1) * 86_400_000));
    expect(await dbOf(gw.core).read((em) => em.existsBy(ExportEntity, { id }))).to.equal(false);
    expect(
      await dbOf(gw.core).read((em) => em.existsBy(BlobGarbageEntity, { blob_id: before.blob_id! })),
    ).to.equal(true);
  });
});
