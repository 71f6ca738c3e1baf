import { existsSync } from 'node:fs';
import type { Browser, Page } from 'playwright-core';

const CHROMIUM = '/usr/bin/chromium';

/**
 * Debian's chromium, headless, driven by playwright-core. `chromiumMissing` answers why it cannot be
 * had, or `null` when it is there; the caller prints the reason as its tests' skip reason. `.ci/run`
 * installs it; a test never does. `launchChromium` then starts it: a chromium that is there but
 * does not start is a failure.
 */
export async function chromiumMissing(): Promise<string | null> {
  if (!existsSync(CHROMIUM)) return `${CHROMIUM} is missing (install it: apt-get install -y chromium; .ci/run does)`;
  try {
    await import('playwright-core');
  } catch (error) {
    return `playwright-core cannot be loaded (${(error as Error).message}); run npm ci`;
  }
  return null;
}
export async function launchChromium(): Promise<Browser> {
  const { chromium } = await import('playwright-core');
  return chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox'] });
}

/**
 * A fresh tab of its own (its own sessionStorage), on the portal page at `pageUrl`, signed in with
 * `key`, at `width` px. It notes every script error and every console error but the browser's own
 * "Failed to load resource" (which the tests cause on purpose): a CSP or Trusted Types violation is a
 * fault, read with `problemsOf`.
 */
export async function signedInPage(
  browser: Browser,
  pageUrl: string,
  key: string,
  {
    width = 1100,
    locale = 'en-US',
    timezoneId = 'Europe/Berlin',
  }: { width?: number; locale?: string; timezoneId?: string } = {},
): Promise<Page> {
  const context = await browser.newContext({ viewport: { width, height: 900 }, locale, timezoneId });
  const page = await context.newPage();
  const problems: string[] = [];
  page.on('pageerror', (error) => problems.push(error.message));
  page.on('console', (message) => {
    if (message.type() === 'error' && !message.text().startsWith('Failed to load resource'))
      problems.push(message.text());
  });
  (page as Page & { problems?: string[] }).problems = problems;
  await page.goto(pageUrl);
  await page.getByLabel('API key').fill(key);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('heading', { level: 1, name: 'Webhooks' }).waitFor();
  return page;
}

/** The script errors and CSP violations `signedInPage` noted. */
export const problemsOf = (page: Page): string[] => (page as Page & { problems?: string[] }).problems ?? [];

/**
 * Waits until `check` holds, asking from here every 25 ms. The pages' CSP forbids `unsafe-eval`,
 * which waitForFunction's polling needs: it passes when the first look already holds, and fails under
 * load when it does not.
 */
export async function until(check: () => Promise<boolean>, what: string, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}
