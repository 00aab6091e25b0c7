/**
 * Debian's chromium (package chromium) driven by playwright-core, for the web interface's tests and
 * bench. The flags keep it off the network this machine does not have (without them it opens
 * connections that are refused, many at a time); Playwright gives every launch a fresh profile.
 */
import { chromium, type Browser } from 'playwright-core';

export const CHROMIUM = '/usr/bin/chromium';

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
