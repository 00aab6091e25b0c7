/**
 * The Users admin page in a real browser (Debian's chromium driven by playwright-core) against a
 * real gateway process with SFTP and 10,000 extra users: a site admin creates a user whose new
 * root folder is made in the folder picker, who then logs in over OpenSSH sftp and sees it as /;
 * turning sftp_permission off refuses that login; a locked-out user is shown as such and unlocked;
 * an API key is made (shown once) and revoked; a search finds one user among 10,000. Screenshots go
 * to .tmp/web-screens/admin-users-*.png.
 *
 * SQLite only: what it checks is the page; the REST API and core under it run on both databases in
 * test/protocols/rest/users.test.ts.
 */
import type { ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import https from 'node:https';
import { expect } from 'chai';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { buildPage, launchChromium, saveScreen, signInAs, openAdminPage } from '../../helpers/chromium.ts';
import { api, startGateway, stopChild, type GatewayInfo } from '../../bench/lib.ts';
import { dbKind } from '../../helpers/gateway.ts';
import { sftpBatch } from '../sftp/clients.ts';

const PASSWORD = 'correct-horse-9';

/** status sends one request with `headers` and answers its status (api() throws on refusals). */
function status(
  gw: GatewayInfo,
  method: string,
  urlPath: string,
  headers: Record<string, string>,
  body?: unknown,
) {
  const ca = readFileSync(`${gw.dataDir}/tls/cert.pem`);
  const payload = body === undefined ? undefined : JSON.stringify(body);
  return new Promise<number>((resolve, reject) => {
    const req = https.request(
      {
        host: '127.0.0.1',
        port: gw.port,
        method,
        path: `/api/rest/v1${urlPath}`,
        ca,
        servername: 'localhost',
        headers: {
          Accept: 'application/json',
          ...(payload ? { 'Content-Type': 'application/json' } : {}),
          ...headers,
        },
      },
      (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}

(dbKind === 'sqlite' ? describe : describe.skip)(
  'web admin: Users page in chromium (SQLite only: slow)',
  function () {
    this.timeout(120_000);
    let child: ChildProcess;
    let gw: GatewayInfo;
    let browser: Browser;
    let base: string;
    let page: Page;
    let context: BrowserContext;
    const cspErrors: string[] = [];

    before(async function () {
      this.timeout(300_000);
      buildPage();
      ({ child, info: gw } = await startGateway(['--ports', 'sftp', '--users', '10000']));
      base = `https://127.0.0.1:${gw.port}`;
      browser = await launchChromium();
      context = await browser.newContext({ ignoreHTTPSErrors: true, viewport: { width: 1200, height: 900 } });
      page = await context.newPage();
      page.on('console', (m) => {
        if (m.type() === 'error' && /Content Security Policy|Refused to/i.test(m.text()))
          cspErrors.push(m.text());
      });
      await page.goto(`${base}/`);
      await signInAs(page, 'admin', 'admin-password');
      await openAdminPage(page, 'Users');
    });

    after(async () => {
      await browser?.close();
      if (child) await stopChild(child);
    });

    afterEach(async function () {
      await saveScreen(page, this.currentTest?.title, 'admin-users-');
      expect(cspErrors, 'CSP refusals').to.deep.equal([]);
    });

    /** openUser searches the list for `username` and opens their editor. */
    async function openUser(username: string) {
      const back = page.getByRole('button', { name: '← All users' });
      if (await back.isVisible()) await back.click();
      await page.getByLabel('Search users').fill(username);
      const table = page.getByRole('table', { name: new RegExp(`Users matching “${username}”`) });
      await table.getByRole('button', { name: username, exact: true }).click();
      await page.getByRole('heading', { name: `User ${username}` }).waitFor();
    }

    const sftp = (username: string, commands: string[]) =>
      sftpBatch(gw.ports.sftp!, username, { password: PASSWORD }, commands, { timeoutMs: 30_000 });

    it('creates a user whose new root folder is made in the folder picker; they see it as / over SFTP', async () => {
      await page.getByRole('button', { name: 'New user' }).click();
      await page.getByRole('heading', { name: 'New user' }).waitFor();
      await page.getByLabel('Username').fill('sam');
      await page.getByLabel('Password', { exact: true }).fill(PASSWORD);
      await page.getByLabel('Name', { exact: true }).fill('Sam Sftp');
      // A refused field is named beside it (SPEC model_errors), and nothing is created.
      await page.getByLabel('Root folder (user_root)').fill('/nope');
      await page.getByRole('button', { name: 'Save' }).click();
      await page.locator('.field-error', { hasText: 'must not start with a slash' }).waitFor();
      expect(await page.getByLabel('Root folder (user_root)').getAttribute('aria-invalid')).to.equal('true');

      await page.getByLabel('Root folder (user_root)').fill('');
      await page.getByRole('button', { name: 'Choose folder' }).click();
      const picker = page.getByRole('dialog', { name: 'Root folder' });
      await picker.getByLabel('New folder in /').fill('sam-home');
      await picker.getByRole('button', { name: 'Create folder' }).click();
      await picker.getByText('Into: /sam-home').waitFor();
      await picker.getByRole('button', { name: 'Use this folder' }).click();
      expect(await page.getByLabel('Root folder (user_root)').inputValue()).to.equal('sam-home/');
      await page.getByLabel('Grant on the root folder').selectOption('full');
      await page.getByRole('button', { name: 'Save' }).click();
      await page.getByRole('status').filter({ hasText: 'User sam created.' }).waitFor();
      await page.getByRole('heading', { name: 'User sam' }).waitFor();

      const r = await sftp('sam', ['pwd', 'mkdir made-over-sftp', 'ls -1']);
      expect(r.code, r.stderr).to.equal(0);
      expect(r.stdout).to.include('Remote working directory: /\n');
      const listed = await api<{ path: string }[]>(gw, 'GET', '/folders/sam-home');
      expect(listed.map((e) => e.path)).to.deep.equal(['sam-home/made-over-sftp']);
    });

    it('turns sftp_permission off, and the SFTP login is refused', async () => {
      await openUser('sam');
      const flag = page.getByLabel('SFTP', { exact: true });
      expect(await flag.isChecked()).to.equal(true);
      await flag.uncheck();
      await page.getByRole('button', { name: 'Save' }).click();
      await page.getByRole('status').filter({ hasText: 'Saved.' }).waitFor();
      const r = await sftp('sam', ['pwd']);
      expect(r.code).to.not.equal(0);
      expect(r.stdout).to.not.include('Remote working directory');
      const [user] = await api<{ sftp_permission: boolean; ftp_permission: boolean }[]>(
        gw,
        'GET',
        '/users?search=sam',
      );
      expect(user).to.include({ sftp_permission: false, ftp_permission: true });
    });

    it('shows a locked-out user as locked; Unlock lets them sign in again', async () => {
      await api(gw, 'POST', '/users', { username: 'lou', password: PASSWORD });
      for (let i = 0; i < 5; i++)
        expect(
          await status(gw, 'POST', '/sessions', {}, { username: 'lou', password: 'wrong-password' }),
        ).to.equal(401);
      expect(await status(gw, 'POST', '/sessions', {}, { username: 'lou', password: PASSWORD })).to.equal(
        401,
      );

      await page.getByRole('button', { name: '← All users' }).click();
      await page.getByLabel('Search users').fill('lou');
      const row = page
        .getByRole('row')
        .filter({ has: page.getByRole('button', { name: 'lou', exact: true }) });
      await row.getByText('Locked out').waitFor();
      await row.getByRole('button', { name: 'lou', exact: true }).click();
      await page.getByText(/Locked out until .+ after failed logins/).waitFor();
      await saveScreen(page, 'locked-out-user', 'admin-users-');
      await page.getByRole('button', { name: 'Unlock' }).click();
      await page.getByRole('status').filter({ hasText: 'lou is unlocked' }).waitFor();
      await page.getByText('Not locked out.').waitFor();
      expect(await page.getByRole('button', { name: 'Unlock' }).count()).to.equal(0);
      expect(await status(gw, 'POST', '/sessions', {}, { username: 'lou', password: PASSWORD })).to.equal(
        200,
      );
    });

    it('makes an API key for a user, shown once; revoking it makes the key get 401', async () => {
      await openUser('lou');
      await page.getByRole('button', { name: 'New API key' }).click();
      const dialog = page.getByRole('dialog', { name: 'New API key for lou' });
      await dialog.getByLabel('Key name').fill('nightly sync');
      await dialog.getByLabel('Your own password').fill('admin-password');
      await dialog.getByRole('button', { name: 'Create key' }).click();
      const shown = page.getByRole('dialog', { name: 'New API key' });
      await shown.getByText('Copy this key now: it is not shown again.').waitFor();
      const key = await shown.getByLabel('API key').inputValue();
      expect(key.length).to.be.greaterThan(20);
      await saveScreen(page, 'key-shown-once', 'admin-users-');
      expect(await status(gw, 'GET', '/api_key', { 'X-SvcAPI-Key': key })).to.equal(200);
      await shown.getByRole('button', { name: 'Done' }).click();

      const keys = page.getByRole('table', { name: 'API keys of lou' });
      const keyRow = keys.getByRole('row').filter({ hasText: 'nightly sync' });
      await keyRow.waitFor();
      // The list never shows the key again.
      expect(await page.getByText(key).count()).to.equal(0);
      await keyRow.getByRole('button', { name: 'Revoke' }).click();
      await page
        .getByRole('dialog', { name: /Revoke the API key nightly sync/ })
        .getByRole('button', { name: 'Revoke key' })
        .click();
      await page.getByRole('status').filter({ hasText: 'API key revoked.' }).waitFor();
      await page.getByText('No API keys.').waitFor();
      expect(await status(gw, 'GET', '/api_key', { 'X-SvcAPI-Key': key })).to.equal(401);
    });

    it('finds one user among 10,000 by a search, and sorts on the server', async () => {
      await page.getByRole('button', { name: '← All users' }).click();
      await page.getByLabel('Search users').fill('');
      const table = page.getByRole('table', { name: /^Users/ });
      // A page of 50 of the 10,100 users, with a next page.
      await table.getByRole('button', { name: 'admin', exact: true }).waitFor();
      expect(await table.locator('tbody tr').count()).to.equal(50);
      expect(await page.getByRole('button', { name: 'Next page' }).isEnabled()).to.equal(true);

      await page.getByLabel('Search users').fill('CROWD04321@example');
      await page.getByRole('table', { name: /Users matching “CROWD04321@example”/ }).waitFor();
      await table.getByRole('button', { name: 'crowd04321', exact: true }).waitFor();
      expect(await table.locator('tbody tr').count()).to.equal(1);
      await saveScreen(page, 'search-one-of-10000', 'admin-users-');

      await page.getByLabel('Search users').fill('crowd0999');
      await table.getByRole('button', { name: 'crowd09990', exact: true }).waitFor();
      await table.getByRole('button', { name: /^Username/ }).click();
      // Descending now: the first row is the last name.
      await table.locator('tbody tr').first().filter({ hasText: 'crowd09999' }).waitFor();
      expect(await table.locator('tbody tr').first().textContent()).to.include('crowd09999');
      expect(await table.getByRole('columnheader', { name: /Username/ }).getAttribute('aria-sort')).to.equal(
        'descending',
      );
    });
  },
);
