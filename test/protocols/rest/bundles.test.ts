/**
 * Share links (issue 14): the REST resource /bundles (create, list, show, update, revoke, rights,
 * every error type) and the recipient's calls under /s/<code> without an account: the sharer's
 * rights checked at every use, maximum uses, expiry, password, and each use an Action with
 * interface `web` and the recipient's address (127.0.0.2 here).
 */
import { execFile, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { promisify } from 'node:util';
import { expect } from 'chai';
import { MoreThan } from 'typeorm';
import { operatorPrincipal } from '../../../src/core/index.ts';
import { ActionEntity } from '../../../src/db/entities.ts';
import { startTestGateway, type RequestOptions, type TestGateway } from '../../helpers/gateway.ts';
import { dbOf } from '../../helpers/internals.ts';
import { API, createKey, createUser, expectError, keyAuth, login, sessionAuth } from './client.ts';

const RECIPIENT = '127.0.0.2';
const execFileAsync = promisify(execFile);

describe('REST /bundles and share links', () => {
  let gw: TestGateway;
  let sharer: Awaited<ReturnType<typeof createUser>>;
  let sharerAuth: Record<string, string>;
  const site = () => ({ headers: keyAuth(gw.siteKey) });

  const write = (p: string, text: string) =>
    gw.core.files.session(operatorPrincipal()).write(p, Readable.from([Buffer.from(text)]));
  const grant = async (userId: number, p: string, permission: string) => {
    const r = await gw.request('POST', `${API}/permissions`, {
      ...site(),
      body: { path: p, user_id: userId, permission },
    });
    expect(r.status, r.text).to.equal(201);
    return r.json.id as number;
  };
  const create = (body: Record<string, unknown>, headers = sharerAuth) =>
    gw.request('POST', `${API}/bundles`, { headers, body });
  const made = async (body: Record<string, unknown>) => {
    const r = await create(body);
    expect(r.status, r.text).to.equal(201);
    return r.json as { id: number; code: string; url: string } & Record<string, unknown>;
  };
  /** as a recipient: no credentials, from another address */
  const visit = (method: string, p: string, opts: RequestOptions = {}) =>
    gw.request(method, p, { localAddress: RECIPIENT, ...opts });
  const actionsSince = async (id: number) =>
    dbOf(gw.core).read((em) => em.find(ActionEntity, { where: { id: MoreThan(id) }, order: { id: 'ASC' } }));
  const lastActionId = async () =>
    (await dbOf(gw.core).read((em) => em.find(ActionEntity, { order: { id: 'DESC' }, take: 1 })))[0]?.id ?? 0;

  before(async () => {
    // A low per-address limit, reached only by the guessing test (from its own address).
    gw = await startTestGateway({ lockout: { ip_max_failures: 3 } });
    for (const f of ['share', 'share/docs', 'share/inbox', 'other']) {
      const r = await gw.request('POST', `${API}/folders/${f}`, site());
      expect(r.status, r.text).to.equal(201);
    }
    await write('share/a.txt', 'alpha');
    await write('share/docs/b.txt', 'bravo');
    await write('share/docs/c.html', '<script>alert(1)</script>');
    await write('other/secret.txt', 'secret');
    sharer = await createUser(gw, { attachments_permission: true });
    await grant(sharer.id, 'share', 'full');
    sharerAuth = sessionAuth(await login(gw, sharer.username, sharer.password));
  });
  after(() => gw?.stop());

  describe('the resource', () => {
    it('creates, lists, shows, updates and revokes a link, each an Action of the sharer', async () => {
      const before = await lastActionId();
      const b = await made({ paths: ['share/a.txt', 'share/docs'], description: 'for Bob', max_uses: 3 });
      expect(b).to.include({
        kind: 'download',
        description: 'for Bob',
        max_uses: 3,
        uses: 0,
        has_password: false,
      });
      expect(b.user_id).to.equal(sharer.id);
      expect(b.paths).to.deep.equal(['share/a.txt', 'share/docs']);
      expect(b.code).to.match(/^[A-Za-z0-9_-]{22}$/);
      expect(b.url).to.match(new RegExp(`/s/${b.code}$`));
      expect(b).to.not.have.property('password_hash');

      const list = await gw.request('GET', `${API}/bundles`, { headers: sharerAuth });
      expect(list.status, list.text).to.equal(200);
      expect(list.json.map((x: { id: number }) => x.id)).to.include(b.id);
      const shown = await gw.request('GET', `${API}/bundles/${b.id}`, { headers: sharerAuth });
      expect(shown.json).to.deep.equal(b);

      const when = new Date(Date.now() + 86_400_000).toISOString();
      const upd = await gw.request('PATCH', `${API}/bundles/${b.id}`, {
        headers: sharerAuth,
        body: { expires_at: when, max_uses: 5, description: 'changed', password: 'open-sesame' },
      });
      expect(upd.status, upd.text).to.equal(200);
      expect(upd.json).to.include({
        max_uses: 5,
        description: 'changed',
        has_password: true,
        expires_at: when,
      });

      const xml = await gw.request('GET', `${API}/bundles/${b.id}.xml`, { headers: sharerAuth });
      expect(xml.status).to.equal(200);
      expect(xml.text).to.include('<bundle>').and.include(`<code>${b.code}</code>`);

      const del = await gw.request('DELETE', `${API}/bundles/${b.id}`, { headers: sharerAuth });
      expect(del.status, del.text).to.equal(200);
      expectError(
        await gw.request('GET', `${API}/bundles/${b.id}`, { headers: sharerAuth }),
        404,
        'not-found/bundle-not-found',
      );
      expectError(await visit('GET', `/s/${b.code}/info`), 422, 'processing-failure/invalid-bundle-code');
      const acts = (await actionsSince(before)).filter((a) => a.action.startsWith('bundle_'));
      expect(acts.map((a) => a.action)).to.deep.equal(['bundle_create', 'bundle_update', 'bundle_destroy']);
      expect(acts.every((a) => a.user_id === sharer.id && a.interface === 'restapi')).to.equal(true);
    });

    it('lists only the caller’s own links; a site admin sees everyone’s', async () => {
      const other = await createUser(gw, { attachments_permission: true });
      await grant(other.id, 'share', 'readonly');
      const otherAuth = sessionAuth(await login(gw, other.username, other.password));
      const theirs = await create({ paths: 'share/a.txt' }, otherAuth);
      expect(theirs.status, theirs.text).to.equal(201);
      const mine = await made({ paths: 'share/a.txt' });
      const seen = await gw.request('GET', `${API}/bundles`, { headers: sharerAuth });
      const ids = seen.json.map((x: { id: number }) => x.id);
      expect(ids).to.include(mine.id).and.not.include(theirs.json.id);
      expectError(
        await gw.request('GET', `${API}/bundles/${theirs.json.id}`, { headers: sharerAuth }),
        404,
        'not-found/bundle-not-found',
      );
      expectError(
        await gw.request('DELETE', `${API}/bundles/${theirs.json.id}`, { headers: sharerAuth }),
        404,
        'not-found/bundle-not-found',
      );
      const all = await gw.request('GET', `${API}/bundles`, site());
      expect(all.json.map((x: { id: number }) => x.id)).to.include.members([mine.id, theirs.json.id]);
    });

    it('refuses a user without attachments_permission: not-allowed-to-create-bundle', async () => {
      const plain = await createUser(gw);
      await grant(plain.id, 'share', 'full');
      const auth = sessionAuth(await login(gw, plain.username, plain.password));
      expectError(
        await create({ paths: 'share/a.txt' }, auth),
        403,
        'not-authorized/not-allowed-to-create-bundle',
      );
      // A site-wide key has no user to own the link.
      expectError(
        await create({ paths: 'share/a.txt' }, keyAuth(gw.siteKey)),
        403,
        'not-authorized/not-allowed-to-create-bundle',
      );
    });

    it('takes the sharer’s full and desktop-app keys (SPEC: their share-link functions), not other restricted keys', async () => {
      const desktop = await createKey(gw, sharer.id, { permission_set: 'desktop_app' });
      const ok = await create({ paths: 'share/a.txt' }, keyAuth(desktop.key));
      expect(ok.status, ok.text).to.equal(201);
      const office = await createKey(gw, sharer.id, { permission_set: 'office_integration' });
      expectError(
        await create({ paths: 'share/a.txt' }, keyAuth(office.key)),
        403,
        'not-authorized/api-key-only-for-office-integration',
      );
    });

    it('needs read rights on each path (write for an upload link), and existing paths', async () => {
      expectError(
        await create({ paths: ['share/a.txt', 'other/secret.txt'] }),
        403,
        'not-authorized/read-permission-required',
      );
      expectError(await create({ paths: 'share/missing.txt' }), 404, 'not-found/bundle-path-not-found');
      const reader = await createUser(gw, { attachments_permission: true });
      await grant(reader.id, 'share', 'readonly');
      const auth = sessionAuth(await login(gw, reader.username, reader.password));
      expectError(
        await create({ paths: 'share/inbox', kind: 'upload' }, auth),
        403,
        'not-authorized/write-permission-required',
      );
      expectError(
        await create({ paths: 'share/a.txt', kind: 'upload' }),
        422,
        'processing-failure/bundle-operation-requires-subfolder',
      );
      const bad = await create({ paths: [], kind: 'sideways', max_uses: 0 });
      expectError(bad, 422, 'processing-failure/model-save-error');
      expect(Object.keys(bad.json.model_errors)).to.include.members(['paths', 'kind', 'max_uses']);
      expectError(
        await create({ paths: ['share/a.txt', 'share/docs/../a.txt'] }),
        400,
        'bad-request/invalid-path',
      );
    });
  });

  describe('recipients', () => {
    it('open a download link, list inside it, download a file and a zip; each use an Action from their address', async () => {
      const b = await made({ paths: ['share/a.txt', 'share/docs'] });
      const before = await lastActionId();
      const info = await visit('GET', `/s/${b.code}/info`);
      expect(info.status, info.text).to.equal(200);
      expect(info.json.kind).to.equal('download');
      expect(info.json.entries.map((e: { path: string }) => e.path)).to.deep.equal(['a.txt', 'docs']);
      const list = await visit('GET', `/s/${b.code}/list/docs`);
      expect(list.json.map((e: { path: string }) => e.path)).to.deep.equal(['docs/b.txt', 'docs/c.html']);
      const file = await visit('GET', `/s/${b.code}/files/docs/b.txt`);
      expect(file.status, file.text).to.equal(200);
      expect(file.text).to.equal('bravo');
      expect(file.headers['content-disposition']).to.match(/^attachment/);
      const html = await visit('GET', `/s/${b.code}/files/docs/c.html`);
      expect(html.headers['content-type']).to.equal('application/octet-stream');
      expectError(
        await visit('GET', `/s/${b.code}/files/secret.txt`),
        404,
        'not-found/bundle-path-not-found',
      );
      expectError(await visit('GET', `/s/${b.code}/list/docs/..`), 400, 'bad-request/invalid-path');

      const zip = await visit('GET', `/s/${b.code}/zip`);
      expect(zip.status, zip.text).to.equal(200);
      expect(zip.headers['content-type']).to.equal('application/zip');
      expect(zip.text.startsWith('PK')).to.equal(true);
      const shown = await gw.request('GET', `${API}/bundles/${b.id}`, { headers: sharerAuth });
      // b.txt, c.html and the zip; opening, listing and a refused path are no use.
      expect(shown.json.uses).to.equal(3);
      const acts = await actionsSince(before);
      expect(acts.length).to.be.greaterThan(4);
      for (const a of acts) expect(a).to.include({ interface: 'web', ip: RECIPIENT, user_id: sharer.id });
      // One `read` for the download and one for the zip's copy.
      const reads = acts.filter((a) => a.action === 'read' && a.path === 'share/docs/b.txt');
      expect(reads.length).to.equal(2);
    });

    it('the zip holds every shared file with its content', async () => {
      const b = await made({ paths: ['share/a.txt', 'share/docs'] });
      const dir = mkdtempSync(path.join(os.tmpdir(), 'svc-bundle-zip-'));
      try {
        // curl runs beside the in-process gateway (not spawnSync, which would stop its event loop).
        const r = await execFileAsync('curl', [
          '-sk',
          '--interface',
          RECIPIENT,
          '-o',
          `${dir}/all.zip`,
          '-w',
          '%{http_code}',
          `https://127.0.0.1:${gw.port}/s/${b.code}/zip`,
        ]);
        expect(r.stdout).to.equal('200');
        const text = (m: string) =>
          spawnSync('unzip', ['-p', `${dir}/all.zip`, m], { encoding: 'utf8' }).stdout;
        expect(text('a.txt')).to.equal('alpha');
        expect(text('docs/b.txt')).to.equal('bravo');
        const names = spawnSync('unzip', ['-Z1', `${dir}/all.zip`], { encoding: 'utf8' })
          .stdout.trim()
          .split('\n');
        expect(names.sort()).to.deep.equal(['a.txt', 'docs/', 'docs/b.txt', 'docs/c.html']);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });

    it('a preview link lists but refuses every download: bundle-only-allows-previews', async () => {
      const b = await made({ paths: ['share/docs'], kind: 'preview' });
      const info = await visit('GET', `/s/${b.code}/info`);
      expect(info.status, info.text).to.equal(200);
      expect((await visit('GET', `/s/${b.code}/list/docs`)).json).to.have.length(2);
      expectError(
        await visit('GET', `/s/${b.code}/files/docs/b.txt`),
        422,
        'processing-failure/bundle-only-allows-previews',
      );
      expectError(
        await visit('GET', `/s/${b.code}/zip`),
        422,
        'processing-failure/bundle-only-allows-previews',
      );
      // Opening is what a preview link is used for: it counts.
      const once = await made({ paths: ['share/docs'], kind: 'preview', max_uses: 1 });
      expect((await visit('GET', `/s/${once.code}/info`)).json.uses_left).to.equal(0);
      expectError(
        await visit('GET', `/s/${once.code}/info`),
        403,
        'not-authorized/bundle-maximum-uses-reached',
      );
    });

    it('an upload link takes files into its folder, lists nothing and never overwrites', async () => {
      const b = await made({ paths: 'share/inbox', kind: 'upload', max_uses: 2 });
      const before = await lastActionId();
      const info = await visit('GET', `/s/${b.code}/info`);
      expect(info.json.kind).to.equal('upload');
      expect(info.json.entries.map((e: { path: string }) => e.path)).to.deep.equal(['inbox']);
      const put = await visit('PUT', `/s/${b.code}/files/report.txt`, { body: 'from a stranger' });
      expect(put.status, put.text).to.equal(201);
      expect(put.json).to.include({ path: 'report.txt', size: 15 });
      const stored = await gw.core.files.session(operatorPrincipal()).openRead('share/inbox/report.txt');
      const chunks: Buffer[] = [];
      for await (const c of stored.stream) chunks.push(c as Buffer);
      expect(Buffer.concat(chunks).toString()).to.equal('from a stranger');
      expectError(
        await visit('PUT', `/s/${b.code}/files/report.txt`, { body: 'again' }),
        422,
        'processing-failure/destination-exists',
      );
      expectError(
        await visit('GET', `/s/${b.code}/list/inbox`),
        403,
        'not-authorized/read-permission-required',
      );
      expectError(
        await visit('GET', `/s/${b.code}/files/inbox/report.txt`),
        403,
        'not-authorized/read-permission-required',
      );
      expectError(
        await visit('PUT', `/s/${b.code}/files/sub/x.txt`, { body: 'x' }),
        400,
        'bad-request/invalid-path',
      );
      const created = (await actionsSince(before)).find((a) => a.action === 'create');
      expect(created).to.include({
        path: 'share/inbox/report.txt',
        interface: 'web',
        ip: RECIPIENT,
        user_id: sharer.id,
      });
      // One use spent, one left; the second upload uses it up.
      expect((await visit('PUT', `/s/${b.code}/files/two.txt`, { body: '2' })).status).to.equal(201);
      expectError(
        await visit('PUT', `/s/${b.code}/files/three.txt`, { body: '3' }),
        403,
        'not-authorized/bundle-maximum-uses-reached',
      );
      expectError(await visit('GET', `/s/${b.code}/info`), 403, 'not-authorized/bundle-maximum-uses-reached');
      // A download link takes no uploads.
      const d = await made({ paths: 'share/docs' });
      expectError(
        await visit('PUT', `/s/${d.code}/files/x.txt`, { body: 'x' }),
        403,
        'not-authorized/write-permission-required',
      );
    });

    it('stops at max_uses: bundle-maximum-uses-reached, and the count can be reset', async () => {
      const b = await made({ paths: 'share/a.txt', max_uses: 1 });
      expect((await visit('GET', `/s/${b.code}/info`)).status).to.equal(200);
      expect((await visit('GET', `/s/${b.code}/files/a.txt`)).text).to.equal('alpha');
      expectError(
        await visit('GET', `/s/${b.code}/files/a.txt`),
        403,
        'not-authorized/bundle-maximum-uses-reached',
      );
      expectError(await visit('GET', `/s/${b.code}/info`), 403, 'not-authorized/bundle-maximum-uses-reached');
      await gw.request('PATCH', `${API}/bundles/${b.id}`, { headers: sharerAuth, body: { uses: 0 } });
      expect((await visit('GET', `/s/${b.code}/files/a.txt`)).status).to.equal(200);
    });

    it('lets simultaneous downloads past max_uses only as many times as it allows', async () => {
      const b = await made({ paths: 'share/a.txt', max_uses: 3 });
      const all = await Promise.all(
        Array.from({ length: 8 }, () => visit('GET', `/s/${b.code}/files/a.txt`)),
      );
      expect(all.filter((r) => r.status === 200).length).to.equal(3);
      for (const r of all.filter((x) => x.status !== 200))
        expectError(r, 403, 'not-authorized/bundle-maximum-uses-reached');
      expect((await gw.request('GET', `${API}/bundles/${b.id}`, { headers: sharerAuth })).json.uses).to.equal(
        3,
      );
    });

    it('stops at expiry, and refuses a code that names no link: invalid-bundle-code', async () => {
      const b = await made({ paths: 'share/a.txt', expires_at: new Date(Date.now() + 60_000).toISOString() });
      expect((await visit('GET', `/s/${b.code}/info`)).status).to.equal(200);
      await gw.request('PATCH', `${API}/bundles/${b.id}`, {
        headers: sharerAuth,
        body: { expires_at: new Date(Date.now() - 1000).toISOString() },
      });
      const r = await visit('GET', `/s/${b.code}/info`);
      expectError(r, 422, 'processing-failure/invalid-bundle-code');
      expect(r.json.error).to.match(/expired/);
      expectError(
        await visit('GET', `/s/${b.code}/files/a.txt`),
        422,
        'processing-failure/invalid-bundle-code',
      );
      expectError(
        await visit('GET', '/s/AAAAAAAAAAAAAAAAAAAAAA/info'),
        422,
        'processing-failure/invalid-bundle-code',
      );
      expectError(await visit('GET', '/s/short/info'), 422, 'processing-failure/invalid-bundle-code');
      expectError(
        await create({ paths: 'share/a.txt', expires_at: '2001-01-01T00:00:00Z' }),
        422,
        'processing-failure/model-save-error',
      );
    });

    it('asks for the password, sets a cookie scoped to the link, and records wrong passwords', async () => {
      const b = await made({ paths: 'share/a.txt', password: 'open-sesame' });
      expect(b.has_password).to.equal(true);
      expectError(await visit('GET', `/s/${b.code}/info`), 401, 'not-authenticated/authentication-required');
      expectError(
        await visit('GET', `/s/${b.code}/files/a.txt`),
        401,
        'not-authenticated/authentication-required',
      );
      const before = await lastActionId();
      const wrong = await visit('POST', `/s/${b.code}/password`, { body: { password: 'nope' } });
      expectError(wrong, 401, 'not-authenticated/invalid-credentials');
      const failed = (await actionsSince(before)).filter((a) => a.action === 'failedlogin');
      expect(failed[0]).to.include({ interface: 'web', ip: RECIPIENT, failure_type: 'password_mismatch' });
      const ok = await visit('POST', `/s/${b.code}/password`, { body: { password: 'open-sesame' } });
      expect(ok.status, ok.text).to.equal(200);
      const cookie = String(ok.headers['set-cookie']);
      expect(cookie)
        .to.match(/SvcBundle=/)
        .and.match(new RegExp(`path=/s/${b.code}`, 'i'));
      expect(cookie)
        .to.match(/secure/i)
        .and.match(/httponly/i)
        .and.match(/samesite=strict/i);
      const jar = cookie.split(';')[0]!;
      const r = await visit('GET', `/s/${b.code}/files/a.txt`, { headers: { Cookie: jar } });
      expect(r.text).to.equal('alpha');
      // The grant opens this link only, and a new password ends it.
      const other = await made({ paths: 'share/a.txt', password: 'open-sesame' });
      expectError(
        await visit('GET', `/s/${other.code}/info`, { headers: { Cookie: jar } }),
        401,
        'not-authenticated/authentication-required',
      );
      await gw.request('PATCH', `${API}/bundles/${b.id}`, {
        headers: sharerAuth,
        body: { password: 'new-one' },
      });
      expectError(
        await visit('GET', `/s/${b.code}/info`, { headers: { Cookie: jar } }),
        401,
        'not-authenticated/authentication-required',
      );
    });

    it('refuses password guessing from an address past the login rate limit', async () => {
      const b = await made({ paths: 'share/a.txt', password: 'open-sesame' });
      const guess = (password: string) =>
        visit('POST', `/s/${b.code}/password`, { body: { password }, localAddress: '127.0.0.3' });
      for (let i = 0; i < 3; i++)
        expectError(await guess(`guess-${i}`), 401, 'not-authenticated/invalid-credentials');
      expectError(await guess('open-sesame'), 429, 'rate-limited/too-many-login-attempts');
      // Another address is not held back.
      expect(
        (await visit('POST', `/s/${b.code}/password`, { body: { password: 'open-sesame' } })).status,
      ).to.equal(200);
    });

    it('stops working when the sharer loses access, their sharing right, or their account', async () => {
      const user = await createUser(gw, { attachments_permission: true });
      const perm = await grant(user.id, 'share', 'readonly');
      const auth = sessionAuth(await login(gw, user.username, user.password));
      const r = await create({ paths: 'share/docs' }, auth);
      expect(r.status, r.text).to.equal(201);
      const code = r.json.code as string;
      expect((await visit('GET', `/s/${code}/files/docs/b.txt`)).status).to.equal(200);
      const del = await gw.request('DELETE', `${API}/permissions/${perm}`, site());
      expect(del.status, del.text).to.equal(200);
      const lost = await visit('GET', `/s/${code}/files/docs/b.txt`);
      expectError(lost, 403, 'not-authorized/read-permission-required');
      expect(lost.json.error).to.not.include('share/');
      expectError(await visit('GET', `/s/${code}/info`), 403, 'not-authorized/read-permission-required');
      await grant(user.id, 'share', 'readonly');
      expect((await visit('GET', `/s/${code}/info`)).status).to.equal(200);
      await gw.request('PATCH', `${API}/users/${user.id}`, {
        ...site(),
        body: { attachments_permission: false },
      });
      expectError(await visit('GET', `/s/${code}/info`), 403, 'not-authorized/not-allowed-to-create-bundle');
      await gw.request('PATCH', `${API}/users/${user.id}`, {
        ...site(),
        body: { attachments_permission: true },
      });
      expect((await visit('GET', `/s/${code}/info`)).status).to.equal(200);
      const gone = await gw.request('DELETE', `${API}/users/${user.id}`, site());
      expect(gone.status, gone.text).to.equal(200);
      expectError(await visit('GET', `/s/${code}/info`), 422, 'processing-failure/invalid-bundle-code');
    });

    it('a shared file deleted meanwhile is bundle-path-not-found', async () => {
      await write('share/gone.txt', 'soon gone');
      const b = await made({ paths: 'share/gone.txt' });
      await gw.core.files.session(operatorPrincipal()).remove('share/gone.txt');
      expectError(await visit('GET', `/s/${b.code}/info`), 404, 'not-found/bundle-path-not-found');
      expectError(await visit('GET', `/s/${b.code}/files/gone.txt`), 404, 'not-found/bundle-path-not-found');
    });
  });
});
