import { createHash } from 'node:crypto';
import express from 'express';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { createPortal } from '../../src/index.js';
import { PAGE_CSP } from '../../src/http/page.js';
import { KEY_A, json, listen, rawRequest, rejects, withPortal } from '../helpers/server.js';

/** The customer portal page over HTTP, without a browser: the page, its assets, and their headers. */

const CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "connect-src 'self'",
  "img-src 'self' data: https:",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
  "require-trusted-types-for 'script'",
  "trusted-types 'none'",
].join('; ');
const UI = { ui: { path: '/portal' } };
const assetsOf = (html: string) =>
  [...html.matchAll(/(?:src|href)="(assets\/[^"]+)" integrity="([^"]+)"/g)].map(([, href, integrity]) => ({
    href: href!,
    integrity: integrity!,
  }));

test('off by default: the page path is an unknown path, answered as the API answers one', async () => {
  await withPortal(async ({ url }) => {
    for (const path of ['/portal', '/portal/']) {
      const res = await fetch(url + path);
      assert.is(res.status, 404, path);
      assert.is((await json(res)).message, `No route matches GET ${path}.`);
    }
  });
});

test('the page: HTML, no-store, the strict Content-Security-Policy, one script and one stylesheet of its own', async () => {
  await withPortal(UI, async ({ url }) => {
    const res = await fetch(`${url}/portal/`, { headers: { 'x-request-id': 'page-1' } });
    assert.is(res.status, 200);
    assert.is(res.headers.get('content-type'), 'text/html; charset=utf-8');
    assert.is(res.headers.get('cache-control'), 'no-store');
    assert.is(res.headers.get('content-security-policy'), CSP);
    assert.is(PAGE_CSP, CSP);
    assert.is(res.headers.get('x-frame-options'), 'DENY');
    assert.is(res.headers.get('x-content-type-options'), 'nosniff');
    assert.is(res.headers.get('referrer-policy'), 'no-referrer');
    assert.is(res.headers.get('x-request-id'), 'page-1');
    const html = await res.text();
    assert.is(Number(res.headers.get('content-length')), Buffer.byteLength(html));
    // Nothing inline: every script has a src, no <style> element, no style or on… attribute, no CDN.
    assert.is([...html.matchAll(/<script\b/g)].length, 1);
    assert.match(html, /<script src="assets\/portal\.[\w-]+\.js" integrity="sha384-[\w+/=]+" defer><\/script>/);
    assert.match(html, /<link rel="stylesheet" href="assets\/portal\.[\w-]+\.css" integrity="sha384-[\w+/=]+">/);
    assert.not.match(html, /<style|\sstyle=|\son[a-z]+=|https?:\/\//i);
    assert.match(html, /<meta name="portal-api" content="\.\.\/v1">/);
    assert.match(
      html,
      /<meta name="portal-event-types" content="\[&quot;customer-created&quot;,&quot;agreement-created&quot;,&quot;agreement-signed&quot;,&quot;agreement-viewed&quot;,/,
    );
  });
});

test('the assets: named by their content, immutable for a year, matching the integrity the page names', async () => {
  await withPortal(UI, async ({ url }) => {
    const assets = assetsOf(await (await fetch(`${url}/portal/`)).text());
    assert.equal(
      assets.map(({ href }) => href.split('.').at(-1)),
      ['css', 'js'],
    );
    for (const { href, integrity } of assets) {
      const res = await fetch(`${url}/portal/${href}`);
      assert.is(res.status, 200, href);
      assert.is(res.headers.get('cache-control'), 'public, max-age=31536000, immutable');
      assert.is(
        res.headers.get('content-type'),
        href.endsWith('.js') ? 'text/javascript; charset=utf-8' : 'text/css; charset=utf-8',
      );
      assert.is(res.headers.get('x-content-type-options'), 'nosniff');
      const body = Buffer.from(await res.arrayBuffer());
      assert.is(integrity, 'sha384-' + createHash('sha384').update(body).digest('base64'));
      const hash = createHash('sha256').update(body).digest('base64url').slice(0, 16);
      assert.ok(href.includes(`.${hash}.`), `${href} is named by its content (${hash})`);
    }
    const script = await (await fetch(`${url}/portal/${assets[1]!.href}`)).text();
    // The page builds the DOM from text: no HTML sink, no eval, nothing fetched from another origin.
    assert.not.match(script, /innerHTML|outerHTML|insertAdjacentHTML|document\.write|\beval\(|new Function/);
  });
});

test('the assets go gzipped to a client that takes gzip, whole to one that does not', async () => {
  await withPortal(UI, async ({ url }) => {
    const [, script] = assetsOf(await (await fetch(`${url}/portal/`)).text());
    const whole = await rawRequest(`${url}/portal/${script!.href}`, { method: 'GET' });
    assert.is(whole.headers['content-encoding'], undefined);
    assert.is(whole.headers.vary, 'Accept-Encoding');
    for (const accept of ['gzip, deflate, br', 'br;q=1, gzip;q=0.5', '*']) {
      const packed = await rawRequest(`${url}/portal/${script!.href}`, {
        method: 'GET',
        headers: { 'accept-encoding': accept },
      });
      assert.is(packed.headers['content-encoding'], 'gzip', accept);
      assert.ok(Number(packed.headers['content-length']) < Buffer.byteLength(whole.body) / 2, accept);
    }
    for (const accept of ['gzip;q=0', 'br', 'identity']) {
      const plain = await rawRequest(`${url}/portal/${script!.href}`, {
        method: 'GET',
        headers: { 'accept-encoding': accept },
      });
      assert.is(plain.headers['content-encoding'], undefined, accept);
      assert.is(plain.body, whole.body);
    }
  });
});

test('the signing page: the same CSP with one Trusted Types policy for its worker; pdf.js served beside it, gzipped', async () => {
  await withPortal(async ({ url }) => {
    const res = await fetch(`${url}/v1/sign`);
    assert.is(res.status, 200);
    assert.is(
      res.headers.get('content-security-policy'),
      CSP.replace("connect-src 'self'", "connect-src 'self'; worker-src 'self'").replace(
        "trusted-types 'none'",
        'trusted-types customer-portal-pdf-worker',
      ),
    );
    const html = await res.text();
    const meta = (name: string) => new RegExp(`<meta name="${name}" content="([^"]+)">`).exec(html)?.[1];
    assert.is(meta('customer-portal-pdf-policy'), 'customer-portal-pdf-worker');
    for (const name of ['customer-portal-pdf', 'customer-portal-pdf-worker']) {
      const href = meta(name)!;
      assert.match(href, /^sign\/assets\/pdf(-worker)?\.[\w-]{16}\.mjs$/, name);
      const whole = await rawRequest(`${url}/v1/${href}`, { method: 'GET' });
      assert.is(whole.status, 200, name);
      assert.is(whole.headers['content-type'], 'text/javascript; charset=utf-8');
      assert.is(whole.headers['cache-control'], 'public, max-age=31536000, immutable');
      assert.match(whole.body, /pdfjsVersion/, 'pdf.js as published, with its licence notice');
      const packed = await rawRequest(`${url}/v1/${href}`, { method: 'GET', headers: { 'accept-encoding': 'gzip' } });
      assert.is(packed.headers['content-encoding'], 'gzip');
      assert.ok(Number(packed.headers['content-length']) < Buffer.byteLength(whole.body) / 2);
    }
  });
});

test('an unknown asset or path under the page is a 404 {message}; other methods a 405; HEAD has no body', async () => {
  await withPortal(UI, async ({ url }) => {
    for (const path of [
      '/portal/assets/portal.0000000000000000.js',
      '/portal/assets/',
      '/portal/index.html',
      '/portal/x/y',
    ]) {
      const res = await fetch(url + path);
      assert.is(res.status, 404, path);
      assert.is(res.headers.get('content-type'), 'application/json; charset=utf-8');
      assert.is((await json(res)).message, `No route matches GET ${path}.`);
    }
    const post = await fetch(`${url}/portal/`, { method: 'POST', body: 'x' });
    assert.is(post.status, 405);
    assert.is(post.headers.get('allow'), 'GET, HEAD');
    const head = await rawRequest(`${url}/portal/`, { method: 'HEAD' });
    assert.is(head.status, 200);
    assert.is(head.body, '');
    assert.ok(Number(head.headers['content-length']) > 200);
  });
});

test('the page path without its slash redirects to it, relatively, keeping the query; /portalx is not the page', async () => {
  await withPortal(UI, async ({ url }) => {
    const res = await fetch(`${url}/portal?from=mail`, { redirect: 'manual' });
    assert.is(res.status, 302);
    assert.is(res.headers.get('location'), 'portal/?from=mail');
    assert.is(res.headers.get('cache-control'), 'no-store');
    assert.is((await fetch(`${url}/portalx`)).status, 404);
    assert.is((await fetch(`${url}/portal/`, { redirect: 'manual' })).status, 200);
  });
});

test('the API beside the page is unchanged, and the page needs no key: it holds no data', async () => {
  await withPortal(UI, async ({ url, api }) => {
    assert.is((await api('/webhooks')).status, 200);
    assert.is((await fetch(`${url}/v1/webhooks`)).status, 401);
    assert.is((await fetch(`${url}/portal/`)).status, 200);
  });
});

test('another path and base path: the page finds the API relative to itself', async () => {
  await withPortal({ ui: { path: '/account/portal/' }, basePath: '/api' }, async ({ url }) => {
    const html = await (await fetch(`${url}/account/portal/`)).text();
    assert.match(html, /<meta name="portal-api" content="\.\.\/\.\.\/api">/);
    const [script] = assetsOf(html).filter(({ href }) => href.endsWith('.js'));
    assert.is((await fetch(`${url}/account/portal/${script!.href}`)).status, 200);
    assert.is((await fetch(`${url}/account/portal`, { redirect: 'manual' })).headers.get('location'), 'portal/');
  });
});

test('event types are written into the page as text, escaped', async () => {
  await withPortal({ ...UI, eventTypes: ['order-"paid"', 'a<b>&c'] }, async ({ url }) => {
    const html = await (await fetch(`${url}/portal/`)).text();
    assert.match(html, /content="\[&quot;order-\\&quot;paid\\&quot;&quot;,&quot;a&lt;b&gt;&amp;c&quot;\]"/);
  });
});

test('with next (connect, Express): the page and the API are served, every other path falls through', async () => {
  const portal = await createPortal({ auth: { apiKeys: { [KEY_A]: 'acct_a' } }, ...UI });
  const server = await listen((req, res) =>
    portal.handler(req, res, () => res.writeHead(299, { 'content-type': 'text/plain' }).end('host app')),
  );
  try {
    assert.is((await fetch(`${server.url}/portal/`)).status, 200);
    assert.is(
      (await fetch(`${server.url}/portal/assets/nothing.js`)).status,
      404,
      'under the page path, the page answers',
    );
    assert.is((await fetch(`${server.url}/v1/files`, { headers: { authorization: `Bearer ${KEY_A}` } })).status, 200);
    for (const path of ['/', '/portals', '/other/portal'])
      assert.is((await fetch(server.url + path)).status, 299, path);
  } finally {
    await server.close();
    await portal.close();
  }
});

test('mounted by Express under a prefix: the page, its assets and the API it calls all sit under the prefix', async () => {
  const portal = await createPortal({ auth: { apiKeys: { [KEY_A]: 'acct_a' } }, ...UI });
  const app = express();
  app.use('/account', portal.handler);
  const server = await listen(app);
  try {
    const redirect = await fetch(`${server.url}/account/portal`, { redirect: 'manual' });
    assert.is(new URL(redirect.headers.get('location')!, `${server.url}/account/portal`).pathname, '/account/portal/');
    const html = await (await fetch(`${server.url}/account/portal/`)).text();
    for (const { href } of assetsOf(html))
      assert.is((await fetch(new URL(href, `${server.url}/account/portal/`))).status, 200, href);
    const api = new URL(/<meta name="portal-api" content="([^"]+)">/.exec(html)![1]!, `${server.url}/account/portal/`)
      .href;
    assert.is(api, `${server.url}/account/v1`);
    assert.is((await fetch(`${api}/files`, { headers: { authorization: `Bearer ${KEY_A}` } })).status, 200);
  } finally {
    await server.close();
    await portal.close();
  }
});

test('ui.path is checked at start, with an error that names the problem', async () => {
  const start = (options: object) => createPortal({ auth: { apiKeys: { [KEY_A]: 'acct_a' } }, ...options });
  await rejects(
    () => start({ ui: { path: 'portal' } }),
    /ui\.path "portal" must be an absolute path of plain segments/,
  );
  await rejects(() => start({ ui: { path: '/' } }), /ui\.path "\/" must be an absolute path .* and not "\/"/);
  await rejects(() => start({ ui: { path: '/a b' } }), /ui\.path "\/a b" must be an absolute path/);
  await rejects(() => start({ ui: { path: '/a/../v1' } }), /ui\.path "\/a\/\.\.\/v1" must be an absolute path/);
  await rejects(() => start({ ui: { path: 42 } }), /ui\.path must be a string/);
  await rejects(() => start({ ui: 'yes' }), /ui must be an object such as \{ path: '\/portal' \}, or false/);
  await rejects(() => start({ ui: { path: '/portal', theme: 'dark' } }), /ui has an unknown option "theme"/);
  await rejects(
    () => start({ ui: { path: '/v1' } }),
    /ui\.path "\/v1" overlaps basePath "\/v1": the page and the API need paths apart/,
  );
  await rejects(() => start({ ui: { path: '/v1/portal' } }), /ui\.path "\/v1\/portal" overlaps basePath "\/v1"/);
  await rejects(() => start({ ui: { path: '/portal' }, basePath: '/portal/v1' }), /overlaps basePath "\/portal\/v1"/);
  await rejects(() => start({ ui: { path: '/portal' }, basePath: '' }), /overlaps basePath "\/"/);
  await rejects(
    () => start({ ui: { path: '/portal' }, extensions: false }),
    /calls the extension routes .* extensions: false/,
  );
  // `ui: {}` is the page at /portal; `ui: false` is no page.
  await withPortal({ ui: {} }, async ({ url }) => assert.is((await fetch(`${url}/portal/`)).status, 200));
  await withPortal({ ui: false }, async ({ url }) => assert.is((await fetch(`${url}/portal/`)).status, 404));
});

test('a page that was never built stops the start with what to do', async () => {
  const { createPage } = await import('../../src/http/page.js');
  await rejects(
    () =>
      createPage({
        path: '/portal',
        basePath: '/v1',
        eventTypes: [],
        schemes: ['http', 'https'],
        assetsDir: new URL('file:///nonexistent-portal-ui/'),
      }),
    /ui: the portal page is not built \(\/nonexistent-portal-ui\/manifest\.json: .*\); run `npm run build`/,
  );
});

test.run();
