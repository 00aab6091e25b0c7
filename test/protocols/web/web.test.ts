/**
 * The web interface in a real browser: Debian's chromium driven by playwright-core against a real
 * gateway process (test/bench/serve.ts, whose /big folder holds 10,000 rows). Each test saves a
 * screenshot under .tmp/web-screens/ to look at.
 *
 * SQLite only: the browser suite is slow, and what it checks is the page and the adapter; the
 * REST API and the core underneath run on both databases in their own suites.
 */
import { spawnSync, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { buildPage, launchChromium, saveScreen, signInAs, watchCsp } from '../../helpers/chromium.ts';
import { api, startGateway, stopChild, type GatewayInfo } from '../../bench/lib.ts';
import { dbKind } from '../../helpers/gateway.ts';

const PASSWORD = 'correct-horse-9';

/** raw sends one HTTPS request as a script on another site would; nothing is added. */
function raw(
  gw: GatewayInfo,
  method: string,
  urlPath: string,
  headers: Record<string, string>,
  body?: string,
): Promise<{ status: number; text: string; headers: Record<string, unknown> }> {
  const ca = readFileSync(`${gw.dataDir}/tls/cert.pem`);
  return new Promise((resolve, reject) => {
    const req = https.request(
      { host: '127.0.0.1', port: gw.port, method, path: urlPath, ca, servername: 'localhost', headers },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            text: Buffer.concat(chunks).toString(),
            headers: res.headers,
          }),
        );
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

const md5 = (b: Buffer) => createHash('md5').update(b).digest('hex');

/** unzip reads one member of a zip file with Info-ZIP's unzip (an independent reader). */
function unzip(zipFile: string, member: string): Buffer {
  const r = spawnSync('unzip', ['-p', zipFile, member], { maxBuffer: 64 * 1024 * 1024 });
  if (r.status !== 0) throw new Error(`unzip -p ${member}: ${r.stderr.toString()}`);
  return r.stdout;
}

interface Action {
  action: string;
  interface: string;
  path: string;
  username?: string;
  failure_type?: string;
}

(dbKind === 'sqlite' ? describe : describe.skip)(
  'web interface in chromium (SQLite only: slow)',
  function () {
    this.timeout(120_000);
    let child: ChildProcess;
    let gw: GatewayInfo;
    let browser: Browser;
    let base: string;
    const contexts: BrowserContext[] = [];
    const work = mkdtempSync(path.join(os.tmpdir(), 'svc-web-'));

    const user = (username: string, extra: Record<string, unknown>) =>
      api(gw, 'POST', '/users', { username, password: PASSWORD, ...extra });

    before(async function () {
      this.timeout(300_000);
      buildPage();
      ({ child, info: gw } = await startGateway(['--populate', '10000']));
      base = `https://127.0.0.1:${gw.port}`;
      await api(gw, 'POST', '/folders/alice');
      await api(gw, 'POST', '/folders/alice/docs');
      await user('alice', {
        user_root: 'alice/',
        grant_permission: 'full',
        self_managed: true,
        name: 'Alice',
      });
      await user('bob', { user_root: 'alice/', grant_permission: 'read', self_managed: false });
      await user('carol', { user_root: 'alice/', grant_permission: 'full', web_permission: false });
      await user('dave', { user_root: 'alice/', grant_permission: 'full' });
      await user('frank', { user_root: 'alice/', grant_permission: 'read', self_managed: true });
      await user('erin', { user_root: 'big/', grant_permission: 'full' });
      browser = await launchChromium();
    });

    after(async () => {
      await browser?.close();
      if (child) await stopChild(child);
      rmSync(work, { recursive: true, force: true });
    });

    afterEach(async function () {
      await saveScreen(contexts.at(-1)?.pages()[0], this.currentTest?.title);
      for (const c of contexts.splice(0)) await c.close();
    });

    /** fresh opens the page in a new browser context: no cookies, as a new visitor. */
    async function fresh(): Promise<{ page: Page; cspErrors: string[] }> {
      const context = await browser.newContext({
        ignoreHTTPSErrors: true,
        acceptDownloads: true,
        viewport: { width: 1100, height: 800 },
      });
      contexts.push(context);
      const page = await context.newPage();
      const cspErrors = watchCsp(page);
      await page.goto(`${base}/`);
      return { page, cspErrors };
    }

    async function signIn(username: string, password = PASSWORD): Promise<Page> {
      const { page } = await fresh();
      await signInAs(page, username, password);
      return page;
    }

    const row = (page: Page, name: string) => page.getByRole('row').filter({ hasText: name });
    const history = async () => api<Action[]>(gw, 'GET', '/history?per_page=1000');

    it('serves the page with a strict CSP, hashed assets cached for a year, and no inline script', async () => {
      const res = await raw(gw, 'GET', '/', {});
      expect(res.status).to.equal(200);
      const csp = String(res.headers['content-security-policy']);
      expect(csp).to.include("script-src 'self'");
      expect(csp).to.not.include('unsafe-inline');
      expect(res.text).to.not.match(/<script(?![^>]*\bsrc=)[^>]*>/);
      const asset = /src="(\/assets\/app-[A-Z0-9]+\.js)"/.exec(res.text)?.[1];
      expect(asset, 'a hashed script name').to.be.a('string');
      const js = await raw(gw, 'GET', asset!, {});
      expect(js.status).to.equal(200);
      expect(js.headers['cache-control']).to.include('immutable');
      // The legacy API keeps its paths.
      const legacy = await raw(gw, 'GET', '/users.xml', {});
      expect(legacy.status).to.equal(401);
    });

    it('signs in; the cookie is Secure, HttpOnly, SameSite=Strict; Actions say interface web', async () => {
      const { page, cspErrors } = await fresh();
      await signInAs(page, 'alice', PASSWORD);
      await row(page, 'docs').waitFor();
      const cookie = (await page.context().cookies()).find((c) => c.name === 'SvcWeb');
      expect(cookie, 'session cookie').to.exist;
      expect(cookie!.secure).to.equal(true);
      expect(cookie!.httpOnly).to.equal(true);
      expect(cookie!.sameSite).to.equal('Strict');
      expect(cspErrors).to.deep.equal([]);
      const logins = (await history()).filter((a) => a.action === 'login' && a.username === 'alice');
      expect(logins.map((a) => a.interface)).to.include('web');
    });

    it('a wrong password is told in words and recorded as failedlogin with interface web', async () => {
      const { page } = await fresh();
      await page.getByLabel('Username').fill('alice');
      await page.getByLabel('Password').fill('wrong-password');
      await page.getByRole('button', { name: 'Sign in' }).click();
      await expect(await page.getByRole('alert').textContent()).to.equal('Invalid username or password.');
      expect(await page.getByRole('button', { name: 'Sign out' }).count()).to.equal(0);
      const failed = (await history()).filter((a) => a.action === 'failedlogin' && a.username === 'alice');
      expect(failed.map((a) => a.interface)).to.include('web');
    });

    it('locks a user out after 5 failures: even the right password is then refused, in words', async () => {
      const { page } = await fresh();
      for (let i = 0; i < 5; i++) {
        await page.getByLabel('Username').fill('dave');
        await page.getByLabel('Password').fill(`wrong-${i}`);
        await page.getByRole('button', { name: 'Sign in' }).click();
        await page.getByRole('alert').waitFor();
        await page.getByRole('button', { name: 'Sign in' }).and(page.locator(':enabled')).waitFor();
      }
      await page.getByLabel('Username').fill('dave');
      await page.getByLabel('Password').fill(PASSWORD);
      await page.getByRole('button', { name: 'Sign in' }).click();
      await page.getByRole('alert').filter({ hasText: 'locked out' }).waitFor();
      expect(await page.getByRole('button', { name: 'Sign out' }).count()).to.equal(0);
    });

    it('a user without web_permission cannot sign in and is told why', async () => {
      const { page } = await fresh();
      await page.getByLabel('Username').fill('carol');
      await page.getByLabel('Password').fill(PASSWORD);
      await page.getByRole('button', { name: 'Sign in' }).click();
      expect(await page.getByRole('alert').textContent()).to.include('web access is disabled');
    });

    it('a session that ended on the server (idle timeout, signed out elsewhere) brings back the sign-in', async () => {
      const page = await signIn('alice');
      const cookie = (await page.context().cookies()).find((c) => c.name === 'SvcWeb')!;
      // Ended from outside the page, as the idle timeout or a sign-out in another tab would.
      const me = await raw(gw, 'GET', '/web/session', { Cookie: `SvcWeb=${cookie.value}` });
      const ended = await raw(gw, 'DELETE', '/web/session', {
        Cookie: `SvcWeb=${cookie.value}`,
        'X-Svc-CSRF': (JSON.parse(me.text) as { csrf: string }).csrf,
      });
      expect(ended.status).to.equal(200);
      await page.getByRole('button', { name: 'New folder' }).click();
      await page.getByLabel('Folder name').fill('too-late');
      await page.getByRole('button', { name: 'Create folder' }).click();
      await page.getByText('Your session has ended. Sign in again.').waitFor();
      await page.getByRole('button', { name: 'Sign in' }).waitFor();
      const listing = await api<{ path: string }[]>(gw, 'GET', '/folders/alice');
      expect(listing.map((e) => e.path)).to.not.include('alice/too-late');
    });

    it('refuses a cross-site change: the cookie without the page’s token changes nothing', async () => {
      const page = await signIn('alice');
      const cookie = (await page.context().cookies()).find((c) => c.name === 'SvcWeb')!;
      // As a form on another site would post it (if the browser sent the cookie at all).
      const forged = await raw(
        gw,
        'POST',
        '/api/rest/v1/folders/alice/forged',
        {
          Cookie: `SvcWeb=${cookie.value}`,
          Origin: 'https://evil.example',
          'Content-Type': 'application/x-www-form-urlencoded',
        },
        'x=1',
      );
      expect(forged.status).to.equal(401);
      const listing = await api<{ path: string }[]>(gw, 'GET', '/folders/alice');
      expect(listing.map((e) => e.path)).to.not.include('alice/forged');
      // A sign-in posted from another site is refused too (login CSRF).
      const login = await raw(
        gw,
        'POST',
        '/web/session',
        { Origin: 'https://evil.example', 'Content-Type': 'application/json' },
        JSON.stringify({ username: 'alice', password: PASSWORD }),
      );
      expect(login.status).to.equal(401);
      expect(login.headers['set-cookie']).to.equal(undefined);
      // The page's own 401s carry no Basic challenge (the browser would put up its password prompt).
      expect(login.headers['www-authenticate']).to.equal(undefined);
      // Inside the page a change works (the page sends its token).
      await page.getByRole('button', { name: 'New folder' }).click();
      await page.getByLabel('Folder name').fill('made-here');
      await page.getByRole('button', { name: 'Create folder' }).click();
      await row(page, 'made-here').waitFor();
    });

    it('creates a folder; uploads by picker in parts (md5 checked through REST); downloads a file and zips', async () => {
      const page = await signIn('alice');
      await page.getByRole('button', { name: 'New folder' }).click();
      await page.getByLabel('Folder name').fill('reports');
      await page.getByRole('button', { name: 'Create folder' }).click();
      await row(page, 'reports').waitFor();
      expect((await api<{ type: string }>(gw, 'GET', '/files/alice/reports?action=stat')).type).to.equal(
        'directory',
      );

      await page.getByRole('button', { name: 'reports' }).click();
      await page.getByRole('navigation', { name: 'Breadcrumbs' }).getByText('reports').waitFor();
      // 12 MiB through the multi-step upload (the dropped file below spans several parts).
      const data = Buffer.alloc(12 * 1024 * 1024);
      for (let i = 0; i < data.length; i += 4096) data.writeUInt32LE((i * 2654435761) >>> 0, i);
      const file = path.join(work, 'big report.bin');
      writeFileSync(file, data);
      writeFileSync(path.join(work, 'notes.txt'), 'hello from the browser\n');
      await page.locator('input[type=file][multiple]').setInputFiles([file, path.join(work, 'notes.txt')]);
      const bar = page.getByRole('progressbar', { name: 'Upload of big report.bin' });
      await bar.waitFor();
      await page.getByRole('progressbar', { name: 'Total upload' }).waitFor();
      await page.getByText('Upload finished.').waitFor({ timeout: 60_000 });
      expect(await bar.getAttribute('value')).to.equal(String(data.length));
      const stat = await api<{ md5: string; size: number }>(
        gw,
        'GET',
        '/files/alice/reports/big%20report.bin?action=stat',
      );
      expect(stat.size).to.equal(data.length);
      expect(stat.md5).to.equal(md5(data));
      await row(page, 'big report.bin').waitFor();

      await page.getByRole('checkbox', { name: 'Select big report.bin' }).check();
      const [download] = await Promise.all([
        page.waitForEvent('download'),
        page.getByRole('button', { name: 'Download' }).click(),
      ]);
      expect(download.suggestedFilename()).to.equal('big report.bin');
      const saved = path.join(work, 'downloaded.bin');
      await download.saveAs(saved);
      expect(md5(readFileSync(saved))).to.equal(md5(data));

      // A selection of two, then the whole folder from its parent: one zip each, streamed by the server.
      await page.getByRole('checkbox', { name: 'Select notes.txt' }).check();
      const zipped = async () => {
        const [zipDownload] = await Promise.all([
          page.waitForEvent('download'),
          page.getByRole('button', { name: 'Download' }).click(),
        ]);
        const file = path.join(work, zipDownload.suggestedFilename());
        await zipDownload.saveAs(file);
        return file;
      };
      const selection = await zipped();
      expect(path.basename(selection)).to.equal('reports.zip');
      expect(unzip(selection, 'notes.txt').toString()).to.equal('hello from the browser\n');
      expect(md5(unzip(selection, 'big report.bin'))).to.equal(md5(data));
      await page
        .getByRole('navigation', { name: 'Breadcrumbs' })
        .getByRole('button', { name: 'Home' })
        .click();
      await page.getByRole('checkbox', { name: 'Select reports' }).check();
      const whole = await zipped();
      expect(md5(unzip(whole, 'big report.bin'))).to.equal(md5(data));
      expect(unzip(whole, 'notes.txt').toString()).to.equal('hello from the browser\n');

      const actions = (await history()).filter(
        (a) => a.username === 'alice' && a.path.startsWith('alice/reports'),
      );
      const kinds = actions.map((a) => `${a.action}:${a.interface}`);
      expect(kinds).to.include.members(['create:web', 'read:web']);
    });

    it('uploads a dropped file in parts; a part whose connection drops is sent again, the file is whole', async () => {
      await api(gw, 'POST', '/folders/alice/dropped');
      const page = await signIn('alice');
      await page.getByRole('button', { name: 'dropped' }).click();
      await page.getByRole('navigation', { name: 'Breadcrumbs' }).getByText('dropped').waitFor();
      // The second part's connection is cut once, as a flaky network would.
      let parts = 0;
      await page.route('**/upload/**', (route) =>
        ++parts === 2 ? route.abort('connectionreset') : route.continue(),
      );
      const size = 40 * 1024 * 1024;
      const dropped = await page.evaluateHandle((n) => {
        // Runs in the page, where DataTransfer exists.
        const DataTransfer = (
          globalThis as unknown as { DataTransfer: new () => { items: { add(f: File): void } } }
        ).DataTransfer;
        const bytes = new Uint8Array(n);
        for (let i = 0; i < n; i++) bytes[i] = (i * 31 + (i >> 12)) & 0xff;
        const dt = new DataTransfer();
        dt.items.add(new File([bytes], 'dropped.bin'));
        return dt;
      }, size);
      await page.locator('main.browser').dispatchEvent('dragover', { dataTransfer: dropped });
      await page.locator('main.browser').dispatchEvent('drop', { dataTransfer: dropped });
      await page.getByRole('progressbar', { name: 'Upload of dropped.bin' }).waitFor();
      await page.getByText('Upload finished.').waitFor({ timeout: 60_000 });
      await row(page, 'dropped.bin').waitFor();
      const expected = Buffer.alloc(size);
      for (let i = 0; i < size; i++) expected[i] = (i * 31 + (i >> 12)) & 0xff;
      const stat = await api<{ md5: string; size: number }>(
        gw,
        'GET',
        '/files/alice/dropped/dropped.bin?action=stat',
      );
      expect(stat.size).to.equal(size);
      expect(stat.md5).to.equal(md5(expected));
      expect(parts, 'part requests, the cut one included').to.be.at.least(3);
    });

    it('moves and copies with the folder picker', async () => {
      await api(gw, 'POST', '/folders/alice/shelf/inner');
      const page = await signIn('alice');
      await page.getByRole('button', { name: 'shelf' }).click();
      writeFileSync(path.join(work, 'book.txt'), 'a book');
      await page.locator('input[type=file][multiple]').setInputFiles(path.join(work, 'book.txt'));
      await row(page, 'book.txt').waitFor();

      await page.getByRole('checkbox', { name: 'Select book.txt' }).check();
      await page.getByRole('button', { name: 'Move' }).click();
      const picker = page.getByRole('dialog', { name: 'Move book.txt' });
      await picker.getByRole('button', { name: 'inner' }).click();
      await picker.getByText('/alice/shelf/inner').waitFor();
      await picker.getByRole('button', { name: 'Move here' }).click();
      await page.getByText('book.txt moved to /alice/shelf/inner.').waitFor();
      await row(page, 'book.txt').waitFor({ state: 'detached' });
      expect(
        (await api<{ size: number }>(gw, 'GET', '/files/alice/shelf/inner/book.txt?action=stat')).size,
      ).to.equal(6);

      await page.getByRole('button', { name: 'inner' }).click();
      await page.getByRole('checkbox', { name: 'Select book.txt' }).check();
      await page.getByRole('button', { name: 'Copy' }).click();
      const back = page.getByRole('dialog', { name: 'Copy book.txt' });
      await back.getByRole('button', { name: '.. (up)' }).click();
      await back.getByText('/alice/shelf', { exact: true }).waitFor();
      await back.getByRole('button', { name: 'Copy here' }).click();
      await page.getByText('book.txt copied to /alice/shelf.').waitFor();
      for (const p of ['alice/shelf/book.txt', 'alice/shelf/inner/book.txt']) {
        expect((await api<{ size: number }>(gw, 'GET', `/files/${p}?action=stat`)).size, p).to.equal(6);
      }
      const mine = (await history()).filter(
        (a) => a.username === 'alice' && a.path.startsWith('alice/shelf'),
      );
      expect(mine.map((a) => `${a.action}:${a.interface}`)).to.include.members(['move:web', 'copy:web']);
    });

    it('renames and deletes (with confirmation) a file', async () => {
      await api(gw, 'POST', '/folders/alice/work');
      const page = await signIn('alice');
      await page.getByRole('button', { name: 'work' }).click();
      writeFileSync(path.join(work, 'draft.txt'), 'draft');
      await page.locator('input[type=file][multiple]').setInputFiles(path.join(work, 'draft.txt'));
      await row(page, 'draft.txt').waitFor();

      await page.getByRole('checkbox', { name: 'Select draft.txt' }).check();
      await page.getByRole('button', { name: 'Rename' }).click();
      await page.getByLabel('New name').fill('final.txt');
      await page.getByRole('button', { name: 'Save name' }).click();
      await row(page, 'final.txt').waitFor();
      expect(await row(page, 'draft.txt').count()).to.equal(0);
      expect(
        (await api<{ size: number }>(gw, 'GET', '/files/alice/work/final.txt?action=stat')).size,
      ).to.equal(5);

      await page.getByRole('checkbox', { name: 'Select final.txt' }).check();
      await page.getByRole('button', { name: 'Delete' }).click();
      const dialog = page.getByRole('dialog');
      expect(await dialog.textContent()).to.include('Delete final.txt?');
      // Cancel first: nothing is deleted.
      await dialog.getByRole('button', { name: 'Cancel' }).click();
      expect(await row(page, 'final.txt').count()).to.equal(1);
      await page.getByRole('button', { name: 'Delete' }).click();
      await page.getByRole('dialog').getByRole('button', { name: 'Delete' }).click();
      await page.getByText('final.txt deleted.').waitFor();
      await row(page, 'final.txt').waitFor({ state: 'detached' });
      const gone = await raw(gw, 'GET', '/api/rest/v1/files/alice/work/final.txt?action=stat', {
        'X-SvcAPI-Key': gw.key,
      });
      expect(gone.status).to.equal(404);
      const mine = (await history()).filter((a) => a.username === 'alice' && a.path.startsWith('alice/work'));
      expect(mine.map((a) => `${a.action}:${a.interface}`)).to.include.members(['move:web', 'destroy:web']);
    });

    it('a readonly user is not offered Upload, New folder, Rename, Move or Delete; a refusal is shown in words', async () => {
      const page = await signIn('bob');
      await row(page, 'docs').waitFor();
      await page.getByRole('button', { name: 'Download' }).waitFor();
      for (const name of ['Upload', 'New folder', 'Rename', 'Move', 'Delete']) {
        expect(await page.getByRole('button', { name, exact: true }).count(), name).to.equal(0);
      }
      // A folder bob may not list: the server's refusal in words, not a code.
      await page.goto(`${base}/#/big`);
      const alert = page.getByRole('alert');
      await alert.waitFor();
      const text = (await alert.textContent()) ?? '';
      expect(text).to.match(/[a-z]{3,} .*[a-z]{3,}/i);
      expect(text).to.not.match(/\b(403|not-authorized)\b/);
    });

    it('a 10,000-entry folder scrolls and stays responsive, sorted by the server', async () => {
      const page = await signIn('erin');
      await page.getByText('10000 items').waitFor({ timeout: 60_000 });
      // Virtual rendering: a screenful of rows exists, not 10,000.
      const rendered = await page.locator('.rows [role=row]').count();
      expect(rendered).to.be.below(100);
      const t0 = Date.now();
      await page.locator('.rows').evaluate((el) => (el.scrollTop = el.scrollHeight));
      await row(page, 'f0009999.bin').waitFor();
      await page.locator('.rows').evaluate((el) => (el.scrollTop = el.scrollHeight / 2));
      await row(page, 'f0005000.bin').waitFor();
      const scrollMs = Date.now() - t0;
      // Each frame's work stays small: measure a burst of scroll steps in the page.
      const frame = await page.locator('.rows').evaluate(async (el) => {
        const raf = (globalThis as unknown as { requestAnimationFrame: (cb: () => void) => void })
          .requestAnimationFrame;
        const times: number[] = [];
        for (let i = 0; i < 30; i++) {
          const t = performance.now();
          el.scrollTop = (i * 9973 * 40) % el.scrollHeight;
          // Two frames: the scroll event's render, then the paint of it.
          for (let f = 0; f < 2; f++) await new Promise((r) => raf(() => r(null)));
          times.push(performance.now() - t);
        }
        times.sort((a, b) => a - b);
        return { median: times[15]!, slowest: times[29]! };
      });
      console.log(
        `      10,000 entries: jump to end and middle ${scrollMs} ms; scroll step median ${frame.median.toFixed(1)} ms, slowest ${frame.slowest.toFixed(1)} ms`,
      );
      // The median, not the slowest step: a shared CI machine stalls now and then, the page does not.
      expect(frame.median).to.be.below(100);
      // Sorting by size: the server's order, shown from the top.
      await page.getByRole('button', { name: /^Size/ }).click();
      await page
        .getByRole('columnheader', { name: /Size/ })
        .and(page.locator('[aria-sort=ascending]'))
        .waitFor();
      // The smallest file (size 0) comes first, at the top of the list.
      const top = page.locator('.rows [role=row][aria-rowindex="2"]');
      await top.filter({ hasText: 'f0000000.bin' }).waitFor({ timeout: 60_000 });
      await page.getByText('10000 items', { exact: true }).waitFor({ timeout: 60_000 });
      expect(await page.locator('.rows').evaluate((el) => el.scrollTop)).to.equal(0);
    });

    it('a self-managed user changes name and password; another is told why they cannot; sign out ends the session', async () => {
      const page = await signIn('alice');
      await page.getByRole('button', { name: 'Account' }).click();
      await page.getByLabel('Name').fill('Alice Liddell');
      await page.getByRole('button', { name: 'Save details' }).click();
      await page.getByRole('status').filter({ hasText: 'Saved.' }).waitFor();
      expect((await api<{ name: string }[]>(gw, 'GET', '/users')).map((u) => u.name)).to.include(
        'Alice Liddell',
      );
      const cookie = (await page.context().cookies()).find((c) => c.name === 'SvcWeb')!;
      await page.getByRole('button', { name: 'Sign out' }).click();
      await page.getByRole('button', { name: 'Sign in' }).waitFor();
      // The old cookie no longer opens anything.
      const after = await raw(gw, 'GET', '/api/rest/v1/folders/alice', { Cookie: `SvcWeb=${cookie.value}` });
      expect(after.status).to.equal(401);

      // A password change is confirmed with the current password; a wrong one is told in words.
      const frank = await signIn('frank');
      await frank.getByRole('button', { name: 'Account' }).click();
      await frank.getByLabel('Current password').fill('not-my-password');
      await frank.getByLabel('New password').fill('a-new-password-7');
      await frank.getByRole('button', { name: 'Change password' }).click();
      expect(await frank.getByRole('alert').textContent()).to.equal('Your current password is not right.');
      await frank.getByLabel('Current password').fill(PASSWORD);
      await frank.getByLabel('New password').fill('a-new-password-7');
      await frank.getByRole('button', { name: 'Change password' }).click();
      await frank.getByRole('status').filter({ hasText: 'Saved.' }).waitFor();
      const withNew = await raw(
        gw,
        'POST',
        '/api/rest/v1/sessions',
        { 'Content-Type': 'application/json' },
        JSON.stringify({ username: 'frank', password: 'a-new-password-7' }),
      );
      expect(withNew.status).to.equal(200);

      const bobPage = await signIn('bob');
      await bobPage.getByRole('button', { name: 'Account' }).click();
      await bobPage.getByText('Your administrator manages this account').waitFor();
      expect(await bobPage.getByRole('button', { name: 'Change password' }).count()).to.equal(0);
    });
  },
);
