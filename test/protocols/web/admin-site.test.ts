/**
 * The Billing and Site admin pages in a real browser (Debian's chromium driven by playwright-core)
 * against a real gateway process with FTP and SFTP on free ports: the admin sees each listener with
 * the port it really bound and the problems to fix in words (the bootstrap admin's password from
 * SVC_ADMIN_PASSWORD is one); billing shows an imported invoice and payment, an invoice's line items,
 * and its printable document opens in a new tab with the amount. Screenshots under .tmp/web-screens/.
 *
 * SQLite only: what it checks is the page; GET /site runs on both databases in
 * test/protocols/rest/site.test.ts.
 */
import { execFile, type ChildProcess } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { expect } from 'chai';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { buildPage, launchChromium, saveScreen, signInAs } from '../../helpers/chromium.ts';
import { startGateway, stopChild, type GatewayInfo } from '../../bench/lib.ts';
import { dbKind } from '../../helpers/gateway.ts';

/** The bootstrap admin of test/helpers/gateway.ts (admin.username, admin.password). */
const ADMIN = { username: 'admin', password: 'admin-password' };

const BILLING = [
  {
    id: 301,
    type: 'invoice',
    amount: 1234.5,
    balance: 0,
    created_at: '2026-01-31T00:00:00Z',
    currency: 'USD',
    site_name: 'Example Files',
    invoice_line_items: [
      {
        amount: 1234.5,
        description: 'Gateway plan, January',
        type: 'subscription',
        plan: 'Business',
        service_start_at: '2026-01-01T00:00:00Z',
        service_end_at: '2026-01-31T00:00:00Z',
      },
    ],
  },
  {
    id: 302,
    type: 'payment',
    amount: 1234.5,
    balance: 0,
    created_at: '2026-02-03T00:00:00Z',
    currency: 'USD',
    method: 'card',
    site_name: 'Example Files',
    payment_line_items: [{ amount: 1234.5, invoice_id: 301 }],
  },
];

(dbKind === 'sqlite' ? describe : describe.skip)(
  'Billing and Site admin pages in chromium (SQLite only)',
  function () {
    this.timeout(60_000);
    let child: ChildProcess;
    let gw: GatewayInfo & { ports: Record<string, number> };
    let browser: Browser;
    let base: string;
    const contexts: BrowserContext[] = [];

    before(async function () {
      this.timeout(180_000);
      buildPage();
      const started = await startGateway(['--ports', 'ftp,sftp']);
      child = started.child;
      gw = started.info as typeof gw;
      base = `https://127.0.0.1:${gw.port}`;
      // Invoices and payments come in as an operator loads them: `svc-gateway billing import`.
      const file = path.join(gw.dataDir, 'billing.json');
      writeFileSync(file, JSON.stringify(BILLING));
      const out = await new Promise<string>((resolve, reject) =>
        execFile(
          process.execPath,
          ['--import', 'tsx', 'src/cli.ts', 'billing', 'import', file],
          { env: { ...process.env, SVC_DATA_DIR: gw.dataDir, SVC_DATABASE_URL: '', SVC_LOG_LEVEL: 'error' } },
          (err, stdout, stderr) => (err ? reject(new Error(stderr || String(err))) : resolve(stdout)),
        ),
      );
      expect(out).to.match(/2 created/);
      browser = await launchChromium();
    });

    after(async () => {
      await browser?.close();
      if (child) await stopChild(child);
    });

    afterEach(async function () {
      for (const [i, page] of (contexts.at(-1)?.pages() ?? []).entries())
        await saveScreen(page, this.currentTest?.title, i ? `admin-${i}-` : 'admin-');
      for (const c of contexts.splice(0)) await c.close();
    });

    /** signIn opens the page in a fresh context and signs the admin in. */
    async function signIn(): Promise<Page> {
      const context = await browser.newContext({
        ignoreHTTPSErrors: true,
        viewport: { width: 1100, height: 800 },
      });
      contexts.push(context);
      const page = await context.newPage();
      await page.goto(`${base}/`);
      await signInAs(page, ADMIN.username, ADMIN.password);
      return page;
    }

    it('the site page shows the real ports of the running gateway and the problems in words', async () => {
      const page = await signIn();
      await page
        .getByRole('navigation', { name: 'Administration' })
        .getByRole('button', { name: 'Site' })
        .click();
      await page.getByRole('heading', { name: 'Site', level: 1 }).waitFor();
      const listeners = page.getByRole('table', { name: 'Listeners' });
      await listeners.waitFor();
      for (const [name, label] of [
        ['https', 'HTTPS'],
        ['ftp', 'FTP'],
        ['sftp', 'SFTP'],
      ] as const) {
        const row = listeners
          .getByRole('row')
          .filter({ has: page.getByRole('rowheader', { name: label, exact: true }) });
        expect(await row.getByRole('cell').allInnerTexts(), name).to.include(String(gw.ports[name]));
        expect(await row.getByRole('cell').allInnerTexts(), name).to.include('On');
      }
      const webdav = listeners
        .getByRole('row')
        .filter({ has: page.getByRole('rowheader', { name: 'WebDAV' }) });
      expect(await webdav.getByRole('cell').allInnerTexts()).to.include('Off');
      const problems = page.getByRole('region', { name: 'Problems to fix' });
      expect(await problems.innerText()).to.match(
        /Should fix · admin password: the site admin admin still signs in with the password set by admin\.password \(SVC_ADMIN_PASSWORD\)/,
      );
      const running = await page.getByRole('region', { name: 'What is running' }).innerText();
      expect(running).to.match(/Database\s+SQLite/);
      expect(running).to.match(/Storage\s+Local disk/);
      expect(await page.getByRole('table', { name: 'Instances' }).innerText()).to.include('(this one)');
    });

    it('billing shows an invoice and a payment; the printable invoice opens with its amount', async () => {
      const page = await signIn();
      await page.goto(`${base}/#billing`);
      const invoices = page.getByRole('table', { name: 'Invoices' });
      const invoice = invoices.getByRole('row').filter({ hasText: '301' });
      await invoice.waitFor();
      const invoiceText = await invoice.innerText();
      expect(invoiceText).to.match(/USD\s1,234\.50/);
      expect(invoiceText).to.include('Jan 31, 2026');
      const payment = page
        .getByRole('table', { name: 'Payments' })
        .getByRole('row')
        .filter({ hasText: '302' });
      expect(await payment.innerText()).to.match(/302\s+Feb 3, 2026\s+USD\s1,234\.50\s+card/);

      await page.getByRole('button', { name: 'Invoice 301: line items' }).click();
      const dialog = page.getByRole('dialog', { name: 'Invoice 301' });
      const lines = dialog.getByRole('table', { name: 'Line items' });
      await lines.getByText('Gateway plan, January').waitFor();
      expect(await lines.innerText()).to.match(/Business\s+Jan 1, 2026 – Jan 31, 2026\s+USD\s1,234\.50/);
      await saveScreen(page, 'billing line items dialog', 'admin-');
      await dialog.getByRole('button', { name: 'Close' }).click();

      const [doc] = await Promise.all([
        page.context().waitForEvent('page'),
        invoices.getByRole('link', { name: 'Printable invoice 301' }).click(),
      ]);
      await doc.waitForLoadState();
      expect(new URL(doc.url()).pathname).to.match(/^\/billing\//);
      await doc.getByRole('heading', { name: 'Invoice 301' }).waitFor();
      const body = await doc.locator('body').innerText();
      expect(body).to.include('Total: 1234.50 USD');
      expect(body).to.include('Gateway plan, January');
    });
  },
);
