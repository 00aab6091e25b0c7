/**
 * The web interface's file features in a real browser (Debian's chromium through playwright-core,
 * against a real gateway process): previews of images, text and PDF; folder uploads by picker and
 * by drop; a large upload interrupted by closing the page and resumed after a reload (its md5
 * checked over SFTP with OpenSSH sftp); a folder's notifications and history; the idle timeout.
 * Each test saves a screenshot under .tmp/web-screens/ to look at.
 *
 * SQLite only, like web.test.ts: what is checked is the page and the adapter.
 */
import { spawnSync, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import {
  buildPage,
  launchChromium,
  saveScreen,
  SCREENS,
  signInAs,
  watchCsp,
} from '../../helpers/chromium.ts';
import { SftpClient } from '../../helpers/live-clients.ts';
import { api, startGateway, stopChild, type GatewayInfo } from '../../bench/lib.ts';
import { dbKind } from '../../helpers/gateway.ts';
import { png } from '../../helpers/images.ts';

const PASSWORD = 'correct-horse-9';
const MiB = 1024 * 1024;

const md5 = (b: Buffer) => createHash('md5').update(b).digest('hex');

/** pdf is a one-page PDF saying `text` (a valid cross-reference table, so viewers open it). */
function pdf(text: string): Buffer {
  const objects = [
    '<< /Type /Catalog /Pages 2 0 R >>',
    '<< /Type /Pages /Kids [3 0 R] /Count 1 >>',
    '<< /Type /Page /Parent 2 0 R /MediaBox [0 0 300 144] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>',
    (() => {
      const s = `BT /F1 24 Tf 30 70 Td (${text}) Tj ET`;
      return `<< /Length ${s.length} >>\nstream\n${s}\nendstream`;
    })(),
    '<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>',
  ];
  let out = '%PDF-1.4\n';
  const offsets: number[] = [];
  objects.forEach((o, i) => {
    offsets.push(out.length);
    out += `${i + 1} 0 obj\n${o}\nendobj\n`;
  });
  const xref = out.length;
  out += `xref\n0 ${objects.length + 1}\n0000000000 65535 f \n`;
  for (const o of offsets) out += `${String(o).padStart(10, '0')} 00000 n \n`;
  out += `trailer\n<< /Size ${objects.length + 1} /Root 1 0 R >>\nstartxref\n${xref}\n%%EOF\n`;
  return Buffer.from(out, 'latin1');
}

interface Action {
  action: string;
  interface: string;
  path: string;
  username?: string;
}

(dbKind === 'sqlite' ? describe : describe.skip)(
  'web interface files: preview, folder upload, resume, activity, idle timeout (chromium; SQLite only)',
  function () {
    this.timeout(180_000);
    let child: ChildProcess;
    let gw: GatewayInfo;
    let browser: Browser;
    let base: string;
    const contexts: BrowserContext[] = [];
    const work = mkdtempSync(path.join(os.tmpdir(), 'svc-webfiles-'));
    /** the page whose screenshot ends the test (the last one opened, unless a test says otherwise) */
    let shot: Page | null = null;

    const user = (username: string, extra: Record<string, unknown>) =>
      api(gw, 'POST', '/users', { username, password: PASSWORD, ...extra });
    const upload = async (site: string, data: Buffer) => {
      const u = await api<{ ref: string; upload_uri: string }>(gw, 'POST', `/files/${site}`, {
        action: 'put',
      });
      const url = new URL(u.upload_uri);
      const res = await fetchInsecure(`${base}${url.pathname}`, data);
      if (res !== 200) throw new Error(`part upload answered ${res}`);
      await api(gw, 'POST', `/files/${site}`, { action: 'end', ref: u.ref });
    };
    /** fetchInsecure PUTs one part with curl (the gateway's own certificate). */
    const fetchInsecure = async (url: string, data: Buffer) => {
      const file = path.join(work, `part-${Date.now()}`);
      writeFileSync(file, data);
      const r = spawnSync(
        'curl',
        [
          '-s',
          '-o',
          '/dev/null',
          '-w',
          '%{http_code}',
          '--cacert',
          `${gw.dataDir}/tls/cert.pem`,
          '-T',
          file,
          url,
        ],
        { encoding: 'utf8' },
      );
      rmSync(file);
      return Number(r.stdout);
    };

    before(async function () {
      this.timeout(300_000);
      buildPage();
      ({ child, info: gw } = await startGateway(['--ports', 'sftp']));
      base = `https://127.0.0.1:${gw.port}`;
      for (const f of ['alice', 'alice/docs', 'alice/dropbox']) await api(gw, 'POST', `/folders/${f}`);
      await user('alice', {
        user_root: 'alice/',
        grant_permission: 'full',
        name: 'Alice',
        email: 'alice@example.com',
      });
      await user('grace', { user_root: 'alice/', grant_permission: 'preview' });
      await user('wanda', { user_root: 'alice/dropbox/', grant_permission: 'write' });
      await upload('alice/docs/photo.png', png(64, 40, [200, 30, 30]));
      await upload('alice/docs/manual.pdf', pdf('Hello from a PDF'));
      await upload(
        'alice/docs/page.html',
        Buffer.from('<b>not bold</b><script>document.title="pwned"</script>\nline two\n'),
      );
      await upload('alice/docs/long.log', Buffer.from('log line\n'.repeat(40_000)));
      await upload('alice/docs/blob.bin', Buffer.from([0, 1, 2, 3, 0, 255, 254]));
      await upload('alice/docs/huge.png', Buffer.alloc(65 * MiB));
      browser = await launchChromium();
    });

    after(async () => {
      rmSync(work, { recursive: true, force: true });
      await browser?.close();
      if (child) await stopChild(child);
    });

    afterEach(async function () {
      await saveScreen(shot ?? contexts.at(-1)?.pages().at(-1), this.currentTest?.title, 'files-');
      shot = null;
      for (const c of contexts.splice(0)) await c.close();
    });

    async function context(width = 1100): Promise<BrowserContext> {
      const c = await browser.newContext({
        ignoreHTTPSErrors: true,
        acceptDownloads: true,
        viewport: { width, height: width < 600 ? 844 : 800 },
      });
      contexts.push(c);
      return c;
    }

    /** signIn opens the page in `ctx` (a new context by default) and signs in. */
    async function signIn(
      username: string,
      opts: { ctx?: BrowserContext; width?: number; origin?: string } = {},
    ): Promise<{ page: Page; cspErrors: string[] }> {
      const ctx = opts.ctx ?? (await context(opts.width));
      const page = await ctx.newPage();
      const cspErrors = watchCsp(page);
      await page.goto(`${opts.origin ?? base}/`);
      await signInAs(page, username, PASSWORD);
      return { page, cspErrors };
    }

    /** remembered is what the page keeps of its unfinished uploads (resume.ts). */
    const remembered = (page: Page) =>
      page.evaluate(
        () =>
          (
            globalThis as unknown as { localStorage: { getItem(k: string): string | null } }
          ).localStorage.getItem('svc-web-uploads') ?? '',
      );
    /** bigFile writes `mib` MiB of varied bytes (a pattern per `seed`) as `name` in the work dir. */
    const bigFile = (name: string, mib: number, seed: number) => {
      const data = Buffer.alloc(mib * MiB);
      for (let i = 0; i < data.length; i += 4096) data.writeUInt32LE((i * seed) >>> 0, i);
      const file = path.join(work, name);
      writeFileSync(file, data);
      return { data, file };
    };
    /** countParts lets the page's part uploads through and counts the bytes they carry. */
    const countParts = async (page: Page) => {
      const counter = { bytes: 0 };
      await page.route('**/upload/**', async (route) => {
        counter.bytes += route.request().postDataBuffer()?.length ?? 0;
        await route.continue();
      });
      return counter;
    };
    /** sameAs checks the file at a site path has `data`'s size and md5, as the server computed them. */
    const sameAs = async (site: string, data: Buffer) => {
      const stat = await api<{ md5: string; size: number }>(gw, 'GET', `/files/${site}?action=stat`);
      expect(stat.size, site).to.equal(data.length);
      expect(stat.md5, site).to.equal(md5(data));
    };
    const row = (page: Page, name: string) => page.getByRole('row').filter({ hasText: name });
    const history = async () => api<Action[]>(gw, 'GET', '/history?per_page=1000');
    const openFolder = async (page: Page, name: string) => {
      await page.getByRole('button', { name, exact: true }).click();
      await page.getByRole('navigation', { name: 'Breadcrumbs' }).getByText(name).waitFor();
    };

    it('previews an image, a PDF in the browser’s viewer and text (as text, capped); the CSP holds', async () => {
      const { page, cspErrors } = await signIn('alice');
      await openFolder(page, 'docs');

      // An image: drawn by the browser from a same-origin inline URL.
      await page.getByRole('button', { name: 'photo.png' }).click();
      const dialog = page.getByRole('dialog', { name: 'Preview of photo.png' });
      const img = dialog.getByRole('img', { name: 'photo.png' });
      await img.waitFor();
      // Decoded by the browser: the image's own width, not a broken-image icon.
      await img.evaluate((el) => (el as unknown as { decode(): Promise<void> }).decode());
      expect(await img.evaluate((el) => (el as unknown as { naturalWidth: number }).naturalWidth)).to.equal(
        64,
      );
      expect(await dialog.getByRole('button', { name: 'Download' }).count()).to.equal(1);
      await page.keyboard.press('Escape');
      await dialog.waitFor({ state: 'detached' });

      // A PDF: the frame loads the file inline, as application/pdf, from our own origin.
      const [pdfResponse] = await Promise.all([
        page.waitForResponse((r) => r.url().includes('/download/') && r.url().includes('disposition=inline')),
        (async () => {
          await page.getByRole('checkbox', { name: 'Select manual.pdf' }).check();
          await page.getByRole('button', { name: 'Preview' }).click();
        })(),
      ]);
      expect(pdfResponse.status()).to.equal(200);
      const headers = await pdfResponse.allHeaders();
      expect(headers['content-type']).to.equal('application/pdf');
      expect(headers['content-disposition']).to.match(/^inline; filename="manual.pdf"/);
      expect(new URL(pdfResponse.url()).origin).to.equal(base);
      const frame = page.getByRole('dialog', { name: 'Preview of manual.pdf' }).locator('iframe');
      await frame.waitFor();
      expect(await frame.getAttribute('title')).to.equal('manual.pdf (PDF)');
      // The browser's own PDF viewer takes the frame (Chromium's viewer is an extension page).
      for (let i = 0; i < 100 && !page.frames().some((f) => f.url().startsWith('chrome-extension://')); i++)
        await page.waitForTimeout(100);
      expect(page.frames().map((f) => f.url().split(':')[0])).to.include('chrome-extension');
      await page.waitForTimeout(1500); // it draws the page a moment later; for the screenshot
      await page.screenshot({ path: path.join(SCREENS, 'files-preview-pdf.png') });
      await page.getByRole('button', { name: 'Close' }).click();
      await page.getByRole('checkbox', { name: 'Select manual.pdf' }).uncheck();

      // HTML is shown as its text: nothing in it runs or renders.
      await page.getByRole('button', { name: 'page.html' }).click();
      const text = page.getByLabel('Text of page.html');
      await text.waitFor();
      expect(await text.textContent()).to.equal(
        '<b>not bold</b><script>document.title="pwned"</script>\nline two\n',
      );
      expect(await page.title()).to.not.equal('pwned');
      expect(await page.locator('dialog b').count()).to.equal(0);
      await page.getByRole('button', { name: 'Close' }).click();

      // A long text: its first 256 KiB, and a sentence saying so.
      await page.getByRole('button', { name: 'long.log' }).click();
      await page.getByText('Showing the first 256 KB of 352 KB.').waitFor();
      const shown = (await page.getByLabel('Text of long.log').textContent()) ?? '';
      expect(shown.length).to.equal(256 * 1024);
      expect(shown.startsWith('log line\nlog line\n')).to.equal(true);
      await page.getByRole('button', { name: 'Close' }).click();

      // Binary: said in words.
      await page.getByRole('button', { name: 'blob.bin' }).click();
      await page.getByRole('alert').filter({ hasText: 'cannot be previewed' }).waitFor();
      await page.getByRole('button', { name: 'Close' }).click();

      expect(cspErrors).to.deep.equal([]);
      // A preview is a download: each is a read Action with interface web.
      const reads = (await history()).filter(
        (a) => a.username === 'alice' && a.action === 'read' && a.interface === 'web',
      );
      expect(reads.map((a) => a.path)).to.include.members([
        'alice/docs/photo.png',
        'alice/docs/manual.pdf',
        'alice/docs/page.html',
      ]);
    });

    it('on a phone, by keyboard: Enter on a file’s name opens its preview, which fits the screen; Escape closes it', async () => {
      const { page } = await signIn('alice', { width: 390 });
      await openFolder(page, 'docs');
      const name = page.getByRole('button', { name: 'photo.png' });
      await name.focus();
      await page.keyboard.press('Enter');
      const dialog = page.getByRole('dialog', { name: 'Preview of photo.png' });
      await dialog.getByRole('img', { name: 'photo.png' }).waitFor();
      // Focus moved into the dialog, onto its Close button.
      expect(
        await page.evaluate(
          () =>
            (globalThis as unknown as { document: { activeElement: { textContent: string } } }).document
              .activeElement.textContent,
        ),
      ).to.equal('Close');
      const box = (await dialog.boundingBox())!;
      expect(box.x).to.be.at.least(0);
      expect(box.x + box.width).to.be.at.most(390);
      await page.screenshot({ path: path.join(SCREENS, 'files-preview-phone.png') });
      await page.keyboard.press('Escape');
      await dialog.waitFor({ state: 'detached' });
      // The long text wraps inside the screen too.
      await page.getByRole('button', { name: 'long.log' }).click();
      const text = page.getByLabel('Text of long.log');
      await text.waitFor();
      const t = (await text.boundingBox())!;
      expect(t.x + t.width).to.be.at.most(390);
      await page.getByRole('button', { name: 'Close' }).click();
      // An image too large to draw is said so, before anything is fetched.
      await page.getByRole('button', { name: 'huge.png' }).click();
      await page.getByRole('alert').filter({ hasText: 'This image is too large to preview' }).waitFor();
      shot = page;
    });

    it('the download URL shows only safe types inline: HTML and unknown files stay attachments', async () => {
      const entry = await api<{ download_uri: string }>(gw, 'GET', '/files/alice/docs/page.html');
      const url = `${base}${new URL(entry.download_uri).pathname}?disposition=inline`;
      const r = spawnSync(
        'curl',
        ['-s', '-D', '-', '-o', '/dev/null', '--cacert', `${gw.dataDir}/tls/cert.pem`, url],
        { encoding: 'utf8' },
      );
      expect(r.stdout).to.match(/content-disposition: attachment; filename="page.html"/i);
      expect(r.stdout).to.match(/content-type: application\/octet-stream/i);
      expect(r.stdout).to.match(/x-content-type-options: nosniff/i);
    });

    it('a previewonly user lists files but is offered neither Preview nor Download (a preview is a download), on a phone', async () => {
      const { page } = await signIn('grace', { width: 390 });
      await openFolder(page, 'docs');
      await row(page, 'photo.png').waitFor();
      for (const name of ['Preview', 'Download', 'Upload', 'Delete'])
        expect(await page.getByRole('button', { name, exact: true }).count(), name).to.equal(0);
      // The name is plain text, not a button that would fail.
      expect(await page.getByRole('button', { name: 'photo.png' }).count()).to.equal(0);
      // And the server agrees: no download URL for grace.
      const status = await page.evaluate(async () => {
        const res = await fetch('/api/rest/v1/files/alice/docs/photo.png', {
          headers: { Accept: 'application/json', 'X-Requested-With': 'svc-web' },
        });
        return res.status;
      });
      expect(status).to.equal(403);
    });

    it('uploads a folder by picker: folders created, each file with a progress bar, and a total', async () => {
      const tree = path.join(work, 'tree');
      mkdirSync(path.join(tree, 'sub', 'deeper'), { recursive: true });
      writeFileSync(path.join(tree, 'a.txt'), 'top file\n');
      writeFileSync(path.join(tree, 'sub', 'b.txt'), 'in sub\n');
      const c = Buffer.alloc(6 * MiB, 7);
      writeFileSync(path.join(tree, 'sub', 'deeper', 'c.bin'), c);
      const { page } = await signIn('alice', { width: 390 });
      await page.locator('input[webkitdirectory]').setInputFiles(tree);
      await page.getByRole('progressbar', { name: 'Upload of tree/sub/deeper/c.bin' }).waitFor();
      await page.getByRole('progressbar', { name: 'Total upload' }).waitFor();
      await page.getByText('Upload finished.').waitFor({ timeout: 60_000 });
      for (const name of ['tree/a.txt', 'tree/sub/b.txt', 'tree/sub/deeper/c.bin']) {
        const bar = page.getByRole('progressbar', { name: `Upload of ${name}` });
        expect(await bar.getAttribute('value'), name).to.equal(await bar.getAttribute('max'));
      }
      await row(page, 'tree').waitFor();
      await sameAs('alice/tree/sub/deeper/c.bin', c);
      expect((await api<{ size: number }>(gw, 'GET', '/files/alice/tree/a.txt?action=stat')).size).to.equal(
        9,
      );
      const total = page.getByRole('progressbar', { name: 'Total upload' });
      expect(await total.getAttribute('value')).to.equal(String(9 + 7 + c.length));
    });

    it('uploads a dropped folder (entries walked, empty folders too)', async () => {
      const { page } = await signIn('alice');
      await openFolder(page, 'docs');
      // A real folder in the page's sandboxed file system, dropped as the browser drops one: the
      // drop's items give its entry (webkitGetAsEntry), and the page walks it.
      // (Plain JavaScript in a string: the test runner's transpiler would add helpers the page lacks.)
      const handle = await page.evaluateHandle(`(async () => {
        const fs = await new Promise((ok, fail) => webkitRequestFileSystem(0, 1 << 20, ok, fail));
        const dir = (parent, name) =>
          new Promise((ok, fail) => parent.getDirectory(name, { create: true }, ok, fail));
        const file = (parent, name, text) =>
          new Promise((ok, fail) =>
            parent.getFile(name, { create: true }, (f) =>
              f.createWriter((w) => {
                w.onwriteend = () => ok();
                w.onerror = fail;
                w.write(new Blob([text]));
              }), fail));
        const top = await dir(fs.root, 'album');
        await file(top, 'one.txt', 'first\\n');
        const inner = await dir(top, 'inner');
        await file(inner, 'two.txt', 'second!\\n');
        await dir(top, 'empty');
        // The drop's data as Chromium hands it over: an item whose entry is the folder.
        return { items: [{ kind: 'file', webkitGetAsEntry: () => top }], files: [] };
      })()`);
      await page.locator('main.browser').evaluate((target, dt) => {
        for (const type of ['dragover', 'drop']) {
          const e = new Event(type, { bubbles: true, cancelable: true });
          Object.defineProperty(e, 'dataTransfer', { value: dt });
          target.dispatchEvent(e);
        }
      }, handle);
      await page.getByRole('progressbar', { name: 'Upload of album/inner/two.txt' }).waitFor();
      await page.getByText('Upload finished.').waitFor({ timeout: 60_000 });
      await row(page, 'album').waitFor();
      expect(
        (await api<{ size: number }>(gw, 'GET', '/files/alice/docs/album/inner/two.txt?action=stat')).size,
      ).to.equal(8);
      expect(
        (await api<{ size: number }>(gw, 'GET', '/files/alice/docs/album/one.txt?action=stat')).size,
      ).to.equal(6);
      expect(
        (await api<{ type: string }>(gw, 'GET', '/files/alice/docs/album/empty?action=stat')).type,
      ).to.equal('directory');
    });

    it('resumes a large upload after the page was closed mid-way: only the missing parts are sent; md5 equal over SFTP', async () => {
      await api(gw, 'POST', '/folders/alice/big');
      const { data, file } = bigFile('video.bin', 80, 2654435761);
      const size = data.length;

      const ctx = await context();
      const { page } = await signIn('alice', { ctx });
      await openFolder(page, 'big');
      // The first part to arrive (1 or 2, both 32 MiB) goes through; the next ones hang, and the
      // page is closed while they do.
      let partsSeen = 0;
      await page.route('**/upload/**', async (route) => {
        if (++partsSeen === 1) {
          await route.continue();
          return;
        }
        // Never answered: the page is closed with this part on the wire.
      });
      await page.locator('input[type=file][multiple]').setInputFiles(file);
      await page.getByRole('progressbar', { name: 'Upload of video.bin' }).waitFor();
      while (!/"done":\[\d\]/.test(await remembered(page))) await page.waitForTimeout(100);
      await page.close();
      const before = await api<{ path: string }[]>(gw, 'GET', '/folders/alice/big');
      expect(before.map((e) => e.path)).to.not.include('alice/big/video.bin');

      // A new page in the same browser: it tells of the interrupted upload, and picking the file resumes it.
      // (still signed in: the session cookie outlives the page)
      const again = await ctx.newPage();
      await again.goto(`${base}/`);
      await again.getByRole('button', { name: 'Sign out' }).waitFor();
      await openFolder(again, 'big');
      await again.getByText('An upload was interrupted').waitFor();
      await again.getByText('video.bin: 32 MB of 80 MB sent').waitFor();
      await again.screenshot({ path: path.join(SCREENS, 'files-resume-notice.png') });
      const resent = await countParts(again);
      await again.locator('input[type=file][multiple]').setInputFiles(file);
      await again.getByText(/resumed at 32 MB/).waitFor();
      await again.getByText('Upload finished.').waitFor({ timeout: 120_000 });
      await row(again, 'video.bin').waitFor();
      // Exactly the missing 48 MiB went over the wire again, not the whole file.
      expect(resent.bytes).to.equal(size - 32 * MiB);
      await sameAs('alice/big/video.bin', data);
      expect(await remembered(again)).to.equal('{}');
      expect(await again.getByText('An upload was interrupted').count()).to.equal(0);

      // An independent reader: OpenSSH sftp fetches the file, and its md5 is the original's.
      const sftp = await SftpClient.open(gw.ports.sftp!, 'alice', PASSWORD);
      const local = path.join(work, 'fetched.bin');
      try {
        const got = await sftp.run(`get big/video.bin ${local}`);
        expect(got.ok, got.output).to.equal(true);
      } finally {
        await sftp.close();
      }
      expect(md5(readFileSync(local))).to.equal(md5(data));
    });

    it('an upload whose connection keeps dropping fails in words; choosing the file again sends only the rest', async () => {
      await api(gw, 'POST', '/folders/alice/flaky');
      const { data, file } = bigFile('flaky.bin', 70, 40503);
      const { page } = await signIn('alice');
      await openFolder(page, 'flaky');
      // The network goes down after the first part: every later attempt is cut.
      let seen = 0;
      await page.route('**/upload/**', (route) =>
        ++seen === 1 ? route.continue() : route.abort('connectionreset'),
      );
      await page.locator('input[type=file][multiple]').setInputFiles(file);
      // The page retries each dropped part before it gives up: 52 s alone here, past 60 beside another test pass.
      await page.getByText('Failed: The connection dropped while sending.').waitFor({ timeout: 150_000 });
      await page.getByText('Upload finished; 1 of 1 failed.').waitFor();
      await page.getByText('flaky.bin: 32 MB of 70 MB sent').waitFor();
      // The network is back: the same file again resumes.
      await page.unroute('**/upload/**');
      const resent = await countParts(page);
      await page.locator('input[type=file][multiple]').setInputFiles(file);
      await page.getByText('Done (resumed at 32 MB)').waitFor({ timeout: 60_000 });
      expect(resent.bytes).to.equal(data.length - 32 * MiB);
      await sameAs('alice/flaky/flaky.bin', data);
    });

    it('subscribes to and unsubscribes from a folder’s e-mail notifications, and shows its history', async () => {
      const { page } = await signIn('alice');
      await openFolder(page, 'docs');
      await page.getByRole('button', { name: 'Activity' }).click();
      const dialog = page.getByRole('dialog', { name: 'Activity in /alice/docs' });
      const box = dialog.getByRole('checkbox', { name: 'E-mail me when files in this folder change' });
      await box.waitFor();
      expect(await box.isChecked()).to.equal(false);
      await box.check();
      await dialog.getByText('You will get e-mail when files in this folder are added or changed.').waitFor();
      const subs = await api<{ path: string; username: string }[]>(gw, 'GET', '/notifications');
      expect(subs.map((s) => `${s.username}:${s.path}`)).to.include('alice:alice/docs');
      // History: the uploads of this run, in words.
      const list = dialog.getByRole('list', { name: 'Recent history' });
      await list
        .getByText(/alice downloaded photo\.png via the web/)
        .first()
        .waitFor();
      await list
        .getByText(/created manual\.pdf via the API/)
        .first()
        .waitFor();
      await page.screenshot({ path: path.join(SCREENS, 'files-activity.png') });
      await dialog.getByRole('button', { name: 'Close' }).click();

      // Reopened: the box remembers; unchecking removes the subscription.
      await page.getByRole('button', { name: 'Activity' }).click();
      const box2 = page.getByRole('checkbox', { name: 'E-mail me when files in this folder change' });
      while (!(await box2.isChecked())) await page.waitForTimeout(100);
      await box2.uncheck();
      await page.getByText('You will no longer get e-mail about this folder.').waitFor();
      const after = await api<{ path: string; username: string }[]>(gw, 'GET', '/notifications');
      expect(after.map((s) => `${s.username}:${s.path}`)).to.not.include('alice:alice/docs');
      shot = page;
    });

    it('a writeonly user may upload into the folder but not list it or see its history, and is told so', async () => {
      const { page } = await signIn('wanda');
      await page.getByText('You may upload into this folder, but not see what is in it.').waitFor();
      expect(await page.getByRole('alert').count()).to.equal(0);
      // The refusal carried the folder's rights: Upload is offered, Download is not.
      await page.getByRole('button', { name: 'Upload', exact: true }).waitFor();
      expect(await page.getByRole('button', { name: 'Download' }).count()).to.equal(0);
      await page.getByRole('button', { name: 'Activity' }).click();
      const dialog = page.getByRole('dialog', { name: 'Activity in /alice/dropbox' });
      await dialog.getByText('You may not see this folder’s history.').waitFor();
      writeFileSync(path.join(work, 'report.txt'), 'for the drop box\n');
      await page.getByRole('button', { name: 'Close' }).click();
      await page.locator('input[type=file][multiple]').setInputFiles(path.join(work, 'report.txt'));
      await page.getByText('Upload finished.').waitFor();
      expect(
        (await api<{ size: number }>(gw, 'GET', '/files/alice/dropbox/report.txt?action=stat')).size,
      ).to.equal(17);
    });

    it('an idle session is signed out, and the page says so in words', async function () {
      // A gateway of its own whose sessions end after 3 seconds without a request.
      const { child: idleChild, info } = await startGateway([
        '--config',
        JSON.stringify({ sessions: { idle_timeout_minutes: 0.05 } }),
      ]);
      try {
        await api(info, 'POST', '/folders/alice');
        await api(info, 'POST', '/users', {
          username: 'alice',
          password: PASSWORD,
          user_root: 'alice/',
          grant_permission: 'full',
        });
        const { page } = await signIn('alice', { origin: `https://127.0.0.1:${info.port}` });
        await page.getByText('This folder is empty.').waitFor();
        // Nothing is clicked: the page notices the end by itself.
        await page
          .getByRole('status')
          .filter({
            hasText: 'You were signed out after 3 seconds without activity. Sign in again to go on.',
          })
          .waitFor({ timeout: 20_000 });
        await page.getByRole('button', { name: 'Sign in' }).waitFor();
        expect(await page.getByRole('button', { name: 'Sign out' }).count()).to.equal(0);
        shot = page;
        await page.screenshot({ path: path.join(SCREENS, 'files-idle-signed-out.png') });
      } finally {
        await stopChild(idleChild);
      }
    });
  },
);
