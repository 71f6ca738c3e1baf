import { mkdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Browser, Page, Request } from 'playwright-core';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { memoryStorage } from '../../adapters/memory/index.js';
import type { Storage } from '../../src/index.js';
import type { EventRecord, WebhookRecord } from '../../src/records.js';
import { newId } from '../../src/shared/ids.js';
import { chromiumMissing, launchChromium, problemsOf, signedInPage, until } from '../helpers/chromium.js';
import { KEY_A, json, startPortal, type TestPortal } from '../helpers/server.js';
import { skipping } from '../helpers/skip.js';

/**
 * The portal page as a window on delivery, in Chromium: an account whose webhook has 100,000
 * deliveries over the last week, searched, charted, left open, and every screen checked by axe-core
 * at 1280 and 360 px wide.
 */

const OUTPUT = fileURLToPath(new URL('../../../test-output/portal-page/', import.meta.url));
const missing = await chromiumMissing();
const it = missing === null ? test : skipping(test, missing);
const AXE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

const DELIVERIES = 100_000;
const WEEK_MS = 7 * 24 * 3600_000;

let browser: Browser;
let app: TestPortal;
let storage: Storage;
let webhook: WebhookRecord;
/** The event whose one delivery failed, the one the search looks for. */
let failedEvent: string;

const atom = (ms: number) => new Date(ms).toISOString().replace(/\.\d+Z$/, '+00:00');

/**
 * 100,000 deliveries to one webhook, made over the last week (a little under, so the 7-day chart
 * holds them all), each attempted once near its making: every tenth answered 500 (failed for good),
 * the rest 200, in 40 to 900 ms. Written through the store, as the worker would have.
 */
async function seed(): Promise<void> {
  const now = Date.now();
  const first = now - WEEK_MS + 3 * 3600_000;
  const step = (now - 60_000 - first) / DELIVERIES;
  webhook = {
    id: newId('wbh'),
    accountId: 'acct_a',
    type: 'customer-created',
    url: 'https://receiver.example/hooks',
    secret: 'whsec_' + Buffer.alloc(24, 7).toString('base64'),
    createdAt: atom(first - 60_000),
  };
  await storage.insertWebhook(webhook);
  const BATCH = 2_000;
  for (let start = 0; start < DELIVERIES; start += BATCH) {
    const events: EventRecord[] = [];
    for (let i = start; i < start + BATCH; i++) {
      events.push({
        id: newId('evt'),
        accountId: 'acct_a',
        type: 'customer-created',
        createdAt: atom(first + i * step),
        data: { customer: { id: `cus_${i}` } },
      });
    }
    const made = await storage.publishEvents(events);
    const claimed = await storage.claimDeliveries({
      now: atom(now),
      leaseUntil: atom(now + 3600_000),
      limit: BATCH,
      owner: 'seeder',
    });
    assert.is(claimed.length, made.length);
    await Promise.all(
      claimed.map(({ delivery }, k) => {
        const i = start + k;
        const failed = i % 10 === 0;
        const at = atom(Date.parse(delivery.createdAt) + 1000);
        return storage.recordAttempt({
          id: delivery.id,
          owner: 'seeder',
          attempt: { at, statusCode: failed ? 500 : 200, error: null, durationMs: 40 + ((i * 37) % 860) },
          outcome: { status: failed ? 'failed' : 'succeeded', nextAttemptAt: null },
        });
      }),
    );
    if (start === 50_000) failedEvent = events[0]!.id;
  }
}

test.before(async () => {
  if (missing !== null) return;
  mkdirSync(OUTPUT, { recursive: true });
  browser = await launchChromium();
  storage = memoryStorage();
  app = await startPortal({ storage, ui: { path: '/portal' }, webhooks: { worker: false } });
  await seed();
});

test.after(async () => {
  await browser?.close();
  await app?.close();
});

const signedIn = (width: number): Promise<Page> =>
  signedInPage(browser, `${app.url}/portal/`, KEY_A, { width, timezoneId: 'UTC' });

const count = (page: Page, selector: string) => page.locator(selector).count();

/**
 * axe-core's serious and critical findings on the page as it stands (WCAG 2.1 A and AA rules). It
 * runs through the DevTools protocol, outside the page's CSP, in a context of its own that the page
 * never sees.
 */
async function accessibilityProblems(page: Page): Promise<string[]> {
  if (!(await page.evaluate('typeof window.axe === "object"'))) await page.evaluate(AXE);
  const found =
    (await page.evaluate(`axe.run(document, { runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa'] } })
    .then((result) => result.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical')
      .map((v) => v.id + ': ' + v.help + ' (' + v.nodes.slice(0, 3).map((n) => n.target.join(' ')).join('; ') + ')'))`)) as string[];
  return found;
}

it('the key field is not a password a browser offers to save, and says where the key comes from', async () => {
  const page = await browser.newPage();
  await page.goto(`${app.url}/portal/`);
  const key = page.getByLabel('API key');
  assert.equal(
    [
      await key.getAttribute('type'),
      await key.getAttribute('autocomplete'),
      await key.getAttribute('aria-describedby'),
    ],
    ['text', 'off', 'api-key-help'],
  );
  assert.match((await page.locator('#api-key-help').textContent()) ?? '', 'whoever runs the service gave it to you');
  assert.equal(await accessibilityProblems(page), []);
  await page.context().close();
});

it('deep links that do not hold: a malformed escape, an id of the wrong shape, an unknown id show "not found"', async () => {
  const page = await signedIn(1280);
  // The webhooks screen signed into may still be reading its webhooks' health: what each link asks
  // for is told apart by the id it names.
  const asked: string[] = [];
  page.on('request', (request) => {
    if (request.url().includes('/v1/'))
      asked.push(decodeURIComponent(new URL(request.url()).pathname + new URL(request.url()).search));
  });
  for (const [hash, asks] of [
    ['#/webhooks/%E0%A4%A', false],
    ['#/webhooks/not-a-webhook-id', false],
    ['#/webhooks/wbh_1/extra', false],
    ['#/files/fsd_ok/..%2F..', false],
    ['#/webhooks/wbh_NoSuchWebhook123', true],
    ['#/files/fsd_NoSuchDirectory123', true],
  ] as const) {
    asked.length = 0;
    await page.goto(`${app.url}/portal/${hash}`);
    await page.getByRole('heading', { level: 1, name: 'Not found' }).waitFor();
    assert.match((await page.locator('.not-found').textContent()) ?? '', /This link may be mistyped/);
    const named = hash
      .split('/')
      .slice(2)
      .map((part) => {
        try {
          return decodeURIComponent(part);
        } catch {
          return part;
        }
      });
    const about = asked.filter((request) => named.some((part) => request.includes(part)));
    if (!asks) assert.equal(about, [], `${hash}: nothing is asked of the API for an id of the wrong shape`);
    else assert.ok(about.length > 0, `${hash}: the id of the right shape is asked for`);
  }
  await page.screenshot({ path: path.join(OUTPUT, '20-not-found.png') });
  assert.equal(await accessibilityProblems(page), []);
  assert.equal(problemsOf(page), []);
  await page.context().close();
});

it('100,000 deliveries: the webhook screen from a few small answers, the failed delivery of one event found, the charts as the API counts', async () => {
  const page = await signedIn(1280);
  // What the screen asks for, whatever the log's length: its time is printed, not asserted (a busy
  // machine decides it); what is asserted is what makes it quick.
  const asked: { url: string; bytes: number }[] = [];
  // Only what this screen asks: the list shown at sign-in has drawn its cards (its requests are
  // done), and a request still in flight from before (the branding) is not counted when it ends.
  await page.locator('ul.cards > li').first().waitFor();
  const ours = new Set<Request>();
  page.on('request', (request) => ours.add(request));
  page.on('requestfinished', async (request) => {
    if (!ours.has(request)) return;
    const sizes = await request.sizes();
    asked.push({ url: request.url(), bytes: sizes.responseBodySize + sizes.responseHeadersSize });
  });
  const started = Date.now();
  await page.goto(`${app.url}/portal/#/webhooks/${webhook.id}`);
  await page.locator('.delivery').first().waitFor();
  await page.locator('#calls-chart').waitFor();
  const loadMs = Date.now() - started;
  const bytes = asked.reduce((sum, one) => sum + one.bytes, 0);
  console.log(
    `portal page: the webhook screen of ${DELIVERIES} deliveries, its log and charts drawn in ${loadMs} ms from ${asked.length} requests, ${(bytes / 1024).toFixed(1)} KiB`,
  );
  assert.ok(asked.length <= 6, `a few requests: ${asked.map((one) => one.url).join(', ')}`);
  assert.ok(bytes < 200 * 1024, `${bytes} bytes: one page of the log and the hours' counts, not the log`);
  assert.ok(
    asked.some((one) => /\/deliveries\?(.*&)?limit=50\b/.test(one.url)),
    'the log asked for one page of 50',
  );
  assert.is(await page.locator('.delivery').count(), 50, 'one page of 50');

  // The charts: the totals shown are the API's, and the 7-day one holds every call.
  const shown = async () =>
    Object.fromEntries(
      await page
        .locator('.charts dl > div')
        .evaluateAll((rows) =>
          rows.map((row) => [row.querySelector('dt')!.textContent, row.querySelector('dd')!.textContent]),
        ),
    ) as Record<string, string>;
  const day = await json(await app.api(`/webhooks/${webhook.id}/stats?window=24h`));
  const formatted = (n: number) => new Intl.NumberFormat('en-US').format(n);
  assert.equal(
    [(await shown()).Calls, (await shown()).Succeeded, (await shown()).Failed],
    [
      formatted(day.totals.succeeded + day.totals.failed + day.totals.errors),
      formatted(day.totals.succeeded),
      formatted(day.totals.failed),
    ],
  );
  assert.is(await page.locator('#calls-chart .bar').count(), 24);
  await page.getByRole('button', { name: 'Last 7 days' }).click();
  await until(async () => (await count(page, '#calls-chart .bar')) === 28, 'the 7-day chart');
  const week = await json(await app.api(`/webhooks/${webhook.id}/stats?window=7d`));
  assert.is(week.totals.succeeded + week.totals.failed, DELIVERIES, 'the week holds every call');
  assert.is((await shown()).Calls, formatted(DELIVERIES));
  assert.is((await shown()).Failed, formatted(DELIVERIES / 10));
  const barCalls = await page
    .locator('#calls-chart .bar')
    .evaluateAll((bars) => bars.reduce((sum, bar) => sum + Number(bar.getAttribute('data-calls')), 0));
  assert.is(barCalls, DELIVERIES, 'the bars add up to the total');
  await page.screenshot({ path: path.join(OUTPUT, '21-webhook-charts.png'), fullPage: false });

  // The search: the failed deliveries of one event.
  await page.getByLabel('Status').selectOption('failed');
  await page.getByLabel('Event id').fill(failedEvent);
  await page.getByRole('button', { name: 'Search' }).click();
  await until(async () => (await count(page, '.delivery')) === 1, 'the one delivery found');
  assert.is(await page.locator('.delivery code').first().textContent(), failedEvent);
  assert.is(await page.locator('.delivery').getAttribute('data-status'), 'failed');
  // A malformed event id is refused in the page, before any request.
  await page.getByLabel('Event id').fill('not-an-event');
  await page.getByRole('button', { name: 'Search' }).click();
  await page.getByText('An event id looks like evt_').waitFor();
  await page.getByRole('button', { name: 'Clear' }).click();
  await until(async () => (await count(page, '.delivery')) === 50, 'the first page again');
  assert.equal(await accessibilityProblems(page), []);
  assert.equal(problemsOf(page), []);
  await page.context().close();
});

it('100,000 deliveries: the screen left open for 30 s transfers under 1 MB', async () => {
  const page = await signedIn(1280);
  // The screen's 30 s on the page's own clock, a second at a time, each second's requests let finish:
  // its timers fire as they would in real time, without the wait.
  await page.clock.install();
  await page.goto(`${app.url}/portal/#/webhooks/${webhook.id}`);
  await page.locator('.delivery').first().waitFor();
  await page.locator('#calls-chart').waitFor();
  let bytes = 0;
  let requests = 0;
  let inFlight = 0;
  page.on('request', () => void inFlight++);
  page.on('requestfailed', () => void inFlight--);
  page.on('requestfinished', async (request) => {
    const sizes = await request.sizes();
    bytes += sizes.responseBodySize + sizes.responseHeadersSize;
    requests++;
    inFlight--;
  });
  for (let second = 0; second < 30; second++) {
    await page.clock.runFor(1000);
    await until(async () => inFlight === 0, `the requests of second ${second + 1}`);
  }
  console.log(
    `portal page, 30 s open on a log of ${DELIVERIES} deliveries: ${requests} requests, ${(bytes / 1024).toFixed(1)} KiB`,
  );
  assert.ok(requests >= 10, `it kept refreshing (${requests} requests)`);
  assert.ok(bytes < 1024 * 1024, `${bytes} bytes in 30 s`);
  await page.context().close();
});

it('every screen at 1280 and 360 px: no serious accessibility finding, no sideways scroll at 360; screenshots kept', async () => {
  const directory = await app.portal.files.createDirectory('acct_a', { name: 'Reports' });
  await app.portal.files.put('acct_a', {
    name: 'summary.txt',
    mime: 'text/plain',
    directoryId: directory.id,
    body: 'a summary',
  });
  for (const width of [1280, 360]) {
    const page = await signedIn(width);
    for (const [name, hash, ready] of [
      ['webhooks', '#/webhooks', '.card'],
      ['webhook', `#/webhooks/${webhook.id}`, '#calls-chart'],
      ['event-types', '#/event-types', 'h2'],
      ['agreements', '#/agreements', '.cards .empty, .cards .card'],
      ['files', '#/files', 'table.tree tbody tr'],
      ['directory', `#/files/${directory.id}`, 'table.tree tbody tr'],
    ] as const) {
      await page.goto(`${app.url}/portal/${hash}`);
      await page.locator(ready).first().waitFor();
      await page.screenshot({ path: path.join(OUTPUT, `22-${name}-${width}px.png`), fullPage: false });
      assert.equal(await accessibilityProblems(page), [], `${name} at ${width} px`);
      if (width === 360)
        assert.ok(await page.evaluate('document.documentElement.scrollWidth <= 360'), `${name} fits 360 px`);
    }
    assert.equal(problemsOf(page), []);
    await page.context().close();
  }
});

test.run();
