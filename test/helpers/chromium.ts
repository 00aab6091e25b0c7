/**
 * Debian's chromium (package chromium) driven by playwright-core, for the web interface's tests and
 * bench. The flags keep it off the network this machine does not have (without them it opens
 * connections that are refused, many at a time); Playwright gives every launch a fresh profile.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { webBuildIsFresh } from '../../bin/built.js';

export const CHROMIUM = '/usr/bin/chromium';

/** SCREENS is where the browser tests leave a screenshot of each test, to look at. */
export const SCREENS = path.resolve('.tmp/web-screens');

/**
 * buildPage makes the screenshots' folder and, unless dist/web is current, bundles the page as
 * `npm run compile` does (protocols/web/build.js), so a browser test sees the current sources.
 */
export function buildPage(): void {
  mkdirSync(SCREENS, { recursive: true });
  if (webBuildIsFresh()) return;
  const built = spawnSync(process.execPath, ['protocols/web/build.js'], { encoding: 'utf8' });
  if (built.status !== 0) throw new Error(`protocols/web/build.js failed: ${built.stderr}`);
}

/** saveScreen saves `page` (the whole page) as <prefix><the test's title>.png under SCREENS. */
export async function saveScreen(page: Page | null | undefined, title: string | undefined, prefix = '') {
  if (!page || page.isClosed()) return;
  mkdirSync(SCREENS, { recursive: true });
  const name = (title ?? 'test').replace(/[^a-z0-9]+/gi, '-').slice(0, 60);
  await page.screenshot({ path: path.join(SCREENS, `${prefix}${name}.png`), fullPage: true });
}

export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
}

/** watchCsp collects the page's Content Security Policy refusals from its console, as they come. */
export function watchCsp(page: Page): string[] {
  const refused: string[] = [];
  page.on('console', (m) => {
    if (m.type() === 'error' && /Content Security Policy|Refused to/i.test(m.text())) refused.push(m.text());
  });
  return refused;
}

/** signInAs fills the sign-in form on `page` (at the web interface's address) and waits until signed in. */
export async function signInAs(page: Page, username: string, password: string): Promise<void> {
  await page.getByLabel('Username').fill(username);
  await page.getByLabel('Password').fill(password);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('button', { name: 'Sign out' }).waitFor();
}

/** openAdminPage opens an admin page from the Administration nav and waits for its heading. */
export async function openAdminPage(page: Page, name: string): Promise<void> {
  await page.getByRole('navigation', { name: 'Administration' }).getByRole('button', { name }).click();
  await page.getByRole('heading', { name, level: 1 }).waitFor();
}
