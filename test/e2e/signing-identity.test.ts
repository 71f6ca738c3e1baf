import { mkdirSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Browser, Page } from 'playwright-core';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { memoryTransport } from '../../adapters/memory/index.js';
import { signer, validFormData } from '../helpers/agreements.js';
import { chromiumMissing, launchChromium } from '../helpers/chromium.js';
import { SIGNING_KEY_1 } from '../helpers/download.js';
import { recordingNotifier, until } from '../helpers/notifier.js';
import { type TestPortal, json, startPortal } from '../helpers/server.js';
import { skipping } from '../helpers/skip.js';
import { NEVER } from '../helpers/webhooks.js';

/**
 * The signing page in Debian's chromium, headless: a signer who must identify asks for a code,
 * enters it and signs, at 360 px and by keyboard; a page on an allowed origin frames the signing
 * page and hears `loaded` and `signed`; a page on another origin is refused the frame by the CSP.
 */

const OUTPUT = fileURLToPath(new URL('../../../test-output/signing-identity/', import.meta.url));
const missing = await chromiumMissing();
const it = missing === null ? test : skipping(test, missing);

let browser: Browser;
let app: TestPortal;
const notifier = recordingNotifier();
/** Pages that frame the signing page: one on the allowed origin, one on another. */
let host: http.Server | undefined;
let hostPort = 0;
let frameUrl = '';

test.before(async () => {
  if (missing !== null) return;
  mkdirSync(OUTPUT, { recursive: true });
  browser = await launchChromium();
  // The host page: an iframe on the signing link it is given, and every message it hears kept.
  const server = http.createServer((req, res) => {
    const src = new URL(req.url ?? '/', 'http://host').searchParams.get('src') ?? '';
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
    res.end(`<!doctype html><title>Host app</title><script>
      window.heard = [];
      addEventListener('message', (event) => window.heard.push({ origin: event.origin, data: event.data }));
    </script><iframe id="signing" style="width:420px;height:900px" src="${src.replace(/"/g, '&quot;')}"></iframe>`);
  });
  host = server;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  hostPort = (server.address() as AddressInfo).port;
  app = await startPortal({
    signingKeys: [SIGNING_KEY_1],
    transport: memoryTransport(),
    webhooks: { tick: NEVER },
    notifier,
    signing: { frameAncestors: [`http://localhost:${hostPort}`] },
  });
  frameUrl = app.url;
});

test.after(async () => {
  await browser?.close();
  await app?.close();
  // Never made when the tests skip: waiting for its close would never end.
  const server = host;
  if (server !== undefined) await new Promise((resolve) => server.close(resolve));
});

async function agreementFor(person: object): Promise<{ id: string; signerId: string }> {
  const agreement = await json(
    await app.api('/agreements', { method: 'POST', body: validFormData({ signers: [person] }) }),
  );
  return { id: agreement.id, signerId: agreement.signers[0].id };
}

async function linkFor(agreementId: string, signerId: string, body: object = {}): Promise<string> {
  const res = await app.api(`/agreements/${agreementId}/signers/${signerId}/signing-link`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  assert.is(res.status, 201);
  return (await json(res)).link;
}

async function tab(width: number): Promise<Page & { problems: string[] }> {
  const context = await browser.newContext({ viewport: { width, height: 900 } });
  const page = (await context.newPage()) as Page & { problems: string[] };
  page.problems = [];
  page.on('pageerror', (error) => page.problems.push(error.message));
  page.on('console', (message) => {
    if (message.type() === 'error' && !message.text().startsWith('Failed to load resource'))
      page.problems.push(message.text());
  });
  return page;
}

it('a shouldIdentify signer at 360 px, by keyboard: asks for a code, a wrong one shows the tries left, the right one opens the documents, signs', async () => {
  const { id, signerId } = await agreementFor({ ...signer(7), shouldIdentify: true });
  const link = await linkFor(id, signerId, { send: true });
  const page = await tab(360);
  await page.goto(link);
  await page.getByRole('heading', { level: 2, name: 'Confirm who you are' }).waitFor();
  assert.ok(await page.getByText('s…@example.com').first().isVisible(), 'the address, masked');
  assert.is(await page.getByRole('link').count(), 0, 'no document before identification');
  await page.screenshot({ path: path.join(OUTPUT, '1-identify-360px.png'), fullPage: true });

  // By keyboard: the button takes the focus with Tab, Enter presses it.
  await page.getByRole('button', { name: 'E-mail me a code' }).focus();
  await page.keyboard.press('Enter');
  await page.getByText(/A code is on its way/).waitFor();
  await until(
    () => notifier.sent.some((mail) => mail.kind === 'identification-code' && mail.signerId === signerId),
    'the code',
  );
  const code = notifier.codeFor('s7@example.com');
  const field = page.getByLabel('The 6-digit code from the e-mail');
  await field.fill(code === '000000' ? '111111' : '000000');
  await page.keyboard.press('Enter');
  await page
    .getByText(/4 tries left/)
    .first()
    .waitFor();
  await page.screenshot({ path: path.join(OUTPUT, '2-wrong-code-360px.png'), fullPage: true });
  await field.fill(code);
  await page.keyboard.press('Enter');
  await page.getByText('Thank you: you are identified.').waitFor();
  assert.is(await page.locator('ul.documents a').count(), 1, 'the document, once identified');
  const width = (await page.evaluate('document.documentElement.scrollWidth')) as number;
  assert.ok(width <= 360, `nothing wider than the screen (${width} px)`);
  await page.screenshot({ path: path.join(OUTPUT, '3-identified-360px.png'), fullPage: true });

  await page.getByRole('tab', { name: 'Type' }).click();
  await page.getByLabel('Your name as your signature').fill('Signer7 Lee');
  await page.getByText('Signing electronically: what you agree to').click();
  await page.getByLabel(/agree to sign electronically/).check();
  await page.getByRole('button', { name: 'Sign', exact: true }).click();
  await page.getByText('Thank you: you have signed.').waitFor();
  await page.screenshot({ path: path.join(OUTPUT, '4-signed-360px.png'), fullPage: true });
  assert.equal(page.problems, []);
  const audit = await json(await app.api(`/agreements/${id}/audit`));
  assert.equal(
    audit.data.map((entry: { action: string }) => entry.action),
    [
      'created',
      'link-issued',
      'identification-code-sent',
      'identification-failed',
      'identified',
      'viewed',
      'consented',
      'signed',
    ],
  );
});

it('a locked link: the fifth wrong access code, and the page says so', async () => {
  const { id, signerId } = await agreementFor(signer(8));
  const page = await tab(1000);
  await page.goto(await linkFor(id, signerId, { accessCode: 'river-stone-42' }));
  const field = page.getByLabel('The access code the sender gave you');
  for (let i = 1; i <= 5; i++) {
    await field.fill(`wrong-${i}`);
    await page.getByRole('button', { name: 'Confirm' }).click();
    if (i < 5) await page.getByText(`${5 - i} ${5 - i === 1 ? 'try' : 'tries'} left.`, { exact: true }).waitFor();
  }
  await page.getByRole('heading', { level: 1, name: 'This link is locked' }).waitFor();
  await page.screenshot({ path: path.join(OUTPUT, '5-locked.png'), fullPage: true });
});

it('framed on an allowed origin: the parent hears loaded and signed, never the token; another origin is refused by the CSP', async () => {
  const { id, signerId } = await agreementFor(signer(9));
  const link = await linkFor(id, signerId);
  const token = new URL(link).hash.slice(1);
  const signing = await fetch(link);
  const csp = signing.headers.get('content-security-policy') ?? '';
  assert.match(csp, new RegExp(`frame-ancestors http://localhost:${hostPort}(;|$)`));
  assert.is(signing.headers.get('x-frame-options'), null, 'no X-Frame-Options where the CSP names the origins');

  const page = await tab(1000);
  await page.goto(`http://localhost:${hostPort}/?src=${encodeURIComponent(link)}`);
  const frame = page.frameLocator('#signing');
  await frame.getByRole('heading', { level: 1, name: 'Lease 2026' }).waitFor();
  await frame.getByRole('tab', { name: 'Type' }).click();
  await frame.getByLabel('Your name as your signature').fill('Signer9 Lee');
  await frame.getByLabel(/agree to sign electronically/).check();
  await frame.getByRole('button', { name: 'Sign', exact: true }).click();
  await frame.getByText('Thank you: you have signed.').waitFor();
  const heard = (await page.evaluate('window.heard')) as {
    origin: string;
    data: { type: string; status: string; agreementId: string; signerId: string };
  }[];
  assert.equal(
    heard.map((message) => message.data),
    [
      { type: 'customer-portal:signing', status: 'loaded', agreementId: id, signerId },
      { type: 'customer-portal:signing', status: 'signed', agreementId: id, signerId },
    ],
  );
  assert.ok(
    heard.every((message) => message.origin === frameUrl),
    'from the portal',
  );
  assert.not.ok(JSON.stringify(heard).includes(token), 'never the token');
  await page.screenshot({ path: path.join(OUTPUT, '6-framed.png'), fullPage: true });

  // The same host page served on another origin (127.0.0.1 rather than localhost): no frame.
  const other = await tab(1000);
  const refusals: string[] = [];
  other.on('console', (message) => refusals.push(message.text()));
  const fresh = await agreementFor(signer(10));
  await other.goto(`http://127.0.0.1:${hostPort}/?src=${encodeURIComponent(await linkFor(fresh.id, fresh.signerId))}`);
  await until(() => refusals.some((text) => /frame-ancestors/.test(text)), 'the CSP refusal');
  const heardThere = await other.evaluate('window.heard');
  assert.equal(heardThere, [], 'nothing posted to a page the frame was refused to');
});

test.run();
