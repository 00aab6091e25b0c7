/**
 * The API reference (GET /api/rest/v1/openapi.json): a valid OpenAPI 3.1 document, served without
 * credentials, naming every route the REST routers register (and no route they do not), and true
 * to what the gateway answers: a representative flow over real HTTPS (users, groups, permissions,
 * notifications, API keys, SSH keys, sessions, folders, a multi-step upload, list, stat, download,
 * move, copy, zip, history, exports, billing, errors) checks each status and body against the
 * documented response schema with ajv (JSON Schema 2020-12, OpenAPI 3.1's dialect).
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Validator } from '@seriousme/openapi-schema-validator';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import { expect } from 'chai';
import { openApiDocument } from '../../../protocols/rest/openapi.ts';
import { buildApp } from '../../../protocols/rest/server.ts';
import { dbKind, startTestGateway, type Response, type TestGateway } from '../../helpers/gateway.ts';
import { API, keyAuth, sessionAuth, unique } from './client.ts';
import { operatorPrincipal } from '../../../src/core/index.ts';

// ajv-formats is CommonJS; its default export arrives wrapped under ESM.
const addFormats = ((addFormatsModule as unknown as { default?: unknown }).default ??
  addFormatsModule) as unknown as (ajv: Ajv2020) => void;

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

/** RouterLike is what a @koa/router dispatch middleware exposes: its router and its layers. */
interface RouterLike {
  stack: { path: string; methods: string[] }[];
}

/** registeredRoutes walks the app's routers: every method and path they answer. */
function registeredRoutes(gw: TestGateway): { method: string; path: string }[] {
  const app = buildApp(gw.core);
  const routes: { method: string; path: string }[] = [];
  for (const mw of app.middleware as unknown as { router?: RouterLike }[]) {
    for (const layer of mw.router?.stack ?? []) {
      // Koa's router answers HEAD for every GET by itself; a HEAD of its own is a route.
      const methods = layer.methods.filter((m) => m !== 'HEAD' || !layer.methods.includes('GET'));
      for (const method of methods) routes.push({ method: method.toLowerCase(), path: layer.path });
    }
  }
  return routes;
}

/** templateOf turns a router path into the document's form (`:id` → `{id}`, `{/*path}` → `/{path}`). */
const templateOf = (route: string) => route.replace(/\{\/\*(\w+)\}/g, '/{$1}').replace(/:(\w+)/g, '{$1}');

describe(`REST API reference (OpenAPI 3.1, ${dbKind})`, function () {
  this.timeout(120_000);
  let gw: TestGateway;
  let doc: Json;
  let ajv: Ajv2020;
  const validators = new Map<string, ValidateFunction>();
  /** every documented operation a response was checked against, as `METHOD /path` */
  const exercised = new Set<string>();

  before(async () => {
    gw = await startTestGateway();
    doc = openApiDocument() as Json;
    ajv = new Ajv2020({ strict: false, allErrors: true });
    addFormats(ajv);
    ajv.addSchema({ components: doc.components }, 'doc');
  });
  after(async () => gw?.stop());

  // The documented operation a request reaches: literal paths before templates, `{path}` taking
  // the rest of the URL (empty for the site root).
  function operationOf(method: string, urlPath: string): { template: string; op: Json } | null {
    const root = !urlPath.startsWith(`${API}/`);
    const rest = root ? urlPath : urlPath.slice(API.length);
    const pathOnly = rest.split('?')[0]!;
    const candidates = Object.entries(doc.paths as Json)
      .filter(([, item]) => Boolean(item.servers) === root && item[method])
      .sort(([a], [b]) => (a.includes('{') ? 1 : 0) - (b.includes('{') ? 1 : 0));
    for (const [template, item] of candidates) {
      const pattern = template
        .replace(/[.]/g, '\\.')
        .replace(/\/\{path\}/, '(?:/.*)?')
        .replace(/\{\w+\}/g, '[^/]+');
      if (
        new RegExp(`^${pattern}$`).test(pathOnly) ||
        new RegExp(`^${pattern}$`).test(pathOnly.replace(/\.json$/, ''))
      )
        return { template, op: item[method] };
    }
    return null;
  }

  function validatorFor(schema: Json): ValidateFunction {
    const text = JSON.stringify(schema).replaceAll('"#/components/', '"doc#/components/');
    let v = validators.get(text);
    if (!v) {
      v = ajv.compile(JSON.parse(text) as Json);
      validators.set(text, v);
    }
    return v;
  }

  /** checked sends a request and asserts its status and body are the document's for that operation. */
  async function checked(
    method: string,
    urlPath: string,
    opts: { headers?: Record<string, string>; body?: unknown } = {},
  ): Promise<Response> {
    const r = await gw.request(method.toUpperCase(), urlPath, opts);
    const where = `${method.toUpperCase()} ${urlPath} → ${r.status}`;
    const found = operationOf(method.toLowerCase(), urlPath);
    expect(found, `${where}: no operation in the document`).to.not.equal(null);
    const { template, op } = found!;
    const responses = op.responses as Json;
    let response = responses[String(r.status)] ?? responses[`${String(r.status)[0]}XX`];
    expect(response, `${where}: status not documented for ${template} (${Object.keys(responses).join(', ')})`)
      .to.exist;
    if (response.$ref) response = doc.components.responses[String(response.$ref).split('/').pop()!];
    const contentType = String(r.headers['content-type'] ?? '').split(';')[0]!;
    if (response.content && r.text !== '') {
      expect(Object.keys(response.content), `${where}: content type`).to.include(contentType);
      const schema = response.content[contentType].schema as Json;
      if (contentType === 'application/json') {
        const validate = validatorFor(schema);
        const valid = validate(r.json);
        expect(
          valid,
          `${where}: body does not match ${template}\n${ajv.errorsText(validate.errors)}\n${r.text.slice(0, 500)}`,
        ).to.equal(true);
      }
    }
    // What the gateway accepted, the document accepts too (its request schemas are the core's).
    const requestSchema = op.requestBody?.content?.['application/json']?.schema as Json | undefined;
    if (r.status < 300 && requestSchema && opts.body && !Buffer.isBuffer(opts.body)) {
      const validate = validatorFor(requestSchema);
      expect(
        validate(opts.body),
        `${where}: the request body the gateway took does not match ${template}'s requestBody\n${ajv.errorsText(validate.errors)}`,
      ).to.equal(true);
    }
    exercised.add(`${method.toUpperCase()} ${template}`);
    return r;
  }

  it('is a valid OpenAPI 3.1 document', async () => {
    const result = await new Validator().validate(doc as never);
    expect(result.valid, JSON.stringify(result.errors, null, 1)).to.equal(true);
    expect(doc.openapi).to.equal('3.1.0');
  });

  it('is served at /api/rest/v1/openapi.json without credentials, and only as JSON', async () => {
    const r = await gw.request('GET', `${API}/openapi.json`);
    expect(r.status, r.text).to.equal(200);
    expect(r.headers['content-type']).to.match(/^application\/json/);
    expect(r.json).to.deep.equal(JSON.parse(JSON.stringify(doc)));
    const xml = await gw.request('GET', `${API}/openapi.xml`);
    expect(xml.status).to.equal(406);
  });

  it('names every route the routers register, and none they do not', () => {
    const registered = registeredRoutes(gw);
    expect(registered.length).to.be.greaterThan(40);
    const missing: string[] = [];
    const documented = new Set<string>();
    for (const { method, path: route } of registered) {
      const versioned = route === API || route.startsWith(`${API}/`);
      const rel = versioned ? route.slice(API.length) : route;
      const template = templateOf(rel);
      const item = (doc.paths[template] ?? doc.paths[`${template}.json`]) as Json | undefined;
      const key = `${method.toUpperCase()} ${template}`;
      if (versioned) {
        if (!item?.[method] || item.servers) missing.push(`${key} (registered as ${route})`);
        else documented.add(key);
        continue;
      }
      // Outside the prefix: the signed URLs (documented with the site root as their server), or the
      // earlier form of the API, which serves a subset of the versioned routes (SPEC "Versioning").
      if (item?.servers && item[method]) documented.add(key);
      else if (!item?.[method]) missing.push(`${key} (registered as ${route})`);
    }
    expect(
      missing,
      `routes missing from protocols/rest/openapi.ts operations:\n${missing.join('\n')}`,
    ).to.deep.equal([]);
    const stale: string[] = [];
    for (const [template, item] of Object.entries(doc.paths as Json))
      for (const method of ['get', 'head', 'post', 'put', 'patch', 'delete'])
        if (
          (item as Json)[method] &&
          !documented.has(`${method.toUpperCase()} ${template}`) &&
          template !== '/openapi.json'
        )
          stale.push(`${method.toUpperCase()} ${template}`);
    expect(stale, 'documented operations no router registers').to.deep.equal([]);
  });

  it('describes what a representative flow really answers', async () => {
    const site = keyAuth(gw.siteKey);
    const json = (body: unknown) => ({ headers: site, body });

    await checked('get', `${API}/openapi.json`);

    // Sessions
    const s = await checked('post', `${API}/sessions`, {
      body: { username: 'admin', password: 'admin-password' },
    });
    expect(s.status).to.equal(200);
    const bad = await checked('post', `${API}/sessions`, {
      body: { username: 'admin', password: 'wrong-password' },
    });
    expect(bad.status).to.equal(401);
    const admin = sessionAuth(s.json.id as string);

    // Users, groups, permissions, notifications
    const username = unique('ref');
    const user = await checked(
      'post',
      `${API}/users`,
      json({ username, password: 'ref-password-1', user_root: 'ref/' }),
    );
    expect(user.status).to.equal(201);
    const uid = user.json.id as number;
    await checked('get', `${API}/users`, { headers: site });
    await checked('get', `${API}/users/${uid}`, { headers: admin });
    await checked('patch', `${API}/users/${uid}`, json({ name: 'Ref User' }));
    await checked('put', `${API}/users/${uid}`, json({ email: 'ref@example.com' }));
    const invalid = await checked('post', `${API}/users`, json({ username: '', password: 'x' }));
    expect(invalid.status).to.equal(422);
    expect(invalid.json.model_errors).to.have.property('password');
    expect((await checked('get', `${API}/users/99999999`, { headers: site })).status).to.equal(404);
    expect((await checked('get', `${API}/users`)).status).to.equal(401);

    const group = await checked('post', `${API}/groups`, json({ name: unique('g'), user_ids: String(uid) }));
    const gid = group.json.id as number;
    await checked('get', `${API}/groups`, { headers: site });
    await checked('get', `${API}/groups/${gid}`, { headers: site });
    await checked('put', `${API}/groups/${gid}`, json({ notes: 'n' }));
    await checked('patch', `${API}/groups/${gid}`, json({ notes: 'm' }));

    await checked('post', `${API}/folders/ref`, { headers: site });
    const perm = await checked(
      'post',
      `${API}/permissions`,
      json({ path: 'ref', permission: 'full', user_id: uid }),
    );
    expect(perm.status).to.equal(201);
    await checked('post', `${API}/permissions`, json({ path: 'ref', permission: 'readonly', group_id: gid }));
    await checked('get', `${API}/permissions`, { headers: site });
    await checked('get', `${API}/permissions?filter[path]=ref`, { headers: site });
    const note = await checked('post', `${API}/notifications`, json({ path: 'ref', user_id: uid }));
    await checked('get', `${API}/notifications`, { headers: site });
    // Group members one by one and effective rights (extensions of the admin pages)
    await checked('delete', `${API}/groups/${gid}/members/${uid}`, { headers: site });
    await checked('post', `${API}/groups/${gid}/members`, json({ user_id: uid }));
    await checked('get', `${API}/groups/${gid}/members`, { headers: site });
    await checked('get', `${API}/permissions/effective?user_id=${uid}&path=ref/sub`, { headers: site });

    // API keys and SSH keys
    const key = await checked('post', `${API}/api_keys`, json({ user_id: uid, name: 'ref key' }));
    expect(key.json.key).to.be.a('string');
    await checked('get', `${API}/api_keys?user_id=${uid}`, { headers: site });
    await checked('get', `${API}/api_keys/${key.json.id}`, { headers: site });
    const userKey = keyAuth(key.json.key as string);
    await checked('get', `${API}/api_key`, { headers: userKey });
    const dir = mkdtempSync(path.join(os.tmpdir(), 'svc-openapi-'));
    try {
      execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-f', path.join(dir, 'k')]);
      const pub = readFileSync(path.join(dir, 'k.pub'), 'utf8');
      const pk = await checked('post', `${API}/public_keys`, {
        headers: userKey,
        body: { title: 'laptop', public_key: pub },
      });
      expect(pk.status).to.equal(201);
      await checked('get', `${API}/public_keys`, { headers: userKey });
      await checked('get', `${API}/public_keys/${pk.json.id}`, { headers: userKey });
      await checked('delete', `${API}/public_keys/${pk.json.id}`, { headers: userKey });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }

    // Share links: the user may share (attachments_permission) what they may read
    await checked('patch', `${API}/users/${uid}`, json({ attachments_permission: true }));
    const link = await checked('post', `${API}/bundles`, {
      headers: userKey,
      body: { paths: ['ref'], kind: 'download', password: 'link-password-1', max_uses: 3 },
    });
    expect(link.status).to.equal(201);
    await checked('get', `${API}/bundles`, { headers: userKey });
    await checked('get', `${API}/bundles/${link.json.id}`, { headers: userKey });
    await checked('patch', `${API}/bundles/${link.json.id}`, {
      headers: userKey,
      body: { description: 'notes' },
    });
    await checked('put', `${API}/bundles/${link.json.id}`, { headers: userKey, body: { max_uses: 5 } });
    const refused = await checked('post', `${API}/bundles`, { headers: userKey, body: { paths: [] } });
    expect(refused.status).to.equal(422);
    await checked('delete', `${API}/bundles/${link.json.id}`, { headers: userKey });

    // Folders and files: a multi-step upload, list, stat, download, move, copy, zip, delete
    await checked('post', `${API}/folders/ref/sub`, { headers: userKey });
    await checked('get', `${API}/folders`, { headers: site });
    await checked('get', `${API}/folders/ref?sort_by[size]=desc`, { headers: userKey });
    const started = await checked('post', `${API}/files/ref/a.txt`, {
      headers: userKey,
      body: { action: 'put' },
    });
    expect(started.json.ref).to.be.a('string');
    const upload = new URL(started.json.upload_uri as string);
    const part = await checked('put', `${upload.pathname}${upload.search}`, {
      headers: started.json.headers as Record<string, string>,
      body: Buffer.from('hello openapi\n'),
    });
    expect(part.status, part.text).to.equal(200);
    const ended = await checked('post', `${API}/files/ref/a.txt`, {
      headers: userKey,
      body: { action: 'end', ref: started.json.ref },
    });
    expect(ended.json).to.include({ path: 'ref/a.txt', size: 14 });
    await checked('get', `${API}/folders/ref`, { headers: userKey });
    await checked('get', `${API}/files/ref/a.txt?action=stat`, { headers: userKey });
    const dl = await checked('get', `${API}/files/ref/a.txt`, { headers: userKey });
    const download = new URL(dl.json.download_uri as string);
    const bytes = await checked('get', `${download.pathname}${download.search}`);
    expect(bytes.text).to.equal('hello openapi\n');
    await checked('head', `${download.pathname}${download.search}`);
    await checked('post', `${API}/files/ref/a.txt`, {
      headers: userKey,
      body: { 'copy-destination': 'ref/b.txt' },
    });
    await checked('post', `${API}/files/ref/b.txt`, {
      headers: userKey,
      body: { 'move-destination': 'ref/sub/b.txt' },
    });
    await checked('get', `${API}/zip/ref`, { headers: userKey });
    expect((await checked('get', `${API}/files/ref/missing.txt`, { headers: userKey })).status).to.equal(404);
    await checked('delete', `${API}/files/ref/sub/b.txt`, { headers: userKey });

    // History, exports, billing
    await checked('get', `${API}/history`, { headers: site });
    await checked('get', `${API}/history/files/ref/a.txt`, { headers: site });
    await checked('get', `${API}/history/folders/ref`, { headers: site });
    await checked('get', `${API}/history/users/${uid}?sort_by[created_at]=desc`, { headers: site });
    await checked('get', `${API}/history/login`, { headers: site });
    const exp = await checked('post', `${API}/action_notification_exports`, json({ query_folder: 'ref' }));
    expect(exp.status).to.equal(201);
    await checked('get', `${API}/action_notification_exports/${exp.json.id}`, { headers: site });
    await checked(
      'get',
      `${API}/action_notification_export_results?action_notification_export_id=${exp.json.id}`,
      {
        headers: site,
      },
    );
    // The webhook log export is built in the background: poll until ready, then its CSV.
    let ready: Json = exp.json;
    for (let i = 0; i < 100 && ready.status === 'building'; i++) {
      await new Promise((r) => setTimeout(r, 100));
      ready = (await checked('get', `${API}/action_notification_exports/${exp.json.id}`, { headers: site }))
        .json;
    }
    expect(ready.status).to.equal('ready');
    const csv = new URL(ready.results_url as string);
    expect((await checked('get', `${csv.pathname}${csv.search}`)).status).to.equal(200);

    await gw.core.billing.import([
      {
        id: 301,
        type: 'invoice',
        amount: 12.5,
        balance: 0,
        created_at: '2026-01-31T00:00:00Z',
        currency: 'USD',
      },
      {
        id: 302,
        type: 'payment',
        amount: 12.5,
        balance: 0,
        created_at: '2026-02-01T00:00:00Z',
        currency: 'USD',
      },
    ]);
    await checked('get', `${API}/invoices`, { headers: site });
    await checked('get', `${API}/payments`, { headers: site });
    const invoice = await checked('get', `${API}/invoices/301`, { headers: site });
    await checked('get', `${API}/payments/302`, { headers: site });
    const printable = new URL(invoice.json.download_uri as string);
    expect((await checked('get', `${printable.pathname}${printable.search}`)).status).to.equal(200);
    expect((await checked('get', `${API}/site`, { headers: site })).json.listeners).to.have.length(5);

    // Live connections (issue 15): one of this instance, listed once renewed, then ended
    const live = gw.core.connections.open({
      principal: operatorPrincipal(),
      ip: '127.0.0.1',
      close: () => undefined,
    });
    await gw.core.connections.renew();
    await checked('get', `${API}/connections`, { headers: site });
    await checked('delete', `${API}/connections/${live.id}`, { headers: site });
    live.close();

    // Deletions, then logging out
    await checked('delete', `${API}/notifications/${note.json.id}`, { headers: site });
    await checked('delete', `${API}/permissions/${perm.json.id}`, { headers: site });
    await checked('delete', `${API}/api_keys/${key.json.id}`, { headers: site });
    await checked('delete', `${API}/groups/${gid}`, { headers: site });
    await checked('delete', `${API}/users/${uid}`, { headers: site });
    await checked('delete', `${API}/sessions`, { headers: admin });

    // Users: search and sort (extensions), unlock
    const listed = await checked('get', `${API}/users?search=ADMIN&sort_by[last_login_at]=desc&per_page=5`, {
      headers: site,
    });
    expect(listed.json.map((u: Json) => u.username)).to.include('admin');
    const unlocked = await checked('post', `${API}/users/${listed.json[0].id}/unlock`, { headers: site });
    expect(unlocked.json.locked_until).to.equal(null);

    // The flow reached the whole document but the webhook retry (it needs a failed delivery;
    // test/protocols/rest/events.test.ts covers it).
    const all = Object.entries(doc.paths as Json).flatMap(([t, item]) =>
      ['get', 'head', 'post', 'put', 'patch', 'delete']
        .filter((m) => (item as Json)[m])
        .map((m) => `${m.toUpperCase()} ${t}`),
    );
    const untouched = all.filter((o) => !exercised.has(o));
    expect(untouched, 'not exercised').to.deep.equal(['POST /action_webhook_failures/{id}/retry']);
  });
});
