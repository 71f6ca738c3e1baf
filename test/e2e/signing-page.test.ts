import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Browser, Page } from 'playwright-core';
import { PNG } from 'pngjs';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { memoryTransport } from '../../adapters/memory/index.js';
import { SIGNER, signer, simplePdf, validFormData } from '../helpers/agreements.js';
import { chromiumMissing, launchChromium, until } from '../helpers/chromium.js';
import { SIGNING_KEY_1 } from '../helpers/download.js';
import { type TestPortal, json, startPortal } from '../helpers/server.js';
import { skipping } from '../helpers/skip.js';
import { NEVER } from '../helpers/webhooks.js';

/** The signing page in Debian's chromium, headless: signers take their links through to a signed agreement. */

const OUTPUT = fileURLToPath(new URL('../../../test-output/signing-page/', import.meta.url));
const missing = await chromiumMissing();
const it = missing === null ? test : skipping(test, missing);

let browser: Browser;
let app: TestPortal;
const transport = memoryTransport();

test.before(async () => {
  if (missing !== null) return;
  mkdirSync(OUTPUT, { recursive: true });
  browser = await launchChromium();
  app = await startPortal({ signingKeys: [SIGNING_KEY_1], transport, webhooks: { tick: NEVER } });
});

test.after(async () => {
  await browser?.close();
  await app?.close();
});

async function linkFor(agreementId: string, signerId: string): Promise<string> {
  const res = await app.api(`/agreements/${agreementId}/signers/${signerId}/signing-link`, { method: 'POST' });
  assert.is(res.status, 201);
  return (await json(res)).link;
}

/** A fresh tab; a script error or a CSP or Trusted Types violation is collected as a problem. */
async function tab(width = 1000): Promise<Page & { problems: string[] }> {
  const context = await browser.newContext({ viewport: { width, height: 900 }, acceptDownloads: true });
  const page = (await context.newPage()) as Page & { problems: string[] };
  page.problems = [];
  page.on('pageerror', (error) => page.problems.push(error.message));
  page.on('console', (message) => {
    if (message.type() === 'error' && !message.text().startsWith('Failed to load resource'))
      page.problems.push(message.text());
  });
  return page;
}

/** Draws a stroke across the signature pad with the mouse. */
async function draw(page: Page): Promise<void> {
  const box = (await page.locator('canvas.pad').boundingBox())!;
  await page.mouse.move(box.x + 20, box.y + box.height / 2);
  await page.mouse.down();
  for (let i = 1; i <= 10; i++)
    await page.mouse.move(box.x + 20 + i * 25, box.y + box.height / 2 + (i % 2 === 0 ? -15 : 15));
  await page.mouse.up();
}

it('two signers of a sequential agreement sign through their links: drawn and typed; the events, the trail', async () => {
  for (const type of ['agreement-viewed', 'agreement-signer-signed', 'agreement-signed']) {
    await app.portal.webhooks.create('acct_a', { type, url: `https://hooks.example.com/${type}` });
  }
  const form = validFormData({ signers: [SIGNER, signer(2)] });
  form.set('signingOrder', 'sequential');
  form.set('name', 'Lease <b>2026</b>');
  const agreement = await json(await app.api('/agreements', { method: 'POST', body: form }));
  const [first, second] = agreement.signers;
  const [one, two] = [await linkFor(agreement.id, first.id), await linkFor(agreement.id, second.id)];

  // The second signer first: the page says whose turn it is, and offers no signing.
  const early = await tab();
  await early.goto(two);
  await early.getByRole('heading', { level: 1, name: 'Lease <b>2026</b>' }).waitFor();
  await early.getByText(/signs before you/).waitFor();
  assert.is(await early.getByRole('button', { name: 'Sign' }).count(), 0);
  assert.not.match(early.url(), /#/, 'the token is taken off the address');
  await early.context().close();

  // The first signer: reads a document, draws, agrees, signs.
  const page = await tab();
  await page.goto(one);
  await page.getByRole('heading', { level: 1, name: 'Lease <b>2026</b>' }).waitFor();
  assert.is(await page.locator('main b').count(), 0, 'the name is text, never markup');
  const [download] = await Promise.all([
    page.waitForEvent('download'),
    page.getByRole('link', { name: 'lease.pdf' }).click(),
  ]);
  assert.is(download.suggestedFilename(), 'lease.pdf');
  await page.getByText('This document is not a PDF: open it to read it.').waitFor();
  await page.getByRole('button', { name: 'Sign' }).click();
  await page.getByRole('alert').getByText('Draw or type your signature first.').waitFor();
  await draw(page);
  await page.getByRole('button', { name: 'Sign' }).click();
  await page
    .getByRole('alert')
    .getByText(/Tick the box/)
    .waitFor();
  await page.getByLabel(/agree to sign electronically/).check();
  await page.screenshot({ path: path.join(OUTPUT, '1-before-signing.png'), fullPage: true });
  await page.getByRole('button', { name: 'Sign' }).click();
  await page.getByText('Thank you: you have signed.').waitFor();
  await page.screenshot({ path: path.join(OUTPUT, '2-signed.png'), fullPage: true });
  assert.equal(page.problems, []);
  await page.context().close();

  // The second signer, at 360 px, by keyboard: types the signature.
  const narrow = await tab(360);
  await narrow.goto(two);
  await narrow.getByRole('tab', { name: 'Type' }).click();
  await narrow.getByLabel('Your name as your signature').fill('Signer2 Lee');
  await narrow.getByLabel(/agree to sign electronically/).focus();
  await narrow.keyboard.press('Space');
  await narrow.getByRole('button', { name: 'Sign' }).focus();
  await narrow.keyboard.press('Enter');
  await narrow.getByText('Thank you: you have signed.').waitFor();
  const scrolls = await narrow.evaluate(() => {
    const root = (globalThis as any).document.documentElement;
    return root.scrollWidth > root.clientWidth;
  });
  assert.not.ok(scrolls, 'no sideways scroll at 360 px');
  await narrow.screenshot({ path: path.join(OUTPUT, '3-signed-360px.png'), fullPage: true });
  assert.equal(narrow.problems, []);
  await narrow.context().close();

  // A used link says so; the agreement is signed, the events went out in order, the trail verifies.
  const again = await tab();
  await again.goto(one);
  await again.getByText(/You signed this agreement on/).waitFor();
  await again.context().close();
  const stored = (await app.portal.agreements.get('acct_a', agreement.id))!;
  assert.is(stored.status, 'signed');
  assert.match(stored.signers[0]!.signature ?? '', /^data:image\/png;base64,/);
  const ofAgreement = () =>
    transport.calls.map((call) => JSON.parse(call.body)).filter((event) => event.data.id === agreement.id);
  for (let i = 0; i < 20 && ofAgreement().length < 5; i++) await app.portal.worker!.tick();
  const who = (event: { type: string; data: { signerId?: string } }) =>
    `${event.type}${event.data.signerId === undefined ? '' : event.data.signerId === first.id ? ' 1' : ' 2'}`;
  // Each call went out as its step was stored (the worker is poked by every publish), so the
  // receiver got them in the order of the steps; the last two were stored together.
  const received = ofAgreement().map(who);
  assert.equal(received.slice(0, 3), ['agreement-viewed 2', 'agreement-viewed 1', 'agreement-signer-signed 1']);
  assert.equal(received.slice(3).sort(), ['agreement-signed', 'agreement-signer-signed 2']);
  const audit = await json(await app.api(`/agreements/${agreement.id}/audit`));
  assert.is(audit.verified, true);
  const steps = audit.data.map(
    (entry: { action: string; signerId: string | null }) =>
      `${entry.action}${entry.signerId === null ? '' : entry.signerId === first.id ? ' 1' : ' 2'}`,
  );
  // The page sends each signer's consent to the disclosure it showed: recorded just before the signature.
  assert.equal(steps, [
    'created',
    'link-issued 1',
    'link-issued 2',
    'viewed 2',
    'viewed 1',
    'consented 1',
    'signed 1',
    'consented 2',
    'signed 2',
  ]);

  // The certificate of completion, read back.
  const certificate = await app.api(`/agreements/${agreement.id}/certificate`);
  assert.is(certificate.status, 200);
  if (spawnSync('pdftotext', ['-v'], { stdio: 'ignore' }).error !== undefined) {
    console.log("  skipped the certificate's text: pdftotext (poppler-utils) is not installed");
    return;
  }
  const dir = mkdtempSync(path.join(tmpdir(), 'signing-certificate-'));
  try {
    writeFileSync(path.join(dir, 'c.pdf'), Buffer.from(await certificate.arrayBuffer()));
    const text = execFileSync('pdftotext', [path.join(dir, 'c.pdf'), '-'], { encoding: 'utf8' });
    for (const value of [
      'Certificate of completion',
      'signed by every signer',
      agreement.documents[0].fileHash,
      first.email,
      second.email,
      audit.data.at(-1).hash,
      'verified',
    ]) {
      assert.ok(text.includes(value), `the certificate shows ${value}`);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

it('an expired, replaced or broken link says so plainly', async () => {
  const agreement = await json(await app.api('/agreements', { method: 'POST', body: validFormData() }));
  const old = await linkFor(agreement.id, agreement.signers[0].id);
  await linkFor(agreement.id, agreement.signers[0].id);
  const page = await tab();
  await page.goto(old);
  await page.getByRole('heading', { level: 1, name: 'This link has been replaced' }).waitFor();
  await page.goto(`${app.url}/v1/sign#not-a-token`);
  await page.reload();
  await page.getByRole('heading', { level: 1, name: /This link does not work/ }).waitFor();
  // A malformed escape in the fragment: the same page, not a blank one.
  await page.goto(`${app.url}/v1/sign#abc%E0%A4%A`);
  await page.reload();
  await page.getByRole('heading', { level: 1, name: /This link does not work/ }).waitFor();
  assert.equal(page.problems, []);
  await page.context().close();
});

it('a document link older than four minutes is asked for again; declining asks before it closes the agreement', async () => {
  const agreement = await json(await app.api('/agreements', { method: 'POST', body: validFormData() }));
  const page = await tab();
  await page.clock.install();
  await page.goto(await linkFor(agreement.id, agreement.signers[0].id));
  const documentLink = page.locator('.documents a').first();
  await documentLink.waitFor();
  const views: string[] = [];
  page.on('request', (request) => {
    if (new URL(request.url()).pathname === '/v1/signing') views.push(request.method());
  });
  await page.clock.fastForward('05:00');
  const [saved] = await Promise.all([page.waitForEvent('download'), documentLink.click()]);
  assert.equal(views, ['GET'], 'the view, and so a fresh link, was asked for first');
  assert.ok((await saved.path()) !== null);

  await page.getByText('Decline instead').click();
  await page.getByRole('button', { name: 'Decline to sign' }).click();
  await page.getByText('Declining closes the agreement for everyone').waitFor();
  assert.is(
    (await app.portal.agreements.get('acct_a', agreement.id))!.closedReason,
    null,
    'the first press declines nothing',
  );
  await page.getByRole('button', { name: 'Yes, decline' }).click();
  await page.getByText('You have declined').waitFor();
  assert.is((await app.portal.agreements.get('acct_a', agreement.id))!.closedReason, 'declined');
  assert.equal(page.problems, []);
  await page.context().close();
});

/** A logo: a 160×48 PNG, a dark red block with a light band, as a data-URL. */
function logoDataUrl(): string {
  const png = new PNG({ width: 160, height: 48 });
  for (let y = 0; y < 48; y++)
    for (let x = 0; x < 160; x++) {
      const i = (y * 160 + x) * 4;
      const band = y > 18 && y < 30 && x > 20 && x < 140;
      png.data.set(band ? [255, 236, 220, 255] : [170, 51, 0, 255], i);
    }
  return `data:image/png;base64,${PNG.sync.write(png).toString('base64')}`;
}

it("a French agreement from a branded company: the company's logo, name and colour, every word in French, signed", async () => {
  const logo = logoDataUrl();
  const branded = await startPortal({
    signingKeys: [SIGNING_KEY_1],
    transport,
    webhooks: { tick: NEVER },
    branding: async () => ({
      name: 'Maison Dupont',
      logoUrl: logo,
      accentColor: '#AA3300',
      supportEmail: 'aide@dupont.example',
    }),
  });
  try {
    const bail = await simplePdf(['Bail de 2026 : page une', 'Bail de 2026 : page deux']);
    const form = validFormData({ signers: [signer(1)], documents: [{ name: 'bail.pdf', bytes: bail }] });
    form.set('name', 'Bail 2026');
    form.append('locale', 'fr-FR');
    const created = await branded.api('/agreements', { method: 'POST', body: form });
    assert.is(created.status, 201);
    const agreement = await json(created);
    const made = await branded.api(`/agreements/${agreement.id}/signers/${agreement.signers[0].id}/signing-link`, {
      method: 'POST',
    });
    const page = await tab();
    await page.goto((await json(made)).link);
    await page.getByRole('heading', { level: 1, name: 'Bail 2026' }).waitFor();
    assert.is(await page.locator('html').getAttribute('lang'), 'fr');
    assert.is(await page.locator('header.top .brand').textContent(), 'Maison Dupont');
    assert.is(await page.locator('header.top img.logo').getAttribute('src'), logo);
    assert.ok(
      await page.evaluate(
        "(() => { const img = document.querySelector('header.top img.logo'); return img.complete && img.naturalWidth === 160; })()",
      ),
      "the logo is shown, under the page's CSP",
    );
    assert.is(
      await page.evaluate("getComputedStyle(document.documentElement).getPropertyValue('--accent').trim()"),
      '#aa3300',
    );
    await page.getByText('Maison Dupont vous demande, Signer1 Lee, de signer ce contrat.').waitFor();
    await page.getByText('Une question ? Écrivez à aide@dupont.example.').waitFor();
    await page.getByText(/^\d,\d\sKo$/).waitFor();
    // The document's pages, drawn by pdf.js from this origin, each once it comes near the view.
    const pages = page.getByRole('region', { name: 'Les pages de bail.pdf' });
    await pages.getByRole('img', { name: 'Page 1 sur 2 de bail.pdf' }).waitFor();
    const second = pages.getByRole('img', { name: 'Page 2 sur 2 de bail.pdf' });
    await second.scrollIntoViewIfNeeded();
    await until(async () => (await page.locator('canvas.page[data-drawn]').count()) === 2, 'both pages drawn', 30_000);
    const inked = await page.evaluate(`[...document.querySelectorAll('canvas.page')].map((canvas) => {
      const { data } = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height);
      let dark = 0;
      for (let i = 0; i < data.length; i += 4) if (data[i] < 128 && data[i + 3] > 0) dark++;
      return { width: canvas.width, dark };
    })`);
    for (const { width, dark } of inked as { width: number; dark: number }[]) {
      assert.ok(width >= 300, `a page is drawn at the column's width (${width} px)`);
      assert.ok(dark > 100, `a page shows its text (${dark} dark pixels)`);
    }
    // The page's CSP lets it create its one Trusted Types policy, once: no script can make another.
    assert.is(
      await page.evaluate(`(() => {
        for (const name of ['another', 'customer-portal-pdf-worker']) {
          try { trustedTypes.createPolicy(name, { createScriptURL: (url) => url }); return 'created ' + name; } catch {}
        }
        return 'refused';
      })()`),
      'refused',
    );
    // The two refusals the browser reported are this test's, not the page's.
    const refusals = page.problems.splice(-2);
    assert.ok(
      refusals.every((problem) => problem.startsWith('Creating a TrustedTypePolicy named')),
      refusals.join(),
    );
    await page.getByRole('heading', { name: 'Votre signature' }).scrollIntoViewIfNeeded();
    await page.screenshot({ path: path.join(OUTPUT, '4-french-branded.png'), fullPage: true });
    await page.getByRole('button', { name: 'Signer' }).click();
    await page.getByText('Dessinez ou tapez d’abord votre signature.').waitFor();
    await draw(page);
    await page.getByRole('button', { name: 'Signer' }).click();
    await page.getByText('Cochez la case pour accepter de signer électroniquement.').waitFor();
    await page.getByLabel(/J’ai lu les documents/).check();
    await page.getByRole('button', { name: 'Signer' }).click();
    await page.getByText('Merci : vous avez signé.').waitFor();
    await page.getByText(/Vous avez signé ce contrat le/).waitFor();
    assert.ok((await branded.portal.agreements.get('acct_a', agreement.id))!.signers[0]!.signedAt !== null);
    assert.equal(page.problems, []);
    await page.context().close();
  } finally {
    await branded.close();
  }
});

it('an https: logo is shown on the page under its CSP, fetched by the browser with no Referer', async () => {
  const png = Buffer.from(logoDataUrl().split(',')[1]!, 'base64');
  const branded = await startPortal({
    signingKeys: [SIGNING_KEY_1],
    transport,
    webhooks: { tick: NEVER },
    branding: { name: 'Acme', logoUrl: 'https://logo.example/acme.png' },
  });
  try {
    const agreement = await json(await branded.api('/agreements', { method: 'POST', body: validFormData() }));
    const made = await branded.api(`/agreements/${agreement.id}/signers/${agreement.signers[0].id}/signing-link`, {
      method: 'POST',
    });
    const page = await tab();
    // The browser asks for the logo only if the page's CSP lets it: this answers in the logo host's place.
    const asked: Record<string, string>[] = [];
    await page.context().route('https://logo.example/**', (route) => {
      asked.push(route.request().headers());
      return route.fulfill({ status: 200, contentType: 'image/png', body: png });
    });
    await page.goto((await json(made)).link);
    await page.getByText(/^Acme asks you, .+, to sign this agreement\.$/).waitFor();
    await until(
      async () =>
        (await page.evaluate(
          "(() => { const img = document.querySelector('header.top img.logo'); return img?.complete === true && img.naturalWidth === 160; })()",
        )) === true,
      'the logo loaded',
      30_000,
    );
    assert.is(asked.length, 1);
    assert.is(asked[0]!.referer, undefined, 'no Referer goes to the logo host');
    assert.equal(page.problems, []);
    await page.context().close();
  } finally {
    await branded.close();
  }
});

test.run();
