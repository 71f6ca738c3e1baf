import { createPublicKey, verify as cryptoVerify } from 'node:crypto';
import { createLinkSigner } from '../../src/domain/download-links.js';
import { Webhook } from 'standardwebhooks';
import type { Test } from 'uvu';
import * as assert from 'uvu/assert';
import { createWebhookService } from '../../src/domain/webhooks.js';
import type { WebhookCall, WebhookTransport } from '../../src/ports.js';
import { silentLogger } from '../../src/shared/logger.js';
import { atom } from '../../src/shared/time.js';
import { verifyWebhook } from '../../src/webhooks/signature.js';
import { createWebhookWorker } from '../../src/webhooks/worker.js';
import { NEVER, manualClock } from '../helpers/webhooks.js';
import type { StorageFactory } from './types.js';
import { eventRecord, webhookRecord } from './fixtures.js';
import { withStorage } from './with-storage.js';

/**
 * For each `whpk_` key, whether some `v1a,` signature of `call` verifies under it, checked with
 * Node's `crypto` alone: the key imported as a JWK, the Standard Webhooks message rebuilt by hand.
 */
function nodeVerdicts(publicKeys: string[], call: WebhookCall): boolean[] {
  const message = Buffer.from(`${call.headers['webhook-id']}.${call.headers['webhook-timestamp']}.${call.body}`);
  const signatures = call.headers['webhook-signature']!.split(' ')
    .filter((one) => one.startsWith('v1a,'))
    .map((one) => Buffer.from(one.slice(4), 'base64'));
  return publicKeys.map((whpk) => {
    const key = createPublicKey({
      key: { kty: 'OKP', crv: 'Ed25519', x: Buffer.from(whpk.slice(5), 'base64').toString('base64url') },
      format: 'jwk',
    });
    return signatures.some((signature) => cryptoVerify(null, message, key, signature));
  });
}

/** What the Standard Webhooks library makes of `call` with `secret`: `'ok'` or its error message. */
function verdict(secret: string, call: WebhookCall): string {
  try {
    new Webhook(secret).verify(call.body, call.headers);
    return 'ok';
  } catch (error) {
    return (error as Error).message;
  }
}

/**
 * A secret rotation end to end on the store under test: the rotation is stored, a worker claims the
 * webhook with both secrets and signs with both during the grace, then with the new one alone. The
 * clock is injected and starts at the real time, as `standardwebhooks` checks timestamps against it.
 */
export function rotationStorageTests(test: Test, factory: StorageFactory): void {
  test(
    'rotation: during the grace both standardwebhooks verifiers (old and new secret) accept the same call; after it only the new',
    withStorage(factory, async (storage, { db }) => {
      const time = manualClock();
      const calls: WebhookCall[] = [];
      const transport: WebhookTransport = {
        send: async (call) => (calls.push(call), { statusCode: 200, headers: {}, error: null }),
      };
      const worker = createWebhookWorker({
        storage,
        transport,
        clock: time.clock,
        logger: silentLogger,
        tick: NEVER,
        timeoutMs: 5_000,
        concurrency: 4,
        retrySchedule: [5],
      });
      try {
        const webhooks = createWebhookService({
          storage,
          clock: time.clock,
          eventTypes: ['customer-created'],
          signer: createLinkSigner(['a-signing-key-of-the-rotation-tests-0123']),
        });
        const webhook = webhookRecord({ createdAt: atom(time.now) });
        await storage.insertWebhook(webhook);
        const oldSecret = webhook.secret;

        const rotated = (await webhooks.rotateSecret('acct_a', webhook.id, { graceMs: 60_000 }))!;
        const newSecret = rotated.secret!;
        assert.is.not(newSecret, oldSecret);
        assert.equal(await db.webhook(webhook.id), {
          ...webhook,
          secret: newSecret,
          previousSecret: oldSecret,
          previousSecretUntil: atom(new Date(time.now.getTime() + 60_000)),
        });

        await storage.publishEvents([eventRecord({ createdAt: atom(time.now) })]);
        await worker.tick();
        const during = calls.at(-1)!;
        assert.match(during.headers['webhook-signature']!, /^v1,[A-Za-z0-9+/]{43}= v1,[A-Za-z0-9+/]{43}=$/);
        assert.is(during.headers['X-Webhook-Signature'], during.headers['webhook-signature']);
        assert.equal([verdict(oldSecret, during), verdict(newSecret, during)], ['ok', 'ok']);
        assert.ok(
          verifyWebhook([oldSecret], during.headers, during.body, { now: time.now }),
          'verifyWebhook with the old secret alone',
        );
        assert.ok(verifyWebhook(newSecret, during.headers, during.body, { now: time.now }), 'and with the new one');

        // A second within the grace is still signed with both; at its end, with the new secret alone.
        time.advance(59);
        await storage.publishEvents([eventRecord({ createdAt: atom(time.now) })]);
        await worker.tick();
        assert.equal([verdict(oldSecret, calls.at(-1)!), verdict(newSecret, calls.at(-1)!)], ['ok', 'ok']);
        time.advance(1);
        await storage.publishEvents([eventRecord({ createdAt: atom(time.now) })]);
        await worker.tick();
        const after = calls.at(-1)!;
        assert.match(after.headers['webhook-signature']!, /^v1,[A-Za-z0-9+/]{43}=$/);
        assert.equal([verdict(oldSecret, after), verdict(newSecret, after)], ['No matching signature found', 'ok']);
        assert.ok(
          verifyWebhook([oldSecret, newSecret], after.headers, after.body, { now: time.now }),
          'a receiver holding both still verifies',
        );
        assert.throws(
          () => verifyWebhook(oldSecret, after.headers, after.body, { now: time.now }),
          /No webhook-signature matches/,
        );
        assert.is(calls.length, 3);
      } finally {
        await worker.stop();
      }
    }),
  );

  test(
    "ed25519: calls carry v1a signatures that Node's crypto verifies with the public key; across a rotation both keys sign, then the new one",
    withStorage(factory, async (storage, { db }) => {
      const time = manualClock();
      const calls: WebhookCall[] = [];
      const transport: WebhookTransport = {
        send: async (call) => (calls.push(call), { statusCode: 200, headers: {}, error: null }),
      };
      const worker = createWebhookWorker({
        storage,
        transport,
        clock: time.clock,
        logger: silentLogger,
        tick: NEVER,
        timeoutMs: 5_000,
        concurrency: 4,
        retrySchedule: [60],
      });
      const webhooks = createWebhookService({
        storage,
        clock: time.clock,
        eventTypes: ['customer-created'],
        signer: createLinkSigner(['a-signing-key-of-the-rotation-tests-0123']),
      });
      try {
        const created = await webhooks.create('acct_a', {
          type: 'customer-created',
          url: 'https://receiver.example/ed',
          signatureScheme: 'ed25519',
        });
        assert.equal(
          Object.keys(created),
          ['id', 'type', 'url', 'createdAt', 'signatureScheme', 'publicKey'],
          'no secret in the API shape',
        );
        assert.match(created.publicKey!, /^whpk_[A-Za-z0-9+/]{43}=$/);
        const stored = (await db.webhook(created.id))!;
        assert.match(stored.secret, /^whsk_[A-Za-z0-9+/]{43}=$/, 'the private key is stored as a secret is');
        assert.equal(await webhooks.get('acct_a', created.id), created);

        await storage.publishEvents([eventRecord({ createdAt: atom(time.now) })]);
        await worker.tick();
        const first = calls.at(-1)!;
        assert.match(first.headers['webhook-signature']!, /^v1a,[A-Za-z0-9+/]{86}==$/);
        assert.equal(nodeVerdicts([created.publicKey!], first), [true], 'verified by node:crypto alone');
        assert.ok(
          verifyWebhook(created.publicKey!, first.headers, first.body, { now: time.now }),
          'and by verifyWebhook with the whpk_ key',
        );

        const rotated = (await webhooks.rotateSecret('acct_a', created.id, { graceMs: 60_000 }))!;
        assert.is.not(rotated.publicKey, created.publicKey);
        assert.equal(Object.keys(rotated), ['id', 'type', 'url', 'createdAt', 'signatureScheme', 'publicKey']);
        await storage.publishEvents([eventRecord({ createdAt: atom(time.now) })]);
        await worker.tick();
        const during = calls.at(-1)!;
        assert.match(
          during.headers['webhook-signature']!,
          /^v1a,\S{88} v1a,\S{88}$/,
          "two v1a signatures, the new key's first",
        );
        assert.equal(nodeVerdicts([rotated.publicKey!, created.publicKey!], during), [true, true]);
        assert.ok(
          verifyWebhook([created.publicKey!], during.headers, during.body, { now: time.now }),
          'the old key alone still verifies',
        );
        const keys = (await webhooks.publicKeys('acct_a', created.id, 'https://portal.example/v1'))!.keys;
        assert.equal(
          keys.map((key) => [key.kid, key.status]),
          [
            [rotated.publicKey, 'current'],
            [created.publicKey, 'previous'],
          ],
        );

        time.advance(60);
        await storage.publishEvents([eventRecord({ createdAt: atom(time.now) })]);
        await worker.tick();
        const after = calls.at(-1)!;
        assert.equal(
          nodeVerdicts([rotated.publicKey!, created.publicKey!], after),
          [true, false],
          'the new key alone after the grace',
        );
        assert.throws(
          () => verifyWebhook(created.publicKey!, after.headers, after.body, { now: time.now }),
          /No webhook-signature matches/,
        );
        assert.throws(
          () => verifyWebhook(stored.secret, after.headers, after.body, { now: time.now }),
          /secret/,
          'a private key is no verifying key',
        );
      } finally {
        await worker.stop();
      }
    }),
  );

  test(
    'rotation: graceMs 0 signs with the new secret alone at once; a missing or foreign webhook is null',
    withStorage(factory, async (storage, { db }) => {
      const time = manualClock();
      const webhooks = createWebhookService({
        storage,
        clock: time.clock,
        eventTypes: ['customer-created'],
        signer: createLinkSigner(['a-signing-key-of-the-rotation-tests-0123']),
      });
      const webhook = webhookRecord({ createdAt: atom(time.now) });
      await storage.insertWebhook(webhook);
      const rotated = (await webhooks.rotateSecret('acct_a', webhook.id, { graceMs: 0 }))!;
      assert.equal(await db.webhook(webhook.id), { ...webhook, secret: rotated.secret });
      assert.equal(
        Object.keys(rotated),
        ['id', 'type', 'url', 'secret', 'createdAt'],
        'the API shape: no previous secret',
      );
      assert.is(await webhooks.rotateSecret('acct_b', webhook.id), null);
      assert.is(await webhooks.rotateSecret('acct_a', 'wbh_missing'), null);
      assert.equal((await db.webhook(webhook.id))!.secret, rotated.secret, 'unchanged by the refused rotations');
    }),
  );
}
