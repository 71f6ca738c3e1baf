import { createHash } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Browser, Page } from 'playwright-core';
import { PNG } from 'pngjs';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { memoryStorage } from '../../adapters/memory/index.js';
import type { Storage } from '../../src/index.js';
import { PNG_SIGNATURE, simplePdf, validFormData } from '../helpers/agreements.js';
import { chromiumMissing, launchChromium, problemsOf, signedInPage } from '../helpers/chromium.js';
import { startReceiver, type Receiver } from '../helpers/receiver.js';
import { KEY_A, KEY_B, json, startPortal, type TestPortal } from '../helpers/server.js';
import { recordingNotifier, until } from '../helpers/notifier.js';

const notifier = recordingNotifier();
import { skipping } from '../helpers/skip.js';

/** The customer portal page in a real browser: Debian's chromium, headless, driven by playwright-core. */

const OUTPUT = fileURLToPath(new URL('../../../test-output/portal-page/', import.meta.url));
const missing = await chromiumMissing();
/** Each browser test: skipped, with the reason printed, where chromium cannot be had. */
const it = missing === null ? test : skipping(test, missing);

let browser: Browser;
let app: TestPortal;
let receiver: Receiver;
/** The portal's records, read past it where the page shows nothing (a rotation's grace). */
let storage: Storage;

test.before(async () => {
  if (missing !== null) return;
  mkdirSync(OUTPUT, { recursive: true });
  console.log(`portal page screenshots: ${OUTPUT}`);
  browser = await launchChromium();
  receiver = await startReceiver();
  // An hour to the first retry: what the log shows after a failure is the retry scheduled, not made.
  storage = memoryStorage();
  app = await startPortal({
    storage,
    notifier,
    ui: { path: '/portal' },
    webhooks: { allowPrivateNetworks: true, retrySchedule: [3600] },
  });
});

test.after(async () => {
  await browser?.close();
  await app?.close();
  await receiver?.close();
});

/** A fresh browser tab (its own sessionStorage), signed in with account A's key. */
const signedIn = (width = 1100, locale = 'en-US'): Promise<Page> =>
  signedInPage(browser, `${app.url}/portal/`, KEY_A, { width, locale });

/** A screenshot of the whole page, or with `fullPage: false` of what the window shows (a long list's top). */
async function shoot(page: Page, name: string, fullPage = true): Promise<void> {
  await page.screenshot({ path: path.join(OUTPUT, `${name}.png`), fullPage });
}

const newWebhook = (url = `${receiver.url}/hooks`) =>
  app.portal.webhooks.create('acct_a', { type: 'customer-created', url });

it("a branded portal: the company's logo, name and colour in the top bar, once signed in; a session's link too", async () => {
  const logo = `data:image/png;base64,${PNG.sync
    .write(Object.assign(new PNG({ width: 2, height: 2 }), { data: Buffer.alloc(16, 200) }))
    .toString('base64')}`;
  const branded = await startPortal({
    ui: { path: '/portal' },
    branding: { name: 'Maison Dupont', logoUrl: logo, accentColor: '#aa3300' },
  });
  try {
    const page = await signedInPage(browser, `${branded.url}/portal/`, KEY_A, { width: 1100, locale: 'en-US' });
    await page.locator('header.top.branded .brand', { hasText: 'Maison Dupont' }).waitFor();
    assert.is(await page.locator('header.top img.logo').getAttribute('src'), logo);
    assert.is(
      await page.evaluate("getComputedStyle(document.documentElement).getPropertyValue('--accent').trim()"),
      '#aa3300',
    );
    await page.context().close();
    const session = await branded.portal.sessions.create('acct_a', { scopes: ['files'], readOnly: true });
    const tab = await browser.newPage({ viewport: { width: 360, height: 700 } });
    await tab.goto(`${branded.url}${session.url}`);
    await tab.locator('header.top.branded .brand', { hasText: 'Maison Dupont' }).waitFor();
    await tab.close();
  } finally {
    await branded.close();
  }
});

it('sign in: a wrong key shows the API message, the right key opens the webhooks, sign out forgets it', async () => {
  const page = await browser.newPage({ viewport: { width: 1100, height: 700 } });
  await page.goto(`${app.url}/portal`);
  assert.match(page.url(), /\/portal\/$/);
  await page.getByLabel('API key').fill('not-a-key-of-this-portal');
  await page.keyboard.press('Enter');
  await page.getByRole('alert').getByText('The API key is not valid.').waitFor();
  await shoot(page, '1-sign-in');
  await page.getByLabel('API key').fill(KEY_A);
  await page.keyboard.press('Enter');
  await page.getByRole('heading', { level: 1, name: 'Webhooks' }).waitFor();
  assert.is(await page.evaluate('sessionStorage.length'), 1);
  await page.getByRole('button', { name: 'Sign out' }).click();
  await page.getByRole('button', { name: 'Sign in' }).waitFor();
  assert.is(await page.evaluate('sessionStorage.length'), 0);
  assert.equal(problemsOf(page), []);
  await page.close();
});

it('a portal session link: no sign-in, only its sections, the token gone from the address bar and storage, at 1280 and 360 px; revoked, it asks for a new link', async () => {
  const made = await app.portal.sessions.create('acct_a', { scopes: ['agreements', 'files'], readOnly: true });
  const link = new URL(made.url!, app.url).href;
  // One file in the account, one in another: the session shows its own only.
  const own = await app.portal.files.put('acct_a', { name: 'ours.txt', mime: 'text/plain', body: Buffer.from('a') });
  const other = await app.portal.files.put('acct_b', {
    name: 'theirs.txt',
    mime: 'text/plain',
    body: Buffer.from('b'),
  });
  for (const width of [1280, 360]) {
    const page = await browser.newPage({ viewport: { width, height: 700 } });
    await page.goto(link);
    await page.getByRole('heading', { level: 1, name: 'Agreements' }).waitFor();
    assert.not.ok(page.url().includes(made.token), 'the token left the address bar');
    assert.match(page.url(), /#\/agreements$/);
    const nav = page.getByRole('navigation', { name: 'Sections' });
    assert.equal(await nav.getByRole('link').allTextContents(), ['Agreements', 'Files']);
    assert.is(await page.evaluate('sessionStorage.length + localStorage.length'), 0, 'nothing kept in storage');
    await nav.getByRole('link', { name: 'Files' }).click();
    await page.getByRole('heading', { level: 1, name: 'Files' }).waitFor();
    await page.getByText('ours.txt').waitFor();
    await page.getByText('1 byte', { exact: true }).waitFor();
    assert.is(await page.getByText('theirs.txt').count(), 0, "another account's file is not shown");
    await shoot(page, `session-link-${width}`);
    assert.equal(problemsOf(page), []);
    await page.close();
  }
  const page = await browser.newPage({ viewport: { width: 1280, height: 700 } });
  await page.goto(link);
  await page.getByRole('heading', { level: 1, name: 'Agreements' }).waitFor();
  await app.portal.sessions.revoke('acct_a', made.id);
  await page.getByRole('navigation', { name: 'Sections' }).getByRole('link', { name: 'Files' }).click();
  await page.getByText('This link has expired or was revoked: ask for a new one.').waitFor();
  await page.getByRole('button', { name: 'Sign in' }).waitFor();
  await page.close();
  await app.portal.files.delete('acct_a', own.id);
  await app.portal.files.delete('acct_b', other.id);
});

it("a read-only session link: no control that changes anything on any screen, where a full session's link shows them", async () => {
  // Account B's: the other tests count account A's agreements.
  const webhook = await app.portal.webhooks.create('acct_b', { type: 'customer-created', url: `${receiver.url}/b` });
  await app.portal.webhooks.sendTest('acct_b', webhook.id);
  const form = validFormData();
  form.set('name', 'Read-only check');
  const asB = { authorization: `Bearer ${KEY_B}` };
  const agreement = await json(await app.api('/agreements', { method: 'POST', body: form, headers: asB }));
  const signer = `${agreement.signers[0].firstName} ${agreement.signers[0].lastName}`;
  /** Every control that sends anything but a GET, or opens a form that does, by accessible name. */
  const writes = [
    'Create webhook',
    'Send test call',
    'Disable',
    'Rotate secret',
    'Delete webhook',
    'Try on recent events',
    'Save filter',
    'Recover',
    'Redeliver',
    'Verify',
    'Void this agreement',
    'Void agreement',
    `Delete ${agreement.name}`,
    `Copy a signing link for ${signer}`,
    'Link options',
    `Correct ${signer}`,
    'Save correction',
  ];
  // Each screen, and what shows it has loaded (the webhook's actions are drawn with its heading).
  const screens: [hash: string, ready: (page: Page) => Promise<void>][] = [
    ['#/webhooks', (page) => page.locator(`a[href="#/webhooks/${webhook.id}"]`).waitFor()],
    [
      `#/webhooks/${webhook.id}`,
      async (page) => {
        await page.getByRole('heading', { level: 1, name: webhook.url }).waitFor();
        await page.locator('.delivery').first().waitFor();
      },
    ],
    ['#/agreements', (page) => page.locator(`.agreement[data-id="${agreement.id}"]`).waitFor()],
    ['#/files', (page) => page.getByRole('heading', { level: 1, name: 'Files' }).waitFor()],
  ];
  /** The buttons and disclosures each screen holds, hidden ones (in a closed `<details>`) too. */
  async function controlsOf(readOnly: boolean): Promise<{ names: string[]; page: Page }> {
    const made = await app.portal.sessions.create('acct_b', { readOnly });
    const page = await browser.newPage({ viewport: { width: 1280, height: 700 } });
    await page.goto(new URL(made.url!, app.url).href);
    const names: string[] = [];
    for (const [hash, ready] of screens) {
      // The token lives in the page's memory: a hash change, not a load, moves between screens.
      await page.evaluate(`location.hash = ${JSON.stringify(hash)}`);
      await ready(page);
      names.push(
        ...(await page
          .locator('main button, main summary')
          .evaluateAll((nodes) => nodes.map((node) => node.getAttribute('aria-label') ?? node.textContent ?? ''))),
      );
    }
    return { names, page };
  }

  const full = await controlsOf(false);
  for (const name of writes) assert.ok(full.names.includes(name), `a full session's page offers ${name}`);
  assert.is(await full.page.locator('header .read-only').count(), 0);
  await full.page.close();

  const reader = await controlsOf(true);
  assert.equal(
    reader.names.filter((name) => writes.includes(name)),
    [],
    'a read-only session shows no control that writes',
  );
  for (const name of ['Refresh', 'Reveal', 'Audit trail', 'Load more'])
    assert.ok(reader.names.includes(name), `a read-only session's page still offers ${name}`);
  assert.is(await reader.page.locator('header .read-only').textContent(), 'Read only');
  await reader.page.evaluate(`location.hash = ${JSON.stringify(`#/webhooks/${webhook.id}`)}`);
  await reader.page.locator('.delivery').first().waitFor();
  await shoot(reader.page, 'session-read-only');
  await reader.page.close();
  await app.portal.agreements.delete('acct_b', agreement.id);
  await app.portal.webhooks.delete('acct_b', webhook.id);
});

it('create a webhook against a local receiver, send a test call, and see it succeed in the log', async () => {
  receiver.script([], { status: 200 });
  const page = await signedIn(1100, 'en-GB');
  await page.getByLabel('Event type').selectOption('customer-created');
  await page.getByLabel('URL').fill(`${receiver.url}/created`);
  await page.getByRole('button', { name: 'Create webhook' }).click();
  const link = page.getByRole('link', { name: `${receiver.url}/created` });
  await link.waitFor();
  await shoot(page, '2-webhooks');
  const [webhook] = (await app.portal.webhooks.list('acct_a')).filter((item) => item.url === `${receiver.url}/created`);
  assert.ok(webhook, 'the webhook was stored');

  await link.click();
  await page.getByRole('heading', { level: 1, name: `${receiver.url}/created` }).waitFor();
  // Dates in the viewer's locale and time zone (en-GB, Berlin).
  const created = new Intl.DateTimeFormat('en-GB', {
    dateStyle: 'medium',
    timeStyle: 'medium',
    timeZone: 'Europe/Berlin',
  }).format(new Date(webhook.createdAt));
  assert.is(await page.locator(`time[datetime="${webhook.createdAt}"]`).first().textContent(), created);
  const before = receiver.received.length;
  await page.getByRole('button', { name: 'Send test call' }).click();
  const delivery = page.locator('.delivery[data-status="succeeded"]');
  await delivery.waitFor({ timeout: 15_000 });
  assert.match((await delivery.textContent()) ?? '', /Succeeded/);
  assert.match((await delivery.locator('.attempts li').first().textContent()) ?? '', /HTTP 200/);
  assert.is(receiver.received.length, before + 1);
  assert.match(receiver.received.at(-1)!.body, /"type":"webhook.test"/);
  await shoot(page, '3-webhook-log');
  assert.equal(problemsOf(page), []);
  await page.context().close();
});

it('a failing receiver: the log shows the failure and the retry scheduled; redeliver sends it again', async () => {
  const webhook = await newWebhook(`${receiver.url}/failing`);
  receiver.script([], { status: 500 });
  const page = await signedIn();
  await page.goto(`${app.url}/portal/#/webhooks/${webhook.id}`);
  await page.getByRole('button', { name: 'Send test call' }).click();
  const pending = page.locator('.delivery[data-status="pending"]');
  await pending.locator('.next').waitFor({ timeout: 15_000 });
  assert.match((await pending.locator('.attempts li').first().textContent()) ?? '', /HTTP 500/);
  assert.match((await pending.locator('.next').textContent()) ?? '', /Next attempt/);
  await page.getByText('Enabled, failing').waitFor();
  await shoot(page, '4-retry-scheduled');
  // The list shows the run of failures too, and leads back.
  await page.getByRole('link', { name: '← All webhooks' }).click();
  const card = page.locator('.card').filter({ hasText: `${receiver.url}/failing` });
  await card.waitFor();
  assert.match((await card.textContent()) ?? '', /Enabled, failing since /);
  await card.getByRole('link').click();

  receiver.script([], { status: 204 });
  await pending.getByRole('button', { name: 'Redeliver' }).click();
  const done = page.locator('.delivery[data-status="succeeded"]');
  await done.waitFor({ timeout: 15_000 });
  assert.is(await done.locator('.attempts li').count(), 2);
  assert.match((await done.locator('.attempts li').first().textContent()) ?? '', /HTTP 204/);
  assert.equal(problemsOf(page), []);
  await page.context().close();
});

it('a receiver that asks to wait: the webhook says until when, and the log marks the attempt as asked to wait', async () => {
  const webhook = await newWebhook(`${receiver.url}/busy`);
  receiver.script([{ status: 429, headers: { 'Retry-After': '600' } }]);
  const page = await signedIn();
  await page.goto(`${app.url}/portal/#/webhooks/${webhook.id}`);
  await page.getByRole('button', { name: 'Send test call' }).click();
  const pending = page.locator('.delivery[data-status="pending"]');
  await pending.locator('.next').waitFor({ timeout: 15_000 });
  assert.match(
    (await pending.locator('.attempts li').first().textContent()) ?? '',
    /HTTP 429.*asked to wait, not counted/,
  );
  await page.reload();
  await page.getByText('(its receiver asked, with Retry-After, or is not answering)').waitFor();
  assert.is(await page.getByText('Failures in a row').count(), 0, 'no failure counted');
  // A 429 is overload too: the worker halved its calls in flight, and the screen says so.
  await page.getByText(/^at most \d+ at once, adapted to what its receiver takes/).waitFor();
  await shoot(page, '4b-asked-to-wait');
  assert.equal(problemsOf(page), []);
  await page.context().close();
});

it('a rate limit: set on the webhook screen, shown in its summary; a refused value names why and changes nothing; emptied, none', async () => {
  const webhook = await newWebhook(`${receiver.url}/limited`);
  const page = await signedIn();
  await page.goto(`${app.url}/portal/#/webhooks/${webhook.id}`);
  await page.getByText('none: calls go as fast as the receiver answers').waitFor();
  const field = page.getByLabel('Calls a second at most');
  await field.fill('40');
  await page.getByRole('button', { name: 'Save rate limit' }).click();
  await page.getByText('Saved: at most 40 calls a second.').waitFor();
  await page.locator('.details').getByText('at most 40 calls a second').waitFor();
  assert.is((await app.portal.webhooks.get('acct_a', webhook.id))!.rateLimit, 40);
  await shoot(page, '4c-rate-limit');
  // Past the browser's own check (max), the API's answer is shown.
  await field.evaluate((input) => (input as unknown as { removeAttribute(name: string): void }).removeAttribute('max'));
  await field.fill('20000');
  await page.getByRole('button', { name: 'Save rate limit' }).click();
  await page.getByText(/rateLimit: must be at most 10000/).waitFor();
  assert.is((await app.portal.webhooks.get('acct_a', webhook.id))!.rateLimit, 40, 'refused: unchanged');
  await field.fill('');
  await page.getByRole('button', { name: 'Save rate limit' }).click();
  await page.getByText('Saved: none: calls go as fast as the receiver answers.').waitFor();
  assert.is((await app.portal.webhooks.get('acct_a', webhook.id))!.rateLimit, undefined);
  assert.equal(problemsOf(page), []);
  await page.context().close();
});

it('a broker destination: chosen when creating a webhook, named on its card and its screen, its password shown as ***', async () => {
  const { redisDestination } = await import('../../adapters/redis/index.js');
  const brokered = await startPortal({ ui: { path: '/portal' }, destinations: { redis: redisDestination() } });
  try {
    const plain = await signedIn();
    await plain.getByRole('heading', { level: 1, name: 'Webhooks' }).waitFor();
    assert.is(await plain.getByLabel('Destination').count(), 0, 'without destinations, HTTP only: no choice shown');
    await plain.context().close();

    const page = await signedInPage(browser, `${brokered.url}/portal/`, KEY_A, { width: 1100, locale: 'en-US' });
    const destination = page.getByLabel('Destination');
    assert.equal(await destination.locator('option').allTextContents(), ['HTTPS receiver', 'Redis stream']);
    await destination.selectOption({ label: 'Redis stream' });
    const url = page.getByLabel('URL');
    assert.match((await url.getAttribute('placeholder')) ?? '', /^rediss:\/\//);
    await url.fill('redis://default:s3cret-word@127.0.0.1:6399/portal-events');
    await page.getByRole('button', { name: 'Create webhook' }).click();
    const card = page.locator('.card', { hasText: 'Redis stream' });
    await card.waitFor();
    assert.match(
      (await card.locator('a.url').textContent()) ?? '',
      /^redis:\/\/default:\*\*\*@127\.0\.0\.1:6399\/portal-events$/,
    );
    await card.locator('a.url').click();
    await page.locator('.details').getByText('Redis stream').waitFor();
    assert.not.match(await page.content(), /s3cret-word/, 'the password is nowhere on the page');
    await shoot(page, '4d-broker-destination');
    assert.equal(problemsOf(page), []);
    await page.context().close();
  } finally {
    await brokered.close();
  }
});

it('rotate the secret with a chosen grace: the new one shown with a copy button, and behind Reveal after; disable and enable', async () => {
  const webhook = await newWebhook(`${receiver.url}/rotated`);
  const page = await signedIn();
  await page.context().grantPermissions(['clipboard-read', 'clipboard-write'], { origin: app.url });
  await page.goto(`${app.url}/portal/#/webhooks/${webhook.id}`);
  const grace = page.getByLabel('Old secret keeps signing');
  assert.is(await grace.inputValue(), String(24 * 3600_000), '24 hours, as the API, unless another is chosen');
  await grace.selectOption({ label: 'for 1 hour' });
  const asked = Date.now();
  await page.getByRole('button', { name: 'Rotate secret' }).click();
  const shown = page.locator('#new-secret');
  await shown.waitFor();
  const secret = (await shown.textContent()) ?? '';
  const stored = (await storage.getWebhook('acct_a', webhook.id))!;
  assert.is(secret, stored.secret);
  assert.is.not(secret, webhook.secret);
  assert.is(stored.previousSecret, webhook.secret, 'the old secret still signs');
  const until = Date.parse(stored.previousSecretUntil!) - asked;
  assert.ok(until > 3590_000 && until <= 3610_000, `for an hour: ${until} ms`);
  await page.getByText('The previous key still signs calls for 1 hour.').waitFor();
  await page.getByRole('button', { name: 'Copy' }).click();
  await page.getByText('Copied.').waitFor();
  assert.is(await page.evaluate('navigator.clipboard.readText()'), secret);
  await shoot(page, '5-rotated-secret');
  await page.getByRole('button', { name: 'Done' }).click();
  assert.is(await page.locator('#new-secret').count(), 0);
  // No grace: the replaced secret stops signing at once.
  await grace.selectOption({ label: 'not at all' });
  await page.getByRole('button', { name: 'Rotate secret' }).click();
  await page.getByText('The previous key no longer signs calls.').waitFor();
  const again = (await storage.getWebhook('acct_a', webhook.id))!;
  assert.is(await page.locator('#new-secret').textContent(), again.secret);
  assert.is(again.previousSecret, undefined);
  await page.getByRole('button', { name: 'Done' }).click();
  // The secret stays on the page, out of sight until revealed.
  assert.is(await page.locator('#webhook-secret').count(), 0);
  await page.getByRole('button', { name: 'Reveal' }).click();
  assert.is(await page.locator('#webhook-secret').textContent(), again.secret);
  await page.getByRole('button', { name: 'Hide' }).click();
  assert.is(await page.locator('#webhook-secret').count(), 0);

  await page.getByRole('button', { name: 'Disable' }).click();
  await page.getByText('Disabled (manual)').waitFor();
  await page.getByText('disabled by hand').waitFor();
  assert.is((await app.portal.webhooks.health('acct_a', webhook.id))!.status, 'disabled');
  // The API refuses a test call to a disabled webhook: its message is what the page shows.
  await page.getByRole('button', { name: 'Send test call' }).click();
  await page
    .getByRole('alert')
    .filter({ hasText: /disabled/ })
    .waitFor();
  await page.getByRole('button', { name: 'Enable' }).click();
  await page.locator('[data-health="enabled"]').waitFor();
  assert.is((await app.portal.webhooks.health('acct_a', webhook.id))!.status, 'enabled');
  assert.equal(problemsOf(page), []);
  await page.context().close();
});

it('recover since: an event missed while the webhook was disabled is queued again and delivered', async () => {
  receiver.script([], { status: 200 });
  const webhook = await newWebhook(`${receiver.url}/recovered`);
  await app.portal.webhooks.disable('acct_a', webhook.id);
  const event = await app.portal.events.publish('acct_a', 'customer-created', { customerId: 'cus_1' });
  await app.portal.worker!.tick();
  const [missed] = (await app.portal.webhooks.deliveries('acct_a', webhook.id)) ?? [];
  assert.is(missed?.status, 'cancelled');
  const page = await signedIn();
  await page.goto(`${app.url}/portal/#/webhooks/${webhook.id}`);
  await page.locator('.delivery[data-status="cancelled"]').waitFor();
  await page.getByRole('button', { name: 'Enable' }).click();
  await page.locator('[data-health="enabled"]').waitFor();
  // An hour ago, as the viewer's clock (Berlin) writes it in the form.
  const since = new Date(Date.now() - 3600_000);
  const local = new Intl.DateTimeFormat('sv-SE', {
    timeZone: 'Europe/Berlin',
    dateStyle: 'short',
    timeStyle: 'medium',
  }).format(since);
  await page.getByLabel('Recover missed events since').fill(local.replace(' ', 'T'));
  await page.getByRole('button', { name: 'Recover' }).click();
  await page.getByText('1 event queued again.').waitFor();
  const delivered = page.locator('.delivery[data-status="succeeded"]');
  await delivered.waitFor({ timeout: 15_000 });
  assert.match((await delivered.textContent()) ?? '', new RegExp(event.id));
  assert.equal(problemsOf(page), []);
  await page.context().close();
});

it('an error of the API is shown as its message; delete asks first', async () => {
  const page = await signedIn();
  await page.getByLabel('URL').fill('ftp://files.example.com/hooks');
  await page.getByRole('button', { name: 'Create webhook' }).click();
  const alert = page.getByRole('alert').filter({ hasText: /http/ });
  await alert.waitFor();
  const answer = await app.api('/webhooks', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ type: 'customer-created', url: 'ftp://files.example.com/hooks' }),
  });
  assert.is(await alert.textContent(), (await json(answer)).message);

  const webhook = await newWebhook(`${receiver.url}/to-delete`);
  await page.goto(`${app.url}/portal/#/webhooks/${webhook.id}`);
  page.once('dialog', (dialog) => void dialog.accept());
  await page.getByRole('button', { name: 'Delete webhook' }).click();
  await page.getByRole('heading', { level: 1, name: 'Webhooks' }).waitFor();
  assert.is(await app.portal.webhooks.get('acct_a', webhook.id), null);
  await page.context().close();
});

it('the event catalogue: every type with its description, schema and example; a host type without a schema says so', async () => {
  const page = await signedIn();
  await page.getByRole('link', { name: 'Event types' }).click();
  await page.getByRole('heading', { level: 1, name: 'Event types' }).waitFor();
  const cards = page.locator('.event-type');
  await cards.first().waitFor();
  assert.equal(
    await cards.evaluateAll((nodes) => nodes.map((node) => node.getAttribute('data-name'))),
    app.portal.eventTypes.list().map((type) => type.name),
  );
  const host = page.locator('.event-type[data-name="customer-created"]');
  assert.match((await host.textContent()) ?? '', /No schema: any JSON object\./);
  const signed = page.locator('.event-type[data-name="agreement-signed"]');
  assert.match((await signed.textContent()) ?? '', /The last signer of an agreement signed/);
  await signed.locator('summary', { hasText: 'Example' }).click();
  assert.match((await signed.locator('pre').last().textContent()) ?? '', /"status": "signed"/);
  await shoot(page, '17-event-types');
  assert.equal(problemsOf(page), []);
  await page.context().close();
});

it('creating a webhook shows what its receiver verifies with: the secret, or for ed25519 the public key and its keys link', async () => {
  const page = await signedIn();
  await page.getByLabel('URL').fill(`${receiver.url}/shown`);
  await page.getByRole('button', { name: 'Create webhook' }).click();
  await page.getByRole('heading', { name: 'Webhook created' }).waitFor();
  const hmac = (await app.portal.webhooks.list('acct_a')).find((one) => one.url === `${receiver.url}/shown`)!;
  assert.is(await page.locator('#created-secret').textContent(), hmac.secret);

  await page.getByLabel('URL').fill(`${receiver.url}/signed-ed25519`);
  await page.getByLabel('Signatures').selectOption('ed25519');
  await page.getByRole('button', { name: 'Create webhook' }).click();
  const ed25519 = async () =>
    (await app.portal.webhooks.list('acct_a')).find((one) => one.url === `${receiver.url}/signed-ed25519`);
  await page
    .locator('#created-secret')
    .filter({ hasText: /^whpk_/ })
    .waitFor();
  const made = (await ed25519())!;
  assert.is(await page.locator('#created-secret').textContent(), made.publicKey);
  assert.is(made.secret, undefined);
  await page.getByRole('link', { name: 'Open the webhook' }).click();
  await page.locator('#webhook-public-key').filter({ hasText: made.publicKey! }).waitFor();
  await page.getByRole('button', { name: 'Show the link' }).click();
  const link = (await page.locator('#public-keys-url').textContent())!;
  const served = (await (await fetch(link)).json()) as { keys: { kid: string }[] };
  assert.equal(
    served.keys.map((key) => key.kid),
    [made.publicKey],
  );
  await shoot(page, '16-ed25519-webhook');
  assert.equal(problemsOf(page), []);
  await page.context().close();
});

it("a filter: shown, tried on recent events, saved; a bad one shows the API's message; the log shows ordering keys and who waits", async () => {
  receiver.script([], { status: 204 });
  const webhook = await newWebhook(`${receiver.url}/filtered`);
  for (const tier of ['gold', 'silver', 'gold'])
    await app.portal.events.publish('acct_a', 'customer-created', { customer: { tier } });
  const page = await signedIn();
  await page.goto(`${app.url}/portal/#/webhooks/${webhook.id}`);
  await page.getByText('none: every event of the type').waitFor();
  const field = page.getByLabel('The filter, as JSON');
  await field.fill('{"customer.tier": "gold"}');
  await page.getByRole('button', { name: 'Try on recent events' }).click();
  // Other tests publish events of the type too: the page says what the API says.
  const expected = await app.portal.webhooks.dryRun('acct_a', {
    type: 'customer-created',
    filter: { 'customer.tier': 'gold' },
  });
  assert.ok(expected.matched >= 2 && expected.data.length >= 3);
  await page.getByText(`${expected.matched} of the ${expected.data.length} most recent events match.`).waitFor();
  assert.is(await page.locator('.dry-run-events li[data-matches="true"]').count(), expected.matched);
  assert.match((await page.locator('.dry-run-events li').first().textContent()) ?? '', /"tier": "gold"/);
  await page.getByRole('button', { name: 'Save filter' }).click();
  await page.getByText('Saved: events published from now on are matched against it.').waitFor();
  assert.equal((await app.portal.webhooks.get('acct_a', webhook.id))!.filter, { 'customer.tier': 'gold' });
  await page.locator('dd code').filter({ hasText: '{"customer.tier":"gold"}' }).waitFor();
  await shoot(page, '14-webhook-filter');

  await field.fill('{"customer.tier": {"$like": "g%"}}');
  await page.getByRole('button', { name: 'Save filter' }).click();
  await page
    .getByRole('alert')
    .filter({ hasText: 'webhook.filter["customer.tier"].$like: is not an operator' })
    .waitFor();
  await field.fill('{not json');
  await page.getByRole('button', { name: 'Try on recent events' }).click();
  await page.getByRole('alert').filter({ hasText: 'The filter is not JSON' }).waitFor();
  assert.equal(
    (await app.portal.webhooks.get('acct_a', webhook.id))!.filter,
    { 'customer.tier': 'gold' },
    'a refused change changes nothing',
  );

  // Two events of one key to a receiver that never answers: the second waits for the first, and says so.
  const holding = await startReceiver();
  holding.script([], { hang: true });
  try {
    const ordered = await app.portal.webhooks.create('acct_a', {
      type: 'customer-created',
      url: `${holding.url}/held`,
      filter: { n: { $exist: true } },
    });
    await app.portal.events.publish('acct_a', 'customer-created', { n: 1 }, { orderingKey: 'cus_42' });
    await app.portal.events.publish('acct_a', 'customer-created', { n: 2 }, { orderingKey: 'cus_42' });
    await page.goto(`${app.url}/portal/#/webhooks/${ordered.id}`);
    await page.getByText('Waiting for an earlier delivery of its key to end.').waitFor();
    assert.is(await page.locator('.delivery .ordering-key').filter({ hasText: 'key cus_42' }).count(), 2);
  } finally {
    await holding.close();
  }
  await shoot(page, '15-ordering-key-waiting');
  assert.equal(problemsOf(page), []);
  await page.context().close();
});

it('files: a directory expands in place and collapses, by click and by keyboard; one opens as its own screen; names are text, never markup', async () => {
  const reports = await app.portal.files.createDirectory('acct_a', { name: 'Reports' });
  const yearly = await app.portal.files.createDirectory('acct_a', { name: '2026', directoryId: reports.id });
  await app.portal.files.put('acct_a', { name: 'readme.txt', mime: 'text/plain', body: Buffer.from('hello') });
  await app.portal.files.put('acct_a', {
    name: '<img src=x onerror=alert(1)>.pdf',
    mime: 'application/pdf',
    directoryId: reports.id,
    body: Buffer.alloc(2048),
  });
  await app.portal.files.put('acct_a', {
    name: 'q1.csv',
    mime: 'text/csv',
    directoryId: yearly.id,
    body: Buffer.alloc(3 * 1024 * 1024),
  });
  const page = await signedIn();
  await page.getByRole('link', { name: 'Files' }).click();
  await page.getByRole('heading', { level: 1, name: 'Files' }).waitFor();
  await page.getByRole('cell', { name: 'readme.txt', exact: true }).waitFor();
  assert.match((await page.getByRole('row', { name: /readme\.txt/ }).textContent()) ?? '', /5 bytes/);
  await shoot(page, '6-files');

  // Expand in place: the entries of Reports come below it, one level deeper; the heading stays.
  const toggle = page.getByRole('button', { name: 'Reports' });
  assert.is(await toggle.getAttribute('aria-expanded'), 'false');
  await toggle.click();
  const inner = page.getByRole('row', { name: /onerror/ });
  await inner.waitFor();
  assert.is(await toggle.getAttribute('aria-expanded'), 'true');
  assert.match((await inner.textContent()) ?? '', /<img src=x onerror=alert\(1\)>\.pdf.*2 KB/);
  assert.is(await inner.getAttribute('data-depth'), '1');
  assert.is(await page.locator('main img').count(), 0);
  assert.is(await page.getByRole('heading', { level: 1 }).textContent(), 'Files');
  const indent = (name: RegExp) =>
    page
      .getByRole('row', { name })
      .locator('td')
      .first()
      .evaluate((cell) => parseFloat((globalThis as any).getComputedStyle(cell).paddingLeft));
  assert.ok((await indent(/onerror/)) > (await indent(/readme\.txt/)), 'an inner entry is indented');
  // The keyboard: → expands the directory inside, ← collapses Reports with everything below it.
  const nested = page.getByRole('button', { name: '2026' });
  await nested.focus();
  await page.keyboard.press('ArrowRight');
  await page.getByRole('row', { name: /q1\.csv/ }).waitFor();
  assert.match((await page.getByRole('row', { name: /q1\.csv/ }).textContent()) ?? '', /3 MB/);
  assert.is(await page.getByRole('row', { name: /q1\.csv/ }).getAttribute('data-depth'), '2');
  await shoot(page, '7-files-tree');
  await toggle.focus();
  await page.keyboard.press('ArrowLeft');
  await inner.waitFor({ state: 'detached' });
  assert.is(await page.getByRole('row', { name: /q1\.csv/ }).count(), 0);
  assert.is(await toggle.getAttribute('aria-expanded'), 'false');
  // Enter toggles as a click does.
  await page.keyboard.press('Enter');
  await inner.waitFor();
  await page.keyboard.press('Enter');
  await inner.waitFor({ state: 'detached' });

  // Open: the directory as a screen of its own, with the path above leading back.
  await page.getByRole('link', { name: 'Open Reports' }).click();
  await page.getByRole('heading', { level: 1, name: 'Reports' }).waitFor();
  await page.getByRole('row', { name: /onerror/ }).waitFor();
  await shoot(page, '8-directory');
  await page.getByRole('navigation', { name: 'Directory path' }).getByRole('link', { name: 'Files' }).click();
  await page.getByRole('cell', { name: 'readme.txt', exact: true }).waitFor();
  assert.equal(problemsOf(page), []);
  await page.context().close();
});

it('agreements: those created over the API, newest first, with status and signers; "Load more" brings the next page', async () => {
  const created = async (name: string, signers: object[]) => {
    const form = validFormData({ signers });
    form.set('name', name);
    const res = await app.api('/agreements', { method: 'POST', body: form });
    assert.is(res.status, 201);
    return json(res);
  };
  const bo = { firstName: 'Bo', lastName: 'Lee', email: 'bo@example.com', shouldIdentify: true };
  const cy = { firstName: 'Cy', lastName: 'Ng', email: 'cy@example.com', shouldIdentify: false };
  for (let i = 1; i <= 20; i++) await created(`Older agreement ${i}`, [cy]);
  const lease = await created('Lease 2026', [bo, cy]);
  await app.portal.agreements.sign('acct_a', lease.id, lease.signers[0].id, { signature: PNG_SIGNATURE });
  const nda = await created('NDA <b>bold</b>', [bo]);
  await app.portal.agreements.sign('acct_a', nda.id, nda.signers[0].id, { signature: PNG_SIGNATURE });

  const page = await signedIn();
  await page.getByRole('link', { name: 'Agreements' }).click();
  await page.getByRole('heading', { level: 1, name: 'Agreements' }).waitFor();
  const cards = page.locator('.agreement');
  await cards.first().waitFor();
  assert.is(await cards.count(), 20, 'a page of 20');
  assert.equal(await cards.locator('h2').evaluateAll((nodes) => nodes.slice(0, 3).map((node) => node.textContent)), [
    'NDA <b>bold</b>',
    'Lease 2026',
    'Older agreement 20',
  ]);
  const signed = page.locator(`.agreement[data-id="${nda.id}"]`);
  assert.match((await signed.textContent()) ?? '', /Signed · 1 of 1 signed · created /);
  const open = page.locator(`.agreement[data-id="${lease.id}"]`);
  assert.match((await open.textContent()) ?? '', /Awaiting signatures · 1 of 2 signed/);
  assert.match(
    (await open.locator('.signers li[data-signed="true"]').textContent()) ?? '',
    /^Bo Lee <bo@example\.com> · signed /,
  );
  assert.match(
    (await open.locator('.signers li[data-signed="false"]').textContent()) ?? '',
    /^Cy Ng <cy@example\.com> · not signed yet Copy signing link Link options/,
  );
  assert.match((await open.textContent()) ?? '', /Sent by Ann Owner · 1 document/);
  assert.match((await open.getByRole('list', { name: 'Documents' }).textContent()) ?? '', /lease\.pdf.*Download/);
  assert.is(await page.locator('main b').count(), 0, 'a name is text, never markup');
  await shoot(page, '9-agreements', false);

  const more = page.getByRole('button', { name: 'Load more' });
  await more.click();
  await page.getByText('All 22 shown.').waitFor();
  assert.is(await cards.count(), 22);
  assert.is(
    await page.evaluate('document.activeElement?.querySelector("h2")?.textContent'),
    'Older agreement 2',
    'the keyboard goes on from the first agreement brought',
  );
  assert.ok(await more.isHidden(), 'nothing more to load');
  assert.equal(problemsOf(page), []);
  await page.context().close();

  const narrow = await signedIn(360);
  await narrow.goto(`${app.url}/portal/#/agreements`);
  await narrow.locator('.agreement').first().waitFor();
  assert.ok(await narrow.evaluate('document.documentElement.scrollWidth <= 360'), 'the agreements screen fits 360 px');
  await shoot(narrow, '10-agreements-360px', false);
  assert.equal(problemsOf(narrow), []);
  await narrow.context().close();
});

it('files and agreement documents: Download saves the bytes through a signed link', async () => {
  const bytes = Buffer.from('the quarterly figures, byte for byte\n');
  const file = await app.portal.files.put('acct_a', { name: 'Quartal Q3.txt', mime: 'text/plain', body: bytes });
  const form = validFormData({ documents: [{ name: 'terms.pdf', bytes: Buffer.from('%PDF-1.4 terms') }] });
  form.set('name', 'Download check');
  const created = await app.api('/agreements', { method: 'POST', body: form });
  assert.is(created.status, 201);
  const agreement = await json(created);

  const page = await signedIn();
  await page.getByRole('link', { name: 'Files' }).click();
  await page.getByRole('cell', { name: 'Quartal Q3.txt', exact: true }).waitFor();
  const [saved] = await Promise.all([
    page.waitForEvent('download'),
    page.getByRole('button', { name: 'Download Quartal Q3.txt' }).click(),
  ]);
  assert.is(saved.suggestedFilename(), 'Quartal Q3.txt');
  const stream = await saved.createReadStream();
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  assert.ok(Buffer.concat(chunks).equals(bytes), 'the bytes stored');
  assert.match(page.url(), /#\/files$/, 'the page stays where it was');
  assert.ok((await app.portal.files.get('acct_a', file.id)) !== null);

  await page.getByRole('link', { name: 'Agreements' }).click();
  const card = page.locator(`.agreement[data-id="${agreement.id}"]`);
  await card.waitFor();
  const [document] = await Promise.all([
    page.waitForEvent('download'),
    card.getByRole('button', { name: 'Download terms.pdf' }).click(),
  ]);
  assert.is(document.suggestedFilename(), 'terms.pdf');
  await shoot(page, '9-agreement-documents');
  assert.equal(problemsOf(page), []);
  await page.context().close();
});

it("agreements: each signer's status, Copy signing link (a link that works), and the audit trail, verified", async () => {
  const form = validFormData({
    signers: [
      { firstName: 'Dee', lastName: 'Ray', email: 'dee@example.com', shouldIdentify: false },
      { firstName: 'Eli', lastName: 'Ott', email: 'eli@example.com', shouldIdentify: false },
    ],
  });
  form.set('name', 'Signing from the page');
  const agreement = await json(await app.api('/agreements', { method: 'POST', body: form }));
  const page = await signedIn();
  await page.getByRole('link', { name: 'Agreements' }).click();
  const card = page.locator(`.agreement[data-id="${agreement.id}"]`);
  await card.waitFor();
  await card.getByRole('button', { name: 'Copy a signing link for Dee Ray' }).click();
  const field = card.getByRole('textbox', { name: 'Signing link for Dee Ray' });
  await field.waitFor();
  const link = await field.inputValue();
  assert.match(link, /\/v1\/sign#[A-Za-z0-9_-]+\.[A-Za-z0-9_-]{43}$/);
  const token = new URL(link).hash.slice(1);
  const view = await fetch(`${app.url}/v1/signing`, { headers: { authorization: `Bearer ${token}` } });
  assert.is(view.status, 200, 'the copied link works');
  await json(view);
  // Eli's link: with an access code, sent by e-mail; once Eli identifies, the page says how and when.
  await card.getByText('Link options').nth(1).click();
  await card
    .getByRole('textbox', { name: 'Access code for Eli Ott (optional, 4 to 64 characters)' })
    .fill('lantern-31');
  await card.getByRole('checkbox', { name: 'Send the link to eli@example.com by e-mail' }).check();
  await card.getByRole('button', { name: 'Copy a signing link for Eli Ott' }).click();
  await card.getByText(/Mailed to eli@example\.com\./).waitFor();
  await until(
    () => notifier.sent.some((mail) => mail.kind === 'signing-invitation' && mail.to.includes('eli@example.com')),
    'the invitation',
  );
  const eli = new URL(notifier.linkFor('eli@example.com')).hash.slice(1);
  const identified = await fetch(`${app.url}/v1/signing/identify`, {
    method: 'POST',
    headers: { authorization: `Bearer ${eli}`, 'content-type': 'application/json' },
    body: JSON.stringify({ code: 'lantern-31' }),
  });
  assert.is(identified.status, 200);
  await page.reload();
  await card.waitFor();
  assert.match(
    (await card.locator('li[data-id] .identification').textContent()) ?? '',
    /^identified by the access code you gave them /,
  );
  await card.getByText('Audit trail').click();
  await card.getByText('Verified: every entry is intact.').waitFor();
  assert.match(
    (await card.locator('.trail').textContent()) ?? '',
    /Created.*Signing link made.*Opened.*Identified · .* · by the access code you gave them/s,
  );
  await shoot(page, '10-agreement-signing');

  // Once everyone signed: the certificate of completion, saved as a PDF.
  const png =
    'data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==';
  for (const one of agreement.signers)
    await app.portal.agreements.sign('acct_a', agreement.id, one.id, { signature: png });
  await page.reload();
  await card.waitFor();
  const [certificate] = await Promise.all([
    page.waitForEvent('download'),
    card.getByRole('button', { name: 'Download the certificate of completion of Signing from the page' }).click(),
  ]);
  assert.is(certificate.suggestedFilename(), `certificate-${agreement.id}.pdf`);
  const chunks: Buffer[] = [];
  for await (const chunk of await certificate.createReadStream()) chunks.push(chunk as Buffer);
  assert.is(Buffer.concat(chunks).subarray(0, 5).toString(), '%PDF-');
  assert.equal(problemsOf(page), []);
  await page.context().close();
});

it('a signed agreement: Download signed saves the completed copy of a PDF document; Verify a document says it is intact', async () => {
  const form = validFormData({ documents: [{ name: 'lease.pdf', bytes: await simplePdf('The lease, to be signed') }] });
  form.set('name', 'Copy check');
  const agreement = await json(await app.api('/agreements', { method: 'POST', body: form }));
  await app.portal.agreements.sign('acct_a', agreement.id, agreement.signers[0].id, { signature: PNG_SIGNATURE });
  await until(
    async () => (await app.portal.agreements.get('acct_a', agreement.id))!.documents[0]!.signedFileHash !== null,
    'the completed copy',
    10_000,
  );
  const page = await signedIn();
  await page.getByRole('link', { name: 'Agreements' }).click();
  const card = page.locator(`.agreement[data-id="${agreement.id}"]`);
  await card.waitFor();
  const [saved] = await Promise.all([
    page.waitForEvent('download'),
    card.getByRole('button', { name: 'Download signed lease.pdf' }).click(),
  ]);
  assert.is(saved.suggestedFilename(), 'lease-signed.pdf');
  const chunks: Buffer[] = [];
  for await (const chunk of await saved.createReadStream()) chunks.push(chunk as Buffer);
  const stored = (await app.portal.agreements.get('acct_a', agreement.id))!;
  assert.is(
    createHash('sha256').update(Buffer.concat(chunks)).digest('hex'),
    stored.documents[0]!.signedFileHash,
    'the copy whose hash the document carries',
  );

  // Verify a document: the copy saved is intact; the same bytes with one more at the end are not.
  const verifyPanel = page.getByRole('form', { name: 'Verify a document' });
  await verifyPanel
    .getByLabel('PDF')
    .setInputFiles({ name: 'lease-signed.pdf', mimeType: 'application/pdf', buffer: Buffer.concat(chunks) });
  await verifyPanel.getByRole('button', { name: 'Verify' }).click();
  await verifyPanel.locator('[data-intact="true"]').waitFor();
  assert.match(
    (await verifyPanel.locator('[data-intact]').textContent()) ?? '',
    new RegExp(`completed copy of document ${stored.documents[0]!.id} of agreement ${agreement.id}`),
  );
  await verifyPanel.getByLabel('PDF').setInputFiles({
    name: 'changed.pdf',
    mimeType: 'application/pdf',
    buffer: Buffer.concat([...chunks, Buffer.from('\n')]),
  });
  await verifyPanel.getByRole('button', { name: 'Verify' }).click();
  await verifyPanel.locator('[data-intact="false"]').waitFor();
  assert.match((await verifyPanel.locator('[data-intact]').textContent()) ?? '', /Not intact/);
  assert.equal(problemsOf(page), []);
  await page.context().close();
});

it("the sender's controls: Correct a signer's e-mail, Void the agreement with a reason, Erase its personal data, then Delete it", async () => {
  const form = validFormData();
  form.set('name', 'To be voided');
  const agreement = await json(await app.api('/agreements', { method: 'POST', body: form }));
  const page = await signedIn();
  await page.getByRole('link', { name: 'Agreements' }).click();
  let card = page.locator(`.agreement[data-id="${agreement.id}"]`);
  await card.waitFor();
  const name = `${agreement.signers[0].firstName} ${agreement.signers[0].lastName}`;
  await card.getByText('Correct', { exact: true }).click();
  await card.getByLabel(`E-mail of ${name}`).fill('corrected@example.org');
  await card.getByRole('button', { name: 'Save correction' }).click();
  card = page.locator(`.agreement[data-id="${agreement.id}"]`);
  await card.getByText('<corrected@example.org>').waitFor();
  assert.is((await app.portal.agreements.get('acct_a', agreement.id))!.signers[0]!.email, 'corrected@example.org');

  await card.getByText('Void this agreement').click();
  await card.getByLabel('Why To be voided is voided').fill('Sent to the wrong tenant');
  await card.getByRole('button', { name: 'Void agreement' }).click();
  card = page.locator(`.agreement[data-id="${agreement.id}"]`);
  await card.locator('.badge', { hasText: 'Voided' }).waitFor();
  const stored = (await app.portal.agreements.get('acct_a', agreement.id))!;
  assert.is(stored.closedReason, 'voided');
  assert.is(await card.getByText('Void this agreement').count(), 0, 'a closed agreement offers no void');

  await card.getByRole('button', { name: 'Erase personal data To be voided' }).click();
  await card.getByText('Press again to erase').waitFor();
  assert.is(
    (await app.portal.agreements.get('acct_a', agreement.id))!.signers[0]!.email,
    'corrected@example.org',
    'the first press erases nothing',
  );
  await card.getByRole('button', { name: 'Yes, erase To be voided' }).click();
  card = page.locator(`.agreement[data-id="${agreement.id}"]`);
  await card.getByText('<[erased]>').first().waitFor();
  assert.is((await app.portal.agreements.get('acct_a', agreement.id))!.signers[0]!.email, '[erased]');
  assert.is(await card.getByRole('button', { name: /^Erase personal data/ }).count(), 0, 'erased once');

  await card.getByRole('button', { name: 'Delete To be voided' }).click();
  await card.getByText('Removes it for good').waitFor();
  assert.ok(await app.portal.agreements.get('acct_a', agreement.id), 'the first press removes nothing');
  await card.getByRole('button', { name: 'Yes, delete To be voided' }).click();
  await card.waitFor({ state: 'detached' });
  assert.is(await app.portal.agreements.get('acct_a', agreement.id), null);
  assert.equal(problemsOf(page), []);
  await page.context().close();
});

it('a long delivery log: one page of 50 at first, older pages on demand; a refresh asks only for what is newer', async () => {
  // A type of its own: no other test's webhook gets these 120 calls.
  const webhook = await app.portal.webhooks.create('acct_a', {
    type: 'agreement-reminder-due',
    url: `${receiver.url}/long-log`,
  });
  receiver.script([], { status: 204 });
  // Its data as its schema in the event catalogue wants it: the catalogue's own example.
  const reminder = app.portal.eventTypes.list().find((type) => type.name === 'agreement-reminder-due')!.example;
  for (let i = 0; i < 120; i++) await app.portal.events.publish('acct_a', 'agreement-reminder-due', reminder);
  const page = await signedIn();
  const asked: string[] = [];
  page.on('request', (request) => {
    if (request.url().includes('/deliveries')) asked.push(new URL(request.url()).search);
  });
  await page.goto(`${app.url}/portal/#/webhooks/${webhook.id}`);
  await page.locator('.delivery').first().waitFor();
  assert.is(await page.locator('.delivery').count(), 50);
  await page.getByRole('button', { name: 'Older deliveries' }).click();
  await page.locator('.delivery').nth(99).waitFor();
  await page.getByRole('button', { name: 'Older deliveries' }).click();
  await page.locator('.delivery').nth(119).waitFor();
  assert.is(await page.locator('.delivery').count(), 120);
  assert.ok(await page.getByRole('button', { name: 'Older deliveries' }).isHidden(), 'no page after the last');
  asked.length = 0;
  await page.getByRole('button', { name: 'Refresh' }).click();
  await page.waitForTimeout(200);
  assert.is(await page.locator('.delivery').count(), 120, 'the older pages stay through a refresh');
  assert.ok(
    asked.length >= 1 && asked.every((search) => /since=/.test(search)),
    `a refresh asks for what is newer than the newest shown: ${asked.join(' ')}`,
  );
  assert.ok(
    asked.every((search) => /limit=50/.test(search)),
    `every request asks for one page: ${asked.join(' ')}`,
  );
  assert.equal(problemsOf(page), []);
  await page.context().close();
});

it('360 px wide: no sideways scroll; the keyboard reaches the sections', async () => {
  const webhook = await newWebhook(`${receiver.url}/a-rather-long-path/that/goes/on/and/on?with=query&and=more`);
  await app.portal.webhooks.sendTest('acct_a', webhook.id);
  const page = await signedIn(360);
  assert.ok(await page.evaluate('document.documentElement.scrollWidth <= 360'), 'the webhooks screen fits 360 px');
  await page.goto(`${app.url}/portal/#/webhooks/${webhook.id}`);
  await page.locator('.delivery').first().waitFor();
  assert.ok(await page.evaluate('document.documentElement.scrollWidth <= 360'), 'the webhook screen fits 360 px');
  await shoot(page, '11-webhook-360px');
  // The heading of a new screen has the focus; back from it: the way back to the list, Sign out, Files.
  assert.is(await page.evaluate('document.activeElement?.tagName'), 'H1');
  for (let i = 0; i < 3; i++) await page.keyboard.press('Shift+Tab');
  assert.is(await page.evaluate('document.activeElement?.textContent'), 'Files');
  await page.keyboard.press('Enter');
  await page.getByRole('heading', { level: 1, name: 'Files' }).waitFor();
  assert.equal(problemsOf(page), []);
  await page.context().close();
});

test.run();
