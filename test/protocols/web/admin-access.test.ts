/**
 * The Groups and Permissions admin pages in a real browser (issue 15): a site admin makes a group,
 * adds a user, grants the group a level on a folder and reads the user's effective rights on a
 * subfolder through the group, and the REST API then really grants exactly that; a Folder Admin
 * sees their folder's permissions only and is refused elsewhere in words; a plain user gets no
 * admin pages. Screenshots under .tmp/web-screens/admin-access-*.png.
 *
 * SQLite only: the core and REST rules underneath run on both databases in
 * test/unit/core/access.test.ts and test/protocols/rest/access.test.ts.
 */
import type { ChildProcess } from 'node:child_process';
import { expect } from 'chai';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { buildPage, launchChromium, saveScreen, signInAs } from '../../helpers/chromium.ts';
import { api, startGateway, stopChild, type GatewayInfo } from '../../bench/lib.ts';
import { dbKind } from '../../helpers/gateway.ts';

const PASSWORD = 'correct-horse-9';

(dbKind === 'sqlite' ? describe : describe.skip)(
  'web admin: groups and permissions in chromium',
  function () {
    this.timeout(120_000);
    let child: ChildProcess;
    let gw: GatewayInfo;
    let browser: Browser;
    let base: string;
    const contexts: BrowserContext[] = [];
    let gina: { id: number };

    const user = (username: string, extra: Record<string, unknown> = {}) =>
      api<{ id: number }>(gw, 'POST', '/users', { username, password: PASSWORD, ...extra });

    before(async function () {
      this.timeout(300_000);
      buildPage();
      ({ child, info: gw } = await startGateway([]));
      base = `https://127.0.0.1:${gw.port}`;
      for (const f of ['projects', 'projects/apollo', 'projects/apollo/specs', 'projects/zeus', 'hr'])
        await api(gw, 'POST', `/folders/${f}`);
      await user('root', { site_admin: true, name: 'Site Admin' });
      gina = await user('gina', { name: 'Gina Member' });
      const fay = await user('fay', { name: 'Fay Folder-Admin' });
      await user('paul', { name: 'Paul Plain' });
      await api(gw, 'POST', '/permissions', {
        path: 'projects/apollo',
        permission: 'admin',
        user_id: fay.id,
      });
      await api(gw, 'POST', '/permissions', { path: 'projects/zeus', permission: 'admin', username: 'fay' });
      await api(gw, 'POST', '/permissions', { path: 'hr', permission: 'full', username: 'paul' });
      browser = await launchChromium();
    });

    after(async () => {
      await browser?.close();
      if (child) await stopChild(child);
    });

    afterEach(async function () {
      await saveScreen(contexts.at(-1)?.pages()[0], this.currentTest?.title, 'admin-access-');
      for (const c of contexts.splice(0)) await c.close();
    });

    async function signIn(username: string): Promise<Page> {
      const context = await browser.newContext({
        ignoreHTTPSErrors: true,
        viewport: { width: 1100, height: 800 },
      });
      contexts.push(context);
      const page = await context.newPage();
      await page.goto(`${base}/`);
      await signInAs(page, username, PASSWORD);
      return page;
    }

    const adminNav = (page: Page) => page.getByRole('navigation', { name: 'Administration' });
    /** said waits for a status line (role=status) reading exactly `text`. */
    const said = (page: Page, text: string) =>
      page
        .getByRole('status')
        .filter({ hasText: new RegExp(`^${text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}$`) })
        .waitFor();

    it('a site admin makes a group, adds a member, grants it read-only and reads the rights through it', async () => {
      const page = await signIn('root');
      await adminNav(page).getByRole('button', { name: 'Groups' }).click();
      await page.getByRole('heading', { name: 'Groups' }).waitFor();
      await page.getByRole('button', { name: 'New group' }).click();
      const dialog = page.getByRole('dialog', { name: 'New group' });
      await dialog.getByLabel('Name', { exact: true }).fill('Readers');
      await dialog.getByLabel('Notes').fill('Read the projects');
      await dialog.getByRole('button', { name: 'Save' }).click();
      await said(page, 'Group Readers created.');
      const groups = page.getByRole('table', { name: 'Groups' });
      await groups.getByRole('row').filter({ hasText: 'Readers' }).waitFor();

      // A name taken is refused in the dialog, in words.
      await page.getByRole('button', { name: 'New group' }).click();
      await dialog.getByLabel('Name', { exact: true }).fill('Readers');
      await dialog.getByRole('button', { name: 'Save' }).click();
      expect(await dialog.getByRole('alert').textContent()).to.match(/name has already been taken/i);
      await dialog.getByRole('button', { name: 'Cancel' }).click();

      await page.getByRole('button', { name: 'Members of Readers' }).click();
      const members = page.getByRole('region', { name: 'Members of Readers' });
      await members.getByLabel('Username').fill('nobody-here');
      await members.getByRole('button', { name: 'Add member' }).click();
      expect(await members.getByRole('alert').textContent()).to.match(/does not name an existing user/);
      await members.getByLabel('Username').fill('GINA');
      await members.getByRole('button', { name: 'Add member' }).click();
      expect(await members.getByRole('status').textContent()).to.equal('gina added to Readers.');
      const memberRows = page.getByRole('table', { name: 'Members of Readers' }).getByRole('row');
      await memberRows.filter({ hasText: 'Gina Member' }).waitFor();
      // The group's member count follows.
      await groups
        .getByRole('row')
        .filter({ hasText: 'Readers' })
        .getByRole('cell', { name: '1', exact: true })
        .waitFor();

      await saveScreen(page, 'groups members', 'admin-access-');

      // Permissions: grant the group read-only on projects, pick the subfolder, read gina's rights.
      await adminNav(page).getByRole('button', { name: 'Permissions' }).click();
      await page.getByLabel('Folder', { exact: true }).fill('/projects/');
      await page.getByRole('button', { name: 'Show' }).click();
      await page.getByRole('heading', { name: 'Who has access to /projects' }).waitFor();
      await page.getByLabel('Grant to').selectOption('group');
      await page.getByLabel('Group name').fill('Readers');
      await page.getByLabel('Level').selectOption('readonly');
      await page.getByRole('button', { name: 'Grant' }).click();
      await said(page, 'Read only granted to group Readers on /projects.');
      const applying = page.getByRole('table', { name: 'Permissions that apply to /projects' });
      await applying.getByRole('row').filter({ hasText: 'group Readers' }).waitFor();

      await page.getByRole('button', { name: 'Choose folder…' }).click();
      const picker = page.getByRole('dialog', { name: 'Choose a folder' });
      await picker.getByRole('button', { name: 'apollo' }).click();
      await picker.getByText('/projects/apollo').waitFor();
      await picker.getByRole('button', { name: 'Choose this folder' }).click();
      const onApollo = page.getByRole('table', { name: 'Permissions that apply to /projects/apollo' });
      const inherited = onApollo.getByRole('row').filter({ hasText: 'group Readers' });
      expect(await inherited.getByRole('cell').nth(2).textContent()).to.equal('/projects (inherited)');
      expect(
        await onApollo.getByRole('row').filter({ hasText: 'fay' }).getByRole('cell').nth(1).textContent(),
      ).to.equal('Folder Admin');

      await page.getByLabel('User to check').fill('gina');
      await page.getByRole('button', { name: 'Check rights' }).click();
      const rights = page.getByRole('table', { name: 'Rights of gina in /projects/apollo' });
      await rights.waitFor();
      const cells = async (name: string) =>
        rights.getByRole('row').filter({ hasText: name }).getByRole('cell').allTextContents();
      expect(await cells('Download')).to.deep.equal([
        'Download',
        'Yes',
        'Read only on /projects through group Readers',
      ]);
      expect(await cells('Upload')).to.deep.equal([
        'Upload and create folders',
        'No',
        'no permission gives this',
      ]);
      expect(await cells('Administer')).to.deep.equal([
        'Administer (Folder Admin)',
        'No',
        'no permission gives this',
      ]);

      // What the page said is what gina can do: list and download there, not write.
      const key = (await api<{ key: string }>(gw, 'POST', '/api_keys', { user_id: gina.id })).key;
      const asGina = { ...gw, key };
      await api(asGina, 'GET', '/folders/projects/apollo/specs');
      const write = await api(asGina, 'POST', '/folders/projects/apollo/new').then(
        () => 'allowed',
        (err: Error) => err.message,
      );
      expect(write).to.match(/403 .*write-permission-required/);
      await saveScreen(page, 'site admin rights', 'admin-access-');
    });

    it('a site admin edits and deletes a group after confirming', async () => {
      const page = await signIn('root');
      const paul = (await api<{ id: number; username: string }[]>(gw, 'GET', '/users')).find(
        (u) => u.username === 'paul',
      )!;
      await api(gw, 'POST', '/groups', { name: 'Temporary', notes: 'to go', user_ids: String(paul.id) });
      await adminNav(page).getByRole('button', { name: 'Groups' }).click();
      await page.getByRole('button', { name: 'Members of Temporary' }).click();
      await page.getByRole('button', { name: 'Remove paul from Temporary' }).click();
      await said(page, 'paul removed from Temporary.');
      await page.getByText('No members yet.').waitFor();
      await page.getByRole('button', { name: 'Edit Temporary' }).click();
      const edit = page.getByRole('dialog', { name: 'Edit group Temporary' });
      await edit.getByLabel('Name', { exact: true }).fill('Short-lived');
      await edit.getByRole('button', { name: 'Save' }).click();
      await said(page, 'Group Short-lived saved.');
      await page.getByRole('button', { name: 'Delete Short-lived' }).click();
      const confirm = page.getByRole('dialog', { name: 'Delete group Short-lived' });
      await confirm.getByRole('button', { name: 'Delete' }).click();
      await said(page, 'Group Short-lived deleted.');
      await page.getByRole('button', { name: 'Delete Short-lived' }).waitFor({ state: 'detached' });
      const names = (await api<{ name: string }[]>(gw, 'GET', '/groups')).map((g) => g.name);
      expect(names).to.not.include('Short-lived');
    });

    it('a Folder Admin sees only their folder, changes it, and is refused outside in words', async () => {
      const page = await signIn('fay');
      const nav = adminNav(page);
      expect(await nav.getByRole('button').allTextContents()).to.deep.equal([
        'Permissions',
        'History',
        'Webhooks',
      ]);
      await nav.getByRole('button', { name: 'Permissions' }).click();
      await page.getByText('You are a Folder Admin of /projects/apollo, /projects/zeus.').waitFor();
      // Her folders are one click away; the first is shown.
      const folders = page.getByRole('navigation', { name: 'Your folders' });
      await folders.getByRole('button', { name: '/projects/zeus' }).click();
      await page.getByRole('heading', { name: 'Who has access to /projects/zeus' }).waitFor();
      await folders.getByRole('button', { name: '/projects/apollo' }).click();
      const table = page.getByRole('table', { name: 'Permissions that apply to /projects/apollo' });
      await table.getByRole('row').filter({ hasText: 'Folder Admin' }).filter({ hasText: 'fay' }).waitFor();
      // The group's row on /projects is above her folder: not listed, yet the rights check shows it.
      expect(await table.getByRole('row').filter({ hasText: 'group Readers' }).count()).to.equal(0);
      await page.getByLabel('User to check').fill('gina');
      await page.getByRole('button', { name: 'Check rights' }).click();
      const rights = page.getByRole('table', { name: 'Rights of gina in /projects/apollo' });
      await rights
        .getByRole('cell', { name: 'Read only on /projects through group Readers' })
        .first()
        .waitFor();

      await page.getByLabel('Username').fill('paul');
      await page.getByLabel('Level').selectOption('full');
      await page.getByRole('button', { name: 'Grant' }).click();
      await said(page, 'Full granted to paul on /projects/apollo.');
      await page.getByRole('button', { name: 'Revoke Full of paul on /projects/apollo' }).click();
      await page
        .getByRole('dialog', { name: 'Revoke permission' })
        .getByRole('button', { name: 'Revoke' })
        .click();
      await said(page, 'Full of paul on /projects/apollo revoked.');

      // Elsewhere: paul's row on /hr is not shown, and a grant or a rights check is refused in words.
      await page.getByLabel('Folder', { exact: true }).fill('hr');
      await page.getByRole('button', { name: 'Show' }).click();
      await page.getByText('/hr is outside the folders you administer').waitFor();
      await page.getByText('None of the permissions you may see applies to /hr.').waitFor();
      await page.getByLabel('Username').fill('gina');
      await page.getByRole('button', { name: 'Grant' }).click();
      const grant = page.getByRole('region', { name: 'Grant access to /hr' });
      expect(await grant.getByRole('alert').textContent()).to.equal(
        'You need admin permission on /hr to do this.',
      );
      await page.getByLabel('User to check').fill('paul');
      await page.getByRole('button', { name: 'Check rights' }).click();
      const check = page.getByRole('region', { name: 'What may a user do in /hr?' });
      expect(await check.getByRole('alert').textContent()).to.equal(
        'You need admin permission on /hr to do this.',
      );
      await saveScreen(page, 'folder admin refused', 'admin-access-');
      // The Groups page is not theirs: the address shows the file browser.
      await page.goto(`${base}/#groups`);
      await page.getByRole('button', { name: 'Sign out' }).waitFor();
      expect(await page.getByRole('heading', { name: 'Groups' }).count()).to.equal(0);
    });

    it('a plain user gets no Administration nav, and #users shows the file browser', async () => {
      const page = await signIn('paul');
      expect(await adminNav(page).count()).to.equal(0);
      await page.goto(`${base}/#users`);
      await page.getByRole('button', { name: 'Sign out' }).waitFor();
      await page.getByRole('navigation', { name: 'Breadcrumbs' }).waitFor();
      expect(await page.getByRole('heading', { name: 'Users' }).count()).to.equal(0);
      expect(await page.locator('main.admin').count()).to.equal(0);
      // The browser opens the user's home (here the site root, where paul may not list), never a
      // folder named after the page.
      await page.getByRole('alert').waitFor();
      expect(await page.getByRole('alert').textContent()).to.not.include('/users');
      expect(new URL(page.url()).hash).to.equal('');
    });
  },
);
