/**
 * Debian's chromium (package chromium) driven by playwright-core, for the web interface's tests and
 * bench. The flags keep it off the network this machine does not have (without them it opens
 * connections that are refused, many at a time); Playwright gives every launch a fresh profile.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';

export const CHROMIUM = '/usr/bin/chromium';

/** SCREENS is where the browser tests leave a screenshot of each test, to look at. */
export const SCREENS = path.resolve('.tmp/web-screens');

/**
 * buildPage bundles the page as `npm run compile` does (protocols/web/build.js), so a browser test
 * sees the current sources, and makes the screenshots' folder.
 */
export function buildPage(): void {
  mkdirSync(SCREENS, { recursive: true });
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
