/**
 * Share links in a real browser (issue 14): Debian's chromium driven by playwright-core against a
 * real gateway process. The sharer makes links with the Share button and lists and revokes them on
 * the Share links page; each link is opened in a fresh browser context without credentials, as a
 * recipient would: download (one file, and all as a zip compared with the originals), preview,
 * upload, with a password, expired, used up, revoked, and after the sharer lost access. Each test
 * saves a screenshot under .tmp/web-screens/.
 *
 * SQLite only: the browser suite is slow, and what it checks is the page and the adapter; the
 * REST resource and the core run on both databases in test/protocols/rest/bundles.test.ts.
 */
import { spawnSync, type ChildProcess } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { launchChromium, signInAs, watchCsp } from '../../helpers/chromium.ts';
import { api, must, startGateway, stopChild, type ApiTarget, type GatewayInfo } from '../../bench/lib.ts';
import { dbKind } from '../../helpers/gateway.ts';
import { png } from '../../helpers/images.ts';

const SCREENS = path.resolve('.tmp/web-screens');
const PASSWORD = 'correct-horse-9';

const md5 = (b: Buffer) => createHash('md5').update(b).digest('hex');

interface Bundle {
  id: number;
  code: string;
  url: string;
}

interface Action {
  action: string;
  interface: string;
  path: string;
  ip: string;
  display: string;
}

(dbKind === 'sqlite' ? describe : describe.skip)('share links in chromium (SQLite only: slow)', function () {
  this.timeout(120_000);
  let child: ChildProcess;
  let gw: GatewayInfo;
  let browser: Browser;
  let base: string;
  let sam: ApiTarget;
  const contexts: BrowserContext[] = [];
  const work = mkdtempSync(path.join(os.tmpdir(), 'svc-share-'));
  const photo = randomBytes(300 * 1024);

  /** put stores a file through SPEC's multi-step upload, with the site-wide key. */
  async function put(sitePath: string, content: Buffer): Promise<void> {
    const file = path.join(work, 'fixture');
    writeFileSync(file, content);
    const url = `/files/${sitePath.split('/').map(encodeURIComponent).join('/')}`;
    const up = await api<{ ref: string; upload_uri: string; http_method: string }>(gw, 'POST', url, {
      action: 'put',
    });
    await must(['curl', '-sfk', '-X', up.http_method, '--data-binary', `@${file}`, up.upload_uri]);
    await api(gw, 'POST', url, { action: 'end', ref: up.ref });
  }

  const user = (username: string, extra: Record<string, unknown>) =>
    api(gw, 'POST', '/users', { username, password: PASSWORD, ...extra });
  const sessionOf = async (username: string): Promise<ApiTarget> => {
    const s = await api<{ id: string }>({ port: gw.port, dataDir: gw.dataDir }, 'POST', '/sessions', {
      username,
      password: PASSWORD,
    });
    return { port: gw.port, dataDir: gw.dataDir, session: s.id };
  };
  const share = (who: ApiTarget, body: Record<string, unknown>) => api<Bundle>(who, 'POST', '/bundles', body);

  before(async function () {
    this.timeout(300_000);
    const built = spawnSync(process.execPath, ['protocols/web/build.js'], { encoding: 'utf8' });
    if (built.status !== 0) throw new Error(`protocols/web/build.js failed: ${built.stderr}`);
    mkdirSync(SCREENS, { recursive: true });
    ({ child, info: gw } = await startGateway([]));
    base = `https://127.0.0.1:${gw.port}`;
    for (const f of ['proj', 'proj/docs', 'proj/docs/deep', 'proj/inbox'])
      await api(gw, 'POST', `/folders/${f}`);
    await put('proj/docs/readme.txt', Buffer.from('hello readme\n'));
    await put('proj/docs/pic.png', png(48, 30, [20, 120, 200]));
    await put('proj/docs/deep/photo.bin', photo);
    await put('proj/notes.txt', Buffer.from('notes\n'));
    await user('sam', {
      user_root: 'proj/',
      grant_permission: 'full',
      attachments_permission: true,
      name: 'Sam',
    });
    await user('nat', { user_root: 'proj/', grant_permission: 'full' });
    await user('lee', { attachments_permission: true });
    sam = await sessionOf('sam');
    browser = await launchChromium();
  });

  after(async () => {
    await browser?.close();
    if (child) await stopChild(child);
    rmSync(work, { recursive: true, force: true });
  });

  afterEach(async function () {
    const title = `share-${(this.currentTest?.title ?? 'test').replace(/[^a-z0-9]+/gi, '-')}`.slice(0, 60);
    const page = contexts.at(-1)?.pages()[0];
    if (page) await page.screenshot({ path: path.join(SCREENS, `${title}.png`), fullPage: true });
    for (const c of contexts.splice(0)) await c.close();
  });

  /** fresh opens `url` in a new browser context: no cookies, as someone who was sent a link. */
  async function fresh(url = `${base}/`): Promise<{ page: Page; cspErrors: string[] }> {
    const context = await browser.newContext({
      ignoreHTTPSErrors: true,
      acceptDownloads: true,
      viewport: { width: 1000, height: 700 },
    });
    contexts.push(context);
    const page = await context.newPage();
    const cspErrors = watchCsp(page);
    await page.goto(url);
    return { page, cspErrors };
  }

  async function signIn(username: string): Promise<Page> {
    const { page } = await fresh();
    await signInAs(page, username, PASSWORD);
    return page;
  }

  const row = (page: Page, name: string) => page.getByRole('row').filter({ hasText: name });
  const linkOf = (b: Bundle) => `${base}/s/${b.code}`;
  const problem = async (page: Page) => {
    await page.getByRole('heading', { name: 'This link does not work' }).waitFor();
    return (await page.getByRole('alert').textContent()) ?? '';
  };

  it('Share makes a download link; a fresh browser downloads a file and everything as a zip', async () => {
    const page = await signIn('sam');
    await row(page, 'docs').getByRole('checkbox').check();
    await row(page, 'notes.txt').getByRole('checkbox').check();
    await page.getByRole('button', { name: 'Share', exact: true }).click();
    const dialog = page.getByRole('dialog', { name: 'Share 2 items' });
    await dialog.getByLabel('Note for recipients (optional)').fill('The docs you asked for');
    await dialog.getByRole('button', { name: 'Create link' }).click();
    const link = await dialog.getByLabel('Link').inputValue();
    expect(link).to.match(new RegExp(`^${base}/s/[A-Za-z0-9_-]{22}$`));
    await page.screenshot({ path: path.join(SCREENS, 'share-dialog-link.png') });
    await dialog.getByRole('button', { name: 'Done' }).click();

    const { page: visitor, cspErrors } = await fresh(link);
    await visitor.getByRole('heading', { name: 'Files shared with you' }).waitFor();
    await visitor.getByText('The docs you asked for').waitFor();
    await visitor.getByRole('button', { name: 'docs' }).click();
    await row(visitor, 'readme.txt').waitFor();
    const [one] = await Promise.all([
      visitor.waitForEvent('download'),
      visitor.getByRole('link', { name: 'readme.txt' }).click(),
    ]);
    const saved = path.join(work, 'readme.txt');
    await one.saveAs(saved);
    expect(readFileSync(saved, 'utf8')).to.equal('hello readme\n');

    const [all] = await Promise.all([
      visitor.waitForEvent('download'),
      visitor.getByRole('link', { name: 'Download all' }).click(),
    ]);
    const zip = path.join(work, 'all.zip');
    await all.saveAs(zip);
    const member = (m: string) => spawnSync('unzip', ['-p', zip, m], { maxBuffer: 8 << 20 }).stdout;
    expect(member('notes.txt').toString()).to.equal('notes\n');
    expect(member('docs/readme.txt').toString()).to.equal('hello readme\n');
    expect(md5(member('docs/deep/photo.bin'))).to.equal(md5(photo));
    expect(cspErrors).to.deep.equal([]);

    const acts = await api<Action[]>(gw, 'GET', '/history?per_page=1000');
    const reads = acts.filter((a) => a.action === 'read' && a.interface === 'web');
    expect(reads.map((a) => a.path)).to.include.members(['proj/docs/readme.txt', 'proj/docs/deep/photo.bin']);
    expect(reads.some((a) => /share link/.test(a.display))).to.equal(true);
  });

  it('lists the user’s links with uses and expiry on Share links, and Revoke stops a link', async () => {
    const b = await share(sam, { paths: ['proj/notes.txt'], max_uses: 5, description: 'revoke me' });
    const page = await signIn('sam');
    await page.getByRole('button', { name: 'Share links' }).click();
    const line = page.getByRole('row').filter({ hasText: 'revoke me' });
    await line.waitFor();
    expect(await line.textContent())
      .to.include('0 of 5')
      .and.include('Never')
      .and.include('/proj/notes.txt');
    await line.getByRole('button', { name: 'Revoke' }).click();
    await page.getByRole('dialog', { name: 'Revoke link' }).getByRole('button', { name: 'Revoke' }).click();
    await page.getByText('was revoked').waitFor();
    await line.waitFor({ state: 'detached' });
    await page.screenshot({ path: path.join(SCREENS, 'share-links-page.png'), fullPage: true });

    const { page: visitor } = await fresh(linkOf(b));
    expect(await problem(visitor)).to.include('does not exist or was revoked');
  });

  it('offers no Share to a user without attachments_permission', async () => {
    const page = await signIn('nat');
    await row(page, 'notes.txt').getByRole('checkbox').check();
    await page.getByRole('button', { name: 'Delete' }).waitFor();
    expect(await page.getByRole('button', { name: 'Share', exact: true }).count()).to.equal(0);
    expect(await page.getByRole('button', { name: 'Share links' }).count()).to.equal(0);
  });

  it('a preview link shows text and images in place without downloads, and the server refuses a download', async () => {
    const b = await share(sam, { paths: ['proj/docs'], kind: 'preview', max_uses: 2 });
    const { page } = await fresh(linkOf(b));
    await page.getByRole('heading', { name: 'Files shared for viewing' }).waitFor();
    await page.getByRole('button', { name: 'docs' }).click();
    await row(page, 'readme.txt').waitFor();
    expect(await page.getByRole('link').count()).to.equal(0);
    // Text, as text; then an image drawn by the browser (its own width, not a broken icon).
    await page.getByRole('button', { name: 'readme.txt' }).click();
    const text = page.getByRole('dialog', { name: 'Preview of readme.txt' });
    expect((await text.getByLabel('Text of readme.txt').textContent())?.trim()).to.equal('hello readme');
    expect(await text.getByRole('button', { name: 'Download' }).count()).to.equal(0);
    await page.keyboard.press('Escape');
    await page.getByRole('button', { name: 'pic.png' }).click();
    const img = page
      .getByRole('dialog', { name: 'Preview of pic.png' })
      .getByRole('img', { name: 'pic.png' });
    await img.waitFor();
    await img.evaluate((el) => (el as unknown as { decode(): Promise<void> }).decode());
    expect(await img.evaluate((el) => (el as unknown as { naturalWidth: number }).naturalWidth)).to.equal(48);
    await page.screenshot({ path: path.join(SCREENS, 'share-preview-image.png') });
    // The opening was the one use: previews spend no more.
    expect((await api<{ uses: number }>(sam, 'GET', `/bundles/${b.id}`)).uses).to.equal(1);
    const r = await page.request.get(`${linkOf(b)}/files/docs/readme.txt`);
    expect(r.status()).to.equal(422);
    expect(((await r.json()) as { type: string }).type).to.equal(
      'processing-failure/bundle-only-allows-previews',
    );
  });

  it('an upload link takes files with progress into the folder, and shows nothing else', async () => {
    const b = await share(sam, { paths: ['proj/inbox'], kind: 'upload' });
    const { page } = await fresh(linkOf(b));
    await page.getByRole('heading', { name: 'Send files' }).waitFor();
    const file = path.join(work, 'from-visitor.bin');
    const data = randomBytes(2 * 1024 * 1024);
    writeFileSync(file, data);
    await page.locator('input[type=file]').setInputFiles(file);
    await page.getByRole('progressbar', { name: 'Upload of from-visitor.bin' }).waitFor();
    await page.getByText('Sent', { exact: true }).waitFor();
    expect(await page.getByRole('table').count()).to.equal(0);
    const stored = await api<{ path: string; size: number; md5: string }>(
      gw,
      'GET',
      '/files/proj/inbox/from-visitor.bin?action=stat',
    );
    expect(stored.size).to.equal(data.length);
    const acts = await api<Action[]>(gw, 'GET', '/history?per_page=1000');
    expect(
      acts.find((a) => a.action === 'create' && a.path === 'proj/inbox/from-visitor.bin')?.interface,
    ).to.equal('web');
  });

  it('a link with a password asks for it first; the cookie is for that link only', async () => {
    const b = await share(sam, { paths: ['proj/notes.txt'], password: 'open-sesame' });
    const { page } = await fresh(linkOf(b));
    await page.getByLabel('Password').fill('wrong guess');
    await page.getByRole('button', { name: 'Open' }).click();
    expect(await page.getByRole('alert').textContent()).to.equal('That password is not right.');
    await page.getByLabel('Password').fill('open-sesame');
    await page.getByRole('button', { name: 'Open' }).click();
    await row(page, 'notes.txt').waitFor();
    expect(page.url()).to.equal(linkOf(b));
    const cookie = (await page.context().cookies()).find((c) => c.name === 'SvcBundle');
    expect(cookie, 'the link’s cookie').to.exist;
    expect(cookie!).to.include({ path: `/s/${b.code}`, secure: true, httpOnly: true, sameSite: 'Strict' });
  });

  it('an expired link says so', async () => {
    const b = await share(sam, {
      paths: ['proj/notes.txt'],
      expires_at: new Date(Date.now() + 60_000).toISOString(),
    });
    await api(sam, 'PATCH', `/bundles/${b.id}`, { expires_at: new Date(Date.now() - 1000).toISOString() });
    const { page } = await fresh(linkOf(b));
    expect(await problem(page)).to.include('expired');
  });

  it('a used-up link says so', async () => {
    const b = await share(sam, { paths: ['proj/notes.txt'], max_uses: 1 });
    const { page } = await fresh(linkOf(b));
    await page.getByText('1 use left.').waitFor();
    const [d] = await Promise.all([
      page.waitForEvent('download'),
      page.getByRole('link', { name: 'notes.txt' }).click(),
    ]);
    await d.saveAs(path.join(work, 'once.txt'));
    const { page: again } = await fresh(linkOf(b));
    expect(await problem(again)).to.include('used up');
  });

  it('stops working once the sharer lost access', async () => {
    const perm = await api<{ id: number }>(gw, 'POST', '/permissions', {
      path: 'proj/docs',
      username: 'lee',
      permission: 'readonly',
    });
    const lee = await sessionOf('lee');
    const b = await share(lee, { paths: ['proj/docs'] });
    const { page } = await fresh(linkOf(b));
    await page.getByRole('button', { name: 'docs' }).waitFor();
    await api(gw, 'DELETE', `/permissions/${perm.id}`);
    const { page: later } = await fresh(linkOf(b));
    expect(await problem(later)).to.include('no longer has access');
  });
});
