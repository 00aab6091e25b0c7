/**
 * The activity admin pages in a real browser (issue 15): History filtered by interface over actions
 * made through the REST API and a real SFTP client; Webhooks exporting the delivery log, the CSV
 * downloaded and read, a failed delivery (the receiver answered 500) retried once the receiver
 * answers 200, and received; Notifications added and removed. Screenshots under .tmp/web-screens/.
 *
 * SQLite only: the page and the adapter are what is checked; the filters and exports run on both
 * databases in test/protocols/rest/.
 */
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import Papa from 'papaparse';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { buildPage, launchChromium, saveScreen, signInAs, openAdminPage } from '../../helpers/chromium.ts';
import { api, startGateway, stopChild, type GatewayInfo } from '../../bench/lib.ts';
import { dbKind } from '../../helpers/gateway.ts';
import { sftpBatch } from '../sftp/clients.ts';
import { startReceiver, type Receiver } from '../../unit/events/receiver.ts';

const PASSWORD = 'correct-horse-9';

(dbKind === 'sqlite' ? describe : describe.skip)(
  'admin activity pages in chromium (SQLite only)',
  function () {
    this.timeout(60_000);
    let child: ChildProcess;
    let gw: GatewayInfo;
    let browser: Browser;
    let receiver: Receiver;
    let base: string;
    const contexts: BrowserContext[] = [];
    const work = mkdtempSync(path.join(os.tmpdir(), 'svc-admin-activity-'));

    before(async function () {
      this.timeout(120_000);
      buildPage();
      receiver = await startReceiver();
      receiver.answer = () => 500;
      const config = {
        webhooks: [{ url: `${receiver.url}/hook`, folder: 'inbox' }],
        // One attempt: a 500 makes the delivery fail at once, so the test needs no backoff.
        events: { poll_interval_ms: 50, webhook_max_attempts: 1, webhook_timeout_seconds: 5 },
      };
      ({ child, info: gw } = await startGateway(['--ports', 'sftp', '--config', JSON.stringify(config)]));
      base = `https://127.0.0.1:${gw.port}`;
      await api(gw, 'POST', '/folders/inbox');
      await api(gw, 'POST', '/users', { username: 'boss', password: PASSWORD, site_admin: true });
      await api(gw, 'POST', '/users', {
        username: 'sally',
        password: PASSWORD,
        user_root: 'inbox/',
        grant_permission: 'full',
      });
      // fran is a Folder Admin of inbox only.
      await api(gw, 'POST', '/users', { username: 'fran', password: PASSWORD });
      await api(gw, 'POST', '/permissions', { path: 'inbox', permission: 'admin', username: 'fran' });
      // An action over the REST API (the site-wide key), outside the webhook's folder.
      await api(gw, 'POST', '/folders/rest-made');
      // And one over SFTP with OpenSSH's client, into the webhook's folder.
      const local = path.join(work, 'sftp-made.txt');
      writeFileSync(local, 'made over sftp\n');
      const put = await sftpBatch(gw.ports.sftp!, 'sally', { password: PASSWORD }, [`put ${local}`]);
      expect(put.code, put.stderr).to.equal(0);
      await receiver.waitFor(1);
      browser = await launchChromium();
    });

    after(async () => {
      await browser?.close();
      if (child) await stopChild(child);
      await receiver?.close();
      rmSync(work, { recursive: true, force: true });
    });

    afterEach(async function () {
      await saveScreen(contexts.at(-1)?.pages()[0], this.currentTest?.title, 'admin-activity-');
      for (const c of contexts.splice(0)) await c.close();
    });

    /** admin signs `username` (boss: a site admin) in and opens an admin page from the Administration nav. */
    async function admin(pageName: string, username = 'boss'): Promise<Page> {
      const context = await browser.newContext({
        ignoreHTTPSErrors: true,
        acceptDownloads: true,
        viewport: { width: 1280, height: 900 },
      });
      contexts.push(context);
      const page = await context.newPage();
      await page.goto(`${base}/`);
      await signInAs(page, username, PASSWORD);
      await openAdminPage(page, pageName);
      return page;
    }

    /** cells reads a table's body as rows of cell texts. */
    const cells = (page: Page, table: string) =>
      page
        .getByRole('table', { name: table })
        .locator('tbody tr')
        .evaluateAll((rows) =>
          rows.map((r) => [...r.querySelectorAll('td')].map((td) => td.textContent ?? '')),
        );

    it('filters history by interface: SFTP shows only the SFTP upload, REST API only the REST actions', async () => {
      const page = await admin('History');
      const actions = page.getByRole('table', { name: 'Actions' });
      await actions.getByRole('cell', { name: '/inbox/sftp-made.txt' }).waitFor();
      await page.getByLabel('Interface').selectOption({ label: 'SFTP' });
      await page.getByRole('button', { name: 'Apply filters' }).click();
      // The REST API's actions (listed before the filter) leave the table.
      await actions
        .getByRole('cell', { name: 'REST API', exact: true })
        .first()
        .waitFor({ state: 'detached' });
      const sftp = await cells(page, 'Actions');
      expect(sftp.map((r) => r[3])).to.include('/inbox/sftp-made.txt');
      expect(sftp.map((r) => r[4])).to.deep.equal(sftp.map(() => 'SFTP'));
      expect(sftp.map((r) => r[3])).to.not.include('/rest-made');
      expect(sftp.find((r) => r[3] === '/inbox/sftp-made.txt')?.[1]).to.equal('sally');

      await page.getByLabel('Interface').selectOption({ label: 'REST API' });
      await page.getByRole('combobox', { name: /^Action/ }).selectOption('create');
      await page.getByRole('button', { name: 'Apply filters' }).click();
      await actions.getByRole('cell', { name: '/rest-made', exact: true }).waitFor();
      const rest = await cells(page, 'Actions');
      expect(rest.map((r) => r[4])).to.deep.equal(rest.map(() => 'REST API'));
      expect(rest.map((r) => r[2])).to.deep.equal(rest.map(() => 'create'));
      expect(rest.map((r) => r[3])).to.not.include('/inbox/sftp-made.txt');

      // A refusal of the server is shown in words.
      await page.getByLabel('User', { exact: true }).fill('nobody-by-that-name');
      await page.getByRole('button', { name: 'Apply filters' }).click();
      expect(await page.getByRole('alert').textContent()).to.include(
        'There is no user named nobody-by-that-name',
      );
    });

    it('exports the delivery log, downloads the CSV, and retries a failed delivery that then arrives', async () => {
      const page = await admin('Webhooks');
      await page.getByLabel('Folder').fill('inbox');
      await page.getByLabel('Outcome').selectOption({ label: 'Failed' });
      await page.getByRole('button', { name: 'Export' }).click();
      await page.getByText(/Export \d+ is ready\./).waitFor();

      const [download] = await Promise.all([
        page.waitForEvent('download'),
        page.getByRole('link', { name: 'Download CSV' }).click(),
      ]);
      const file = path.join(work, 'export.csv');
      await download.saveAs(file);
      const csv = Papa.parse<Record<string, string>>(readFileSync(file, 'utf8'), {
        header: true,
        skipEmptyLines: true,
      });
      expect(csv.errors).to.deep.equal([]);
      expect(csv.data, JSON.stringify(csv.data)).to.have.length(1);
      expect(csv.data[0]).to.include({
        path: 'inbox/sftp-made.txt',
        folder: 'inbox',
        status: '500',
        success: 'false',
        request_method: 'POST',
        request_url: `${receiver.url}/hook`,
      });

      const deliveries = page.getByRole('table', { name: 'Deliveries' });
      await deliveries.getByRole('cell', { name: /^Failed: HTTP 500/ }).waitFor();
      const failed = (await cells(page, 'Deliveries'))[0]!;
      expect(failed.slice(1, 4)).to.deep.equal(['/inbox/sftp-made.txt', `POST ${receiver.url}/hook`, '500']);

      receiver.answer = () => 200;
      const before = receiver.received.length;
      await page.getByRole('button', { name: `Retry delivery ${csv.data[0]!.id}` }).click();
      expect(
        await page.getByRole('status').filter({ hasText: 'will be sent again' }).textContent(),
      ).to.include(`Delivery ${csv.data[0]!.id}`);
      const got = await receiver.waitFor(before + 1);
      const retried = JSON.parse(got[before]!.body) as { path: string; interface: string; username: string };
      expect(retried).to.include({ path: 'inbox/sftp-made.txt', interface: 'sftp', username: 'sally' });

      // The retried attempt is in the log: an export of the delivered ones finds it.
      await page.getByLabel('Outcome').selectOption({ label: 'Delivered' });
      await page.getByRole('button', { name: 'Export' }).click();
      await deliveries.getByRole('cell', { name: /^Delivered: delivered \(HTTP 200\)/ }).waitFor();
      const delivered = await cells(page, 'Deliveries');
      expect(delivered.map((r) => r[1])).to.deep.equal(['/inbox/sftp-made.txt']);
      expect(await deliveries.getByRole('button', { name: /Retry/ }).count()).to.equal(0);
    });

    it('adds a notification for a user by username, and removes it', async () => {
      const page = await admin('Notifications');
      await page.getByLabel('Username').fill('sally');
      await page.getByLabel('Folder path').fill('/inbox/');
      await page.getByRole('button', { name: 'Add notification' }).click();
      expect(await page.getByRole('status').textContent()).to.equal('sally will get e-mail about /inbox.');
      const table = page.getByRole('table', { name: 'Notifications' });
      await table.getByRole('cell', { name: '/inbox', exact: true }).waitFor();
      await saveScreen(page, 'notification added', 'admin-activity-');
      const listed = await api<{ path: string; username: string }[]>(gw, 'GET', '/notifications');
      expect(listed.map((n) => [n.username, n.path])).to.deep.equal([['sally', 'inbox']]);

      // A second one for the same user and folder is refused in words.
      await page.getByLabel('Username').fill('sally');
      await page.getByLabel('Folder path').fill('inbox');
      await page.getByRole('button', { name: 'Add notification' }).click();
      expect(await page.getByRole('alert').textContent()).to.match(/already has a notification/i);

      await page.getByRole('button', { name: 'Remove notification of sally on /inbox' }).click();
      await page.getByText('No notifications yet.').waitFor();
      expect(await api(gw, 'GET', '/notifications')).to.deep.equal([]);
    });

    it("a Folder Admin reads their folder's history and exports its deliveries, without the site's filters or retry", async () => {
      const page = await admin('History', 'fran');
      const nav = page.getByRole('navigation', { name: 'Administration' });
      expect(await nav.getByRole('button').allTextContents()).to.deep.equal([
        'Permissions',
        'History',
        'Webhooks',
      ]);
      expect(await page.getByLabel('Folder').locator('option').allTextContents()).to.deep.equal(['/inbox']);
      expect(await page.getByLabel('Interface').count()).to.equal(0);
      const actions = page.getByRole('table', { name: 'Actions' });
      await actions.getByRole('cell', { name: '/inbox/sftp-made.txt' }).waitFor();
      const rows = await cells(page, 'Actions');
      expect(rows.map((r) => r[3]).every((p) => p.startsWith('/inbox'))).to.equal(true);

      await nav.getByRole('button', { name: 'Webhooks' }).click();
      expect(await page.getByLabel('Folder').locator('option').allTextContents()).to.deep.equal(['/inbox']);
      await page.getByRole('button', { name: 'Export' }).click();
      const deliveries = page.getByRole('table', { name: 'Deliveries' });
      await deliveries.getByRole('cell', { name: /^Failed: HTTP 500/ }).waitFor();
      expect((await cells(page, 'Deliveries')).map((r) => r[1])).to.include('/inbox/sftp-made.txt');
      // Retrying is for site admins (SPEC): the page offers no Retry.
      expect(await page.getByRole('button', { name: /Retry/ }).count()).to.equal(0);
    });
  },
);
