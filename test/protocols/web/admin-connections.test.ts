/**
 * The Connections admin page in chromium (issue 15, item 4): a site admin signed in on gateway A
 * sees another user's OpenSSH sftp upload served by gateway B, a second process on the same
 * PostgreSQL database, with its bytes so far growing as the page refreshes, and ends it with the
 * End button (after a confirmation); the client is disconnected and the row goes.
 *
 * PostgreSQL only: the two processes share one database, which SQLite is not.
 */
import { type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { api, startGateway, stopChild, type GatewayInfo } from '../../bench/lib.ts';
import { buildPage, launchChromium, saveScreen, signInAs, openAdminPage } from '../../helpers/chromium.ts';
import { dbKind, TEST_DATABASE_URL } from '../../helpers/gateway.ts';
import { openSftp, sftpClosed, type OpenSftp } from '../../helpers/open-sftp.ts';
import { serveProcess, stopProcess, type ServedProcess } from '../../helpers/process.ts';

const PASSWORD = 'connections-web-1';

(dbKind === 'postgres' ? describe : describe.skip)(
  'admin Connections page in chromium (PostgreSQL only: a second gateway process shares the database)',
  function () {
    this.timeout(120_000);
    let child: ChildProcess;
    let gw: GatewayInfo;
    let b: ServedProcess;
    let browser: Browser;
    let context: BrowserContext;
    let page: Page;
    let sftp: OpenSftp | null = null;
    const work = mkdtempSync(path.join(os.tmpdir(), 'svc-admin-connections-'));

    before(async function () {
      this.timeout(120_000);
      buildPage();
      ({ child, info: gw } = await startGateway([], [], { SVC_TEST_DATABASE_URL: TEST_DATABASE_URL }));
      expect(gw.databaseUrl).to.match(/^postgres/);
      b = await serveProcess(path.join(work, 'b'), {
        SVC_DATABASE_URL: gw.databaseUrl,
        SVC_FTP_PORT: 'off',
        SVC_FTPS_PORT: 'off',
        SVC_WEBDAV_PORT: 'off',
      });
      await api(gw, 'POST', '/users', {
        username: 'mallory',
        password: PASSWORD,
        user_root: '',
        grant_permission: 'full',
      });
      writeFileSync(path.join(work, 'big.bin'), randomBytes(8 * 1024 * 1024));
      browser = await launchChromium();
      context = await browser.newContext({ ignoreHTTPSErrors: true, viewport: { width: 1200, height: 700 } });
      page = await context.newPage();
    });

    after(async () => {
      if (sftp && sftp.child.exitCode === null) sftp.child.kill('SIGKILL');
      await browser?.close();
      if (b && b.child.exitCode === null) await stopProcess(b);
      if (child) await stopChild(child);
      rmSync(work, { recursive: true, force: true });
    });

    afterEach(async function () {
      await saveScreen(page, this.currentTest?.title, 'admin-connections-');
    });

    it("shows another user's SFTP upload on the other instance, with its bytes growing", async () => {
      sftp = openSftp(b.ports.sftp!, 'mallory', PASSWORD, 800);
      sftp.run(`put ${path.join(work, 'big.bin')} big.bin`);
      await page.goto(`https://127.0.0.1:${gw.port}/`);
      await signInAs(page, 'admin', 'admin-password');
      await openAdminPage(page, 'Connections');
      const table = page.getByRole('table', { name: 'Connections' });
      const row = table.getByRole('row').filter({ hasText: 'mallory' });
      await row.filter({ hasText: 'so far' }).waitFor();
      const cells = await row.getByRole('cell').allTextContents();
      expect(cells[0]).to.equal('mallory');
      expect(cells[1]).to.equal('SFTP');
      expect(cells[2]).to.equal('127.0.0.1');
      // Served by B: its process id is in the instance's name.
      expect(cells[4]).to.include(`:${b.child.pid}:`);
      expect(cells[5]).to.match(/^Uploading \/big\.bin: [\d.]+ (B|KB|MB) so far$/);
      // The page refreshes by itself: the bytes so far change while the upload runs.
      const first = cells[5]!;
      await page.waitForFunction(
        (before) => {
          const rows = (
            globalThis as unknown as {
              document: { querySelectorAll(s: string): Iterable<{ textContent: string | null }> };
            }
          ).document.querySelectorAll('tr');
          const r = [...rows].find((tr) => tr.textContent?.includes('mallory'));
          return r !== undefined && !r.textContent!.includes(before);
        },
        first,
        { timeout: 20_000 },
      );
    });

    it('ends the connection with End, after a confirmation; the client is disconnected', async () => {
      const row = page
        .getByRole('table', { name: 'Connections' })
        .getByRole('row')
        .filter({ hasText: 'mallory' });
      await row.getByRole('button', { name: 'End' }).click();
      const dialog = page.getByRole('dialog', { name: 'End connection' });
      await dialog.waitFor();
      expect(await dialog.textContent()).to.include("End mallory's SFTP connection from 127.0.0.1?");
      await saveScreen(page, 'confirm', 'admin-connections-');
      await dialog.getByRole('button', { name: 'End connection' }).click();
      expect(await page.getByRole('status').textContent()).to.equal(
        "Ended mallory's SFTP connection from 127.0.0.1. It closes within a few seconds.",
      );
      await sftpClosed(sftp!);
      expect(sftp!.stderr()).to.include('Your connection was ended by an administrator');
      // B drops the row at its next renewal; the page's refresh shows it gone.
      await row.waitFor({ state: 'detached', timeout: 20_000 });
      await page.getByText('Nobody is connected.').waitFor();
    });
  },
);
