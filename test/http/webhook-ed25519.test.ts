import { createPublicKey, verify } from 'node:crypto';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { memoryTransport } from '../../adapters/memory/index.js';
import { WebhookVerificationError, verifyWebhook } from '../../src/index.js';
import { SIGNING_KEY_1 } from '../helpers/download.js';
import { json, withPortal } from '../helpers/server.js';
import { NEVER, manualClock } from '../helpers/webhooks.js';

const post = (body: unknown, headers: Record<string, string> = {}) => ({
  method: 'POST',
  headers: { 'content-type': 'application/json', ...headers },
  body: JSON.stringify(body),
});

test('POST /webhooks with "signatureScheme": "ed25519": the public key shown, the private key never; a bad scheme is a 400', async () => {
  await withPortal({ signingKeys: [SIGNING_KEY_1] }, async (app) => {
    const res = await app.api(
      '/webhooks',
      post({ type: 'customer-created', url: 'https://r.example/ed', signatureScheme: 'ed25519' }),
    );
    assert.is(res.status, 201);
    const created = await json(res);
    assert.equal(Object.keys(created), ['id', 'type', 'url', 'createdAt', 'signatureScheme', 'publicKey']);
    assert.match(created.publicKey, /^whpk_[A-Za-z0-9+/]{43}=$/);
    assert.equal(await json(await app.api(`/webhooks/${created.id}`)), created);
    const listed = (await json(await app.api('/webhooks'))).data;
    assert.not.match(JSON.stringify(listed), /whsk_/, 'no private key in any answer');
    const hmac = await json(
      await app.api(
        '/webhooks',
        post({ type: 'customer-created', url: 'https://r.example/h', signatureScheme: 'hmac-sha256' }),
      ),
    );
    assert.match(hmac.secret, /^whsec_/);
    assert.is(hmac.signatureScheme, undefined, 'an HMAC webhook keeps its shape');
    const bad = await app.api(
      '/webhooks',
      post({ type: 'customer-created', url: 'https://r.example/x', signatureScheme: 'rsa' }),
    );
    assert.is(bad.status, 400);
    assert.match((await json(bad)).message, /^webhook\.signatureScheme: must be "hmac-sha256" or "ed25519"/);
    // The scheme is part of what an Idempotency-Key answers for.
    const keyed = (scheme: string) =>
      post(
        { type: 'customer-created', url: 'https://r.example/k', signatureScheme: scheme },
        { 'idempotency-key': 'ed-key' },
      );
    assert.is((await app.api('/webhooks', keyed('ed25519'))).status, 201);
    assert.is((await app.api('/webhooks', keyed('hmac-sha256'))).status, 422);
  });
});

test('rotation and the public keys link: both keys published during the grace, the link unchanged and open without the API key', async () => {
  const time = manualClock();
  const transport = memoryTransport();
  await withPortal(
    { clock: time.clock, transport, signingKeys: [SIGNING_KEY_1], webhooks: { tick: NEVER } },
    async (app) => {
      const created = await app.portal.webhooks.create('acct_a', {
        type: 'customer-created',
        url: 'https://r.example/ed',
        signatureScheme: 'ed25519',
      });
      const before = await json(await app.api(`/webhooks/${created.id}/public-keys`));
      assert.equal(
        before.keys.map((key: { kid: string; status: string }) => [key.kid, key.status]),
        [[created.publicKey, 'current']],
      );
      assert.match(
        before.url,
        new RegExp(`^${app.url}/v1/webhook-keys/${created.id}\\?account=acct_a&signature=[A-Za-z0-9_-]{43}$`),
      );

      const rotated = await json(await app.api(`/webhooks/${created.id}/rotate-secret`, post({ graceMs: 3_600_000 })));
      assert.equal(Object.keys(rotated), ['id', 'type', 'url', 'createdAt', 'signatureScheme', 'publicKey']);
      const during = await json(await app.api(`/webhooks/${created.id}/public-keys`));
      assert.is(during.url, before.url, 'the link stays the same across rotations');
      const open = await fetch(during.url);
      assert.is(open.status, 200);
      assert.is(open.headers.get('cache-control'), 'public, max-age=300');
      const { keys } = (await open.json()) as {
        keys: { kid: string; status: string; until: string; kty: string; crv: string; x: string }[];
      };
      assert.equal(
        keys.map((key: { kid: string; status: string }) => [key.kid, key.status]),
        [
          [rotated.publicKey, 'current'],
          [created.publicKey, 'previous'],
        ],
      );
      assert.is(keys[1]!.until, new Date(time.now.getTime() + 3_600_000).toISOString().slice(0, 19) + '+00:00');

      // A call during the grace verifies with either key, checked by node:crypto with the JWK as published.
      await app.portal.events.publish('acct_a', 'customer-created', { n: 1 });
      await app.portal.worker!.tick();
      const call = transport.calls.at(-1)!;
      const message = Buffer.from(`${call.headers['webhook-id']}.${call.headers['webhook-timestamp']}.${call.body}`);
      const signatures = call.headers['webhook-signature']!.split(' ').map((one) =>
        Buffer.from(one.slice('v1a,'.length), 'base64'),
      );
      for (const jwk of keys) {
        const key = createPublicKey({ key: { kty: jwk.kty, crv: jwk.crv, x: jwk.x }, format: 'jwk' });
        assert.ok(
          signatures.some((signature) => verify(null, message, key, signature)),
          `${jwk.status} key`,
        );
      }

      time.advance(3600);
      const after = (await (await fetch(during.url)).json()) as { keys: { status: string }[] };
      assert.equal(
        after.keys.map((key: { status: string }) => key.status),
        ['current'],
        'after the grace, the new key alone',
      );
      // The signature's first character changed to another (one that was 'x' stays altered as 'y').
      const tampered = during.url.replace(
        /signature=(.)/,
        (_match: string, first: string) => `signature=${first === 'x' ? 'y' : 'x'}`,
      );
      for (const altered of [during.url.replace('account=acct_a', 'account=acct_b'), tampered]) {
        assert.is((await fetch(altered)).status, 404, altered);
      }
      assert.is(
        (
          await app.api(`/webhooks/${created.id}/public-keys`, {
            headers: { authorization: 'Bearer key-of-account-b' },
          })
        ).status,
        404,
        'another account',
      );
      await app.api(`/webhooks/${created.id}`, { method: 'DELETE' });
      assert.is((await fetch(during.url)).status, 404, "a deleted webhook's link serves nothing");
    },
  );
});

test('verifyWebhook: whpk_ keys verify v1a signatures, whsec_ secrets v1 ones, in one list; a malformed public key is refused', () => {
  assert.throws(
    () =>
      verifyWebhook(
        'whpk_not-base64',
        { 'webhook-id': 'evt_1', 'webhook-timestamp': '1', 'webhook-signature': 'v1a,AAAA' },
        '{}',
      ),
    (error: unknown) =>
      error instanceof WebhookVerificationError && error.reason === 'invalid-secret' && /whpk_/.test(error.message),
  );
});

test.run();
