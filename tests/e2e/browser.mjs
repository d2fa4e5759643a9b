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

// A page of its own context (locale, a desktop viewport) whose uncaught
// errors and CSP violations are pushed onto errors.
export async function newPage(browser, errors, locale = 'en-US') {
  const context = await browser.newContext({ locale, viewport: { width: 1360, height: 900 } });
  const page = await context.newPage();
  page.setDefaultTimeout(15000);
  page.on('pageerror', (e) => errors.push(e.message));
  page.on('console', (m) => { if (/Content Security Policy/i.test(m.text())) errors.push(m.text()); });
  return page;
}

// Signs in through the form at base and waits for the shell.  Chromium
// drops the loads in flight with ERR_NETWORK_CHANGED when a network
// interface appears on this machine (containers make bridges): the page is
// loaded again, once.
export async function signIn(page, base, username, password) {
  await page.goto(`${base}/#/login`);
  await page.getByLabel('Username', { exact: true }).waitFor({ timeout: 10000 }).catch(() => page.reload());
  await page.getByLabel('Username', { exact: true }).fill(username);
  await page.getByLabel('Password', { exact: true }).fill(password);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.locator('[data-nav="home"]').waitFor();
}
