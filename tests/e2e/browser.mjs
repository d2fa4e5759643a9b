// browser.mjs — headless Chromium for the end-to-end tests, through
// playwright-core driving Debian's /usr/bin/chromium (no browser download).
import { chromium } from 'playwright-core';
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT } from '../lib/server.mjs';

export const CHROMIUM = process.env.GPUCLOUD_CHROMIUM || '/usr/bin/chromium';
export const SHOTS = join(ROOT, 'var/test-logs');

export async function launch() {
  if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} not found: install Debian's chromium package (apt-get install chromium)`);
  return chromium.launch({
    executablePath: CHROMIUM,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--disable-background-networking',
      '--disable-component-update', '--disable-sync', '--no-first-run'],
  });
}

// Writes var/test-logs/e2e-<name>.png and returns the path.
export async function shot(page, name) {
  mkdirSync(SHOTS, { recursive: true });
  const path = join(SHOTS, `e2e-${name}.png`);
  await page.evaluate(() => window.scrollTo(0, 0));
  await page.screenshot({ path, fullPage: true });
  return path;
}
