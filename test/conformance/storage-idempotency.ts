import type { Test } from 'uvu';
import * as assert from 'uvu/assert';
import { isPortalError } from '../../src/errors.js';
import type { IdempotencyClaim } from '../../src/ports.js';
import type { IdempotencyCompletion, IdempotencyRecord } from '../../src/records.js';
import { randomBytes } from 'node:crypto';
import type { StorageFactory } from './types.js';
import { agreementRecord, eventRecord, webhookRecord } from './fixtures.js';
import { reopenable } from './reopen.js';
import { withStorage } from './with-storage.js';

const NOW = '2026-01-01T00:00:00+00:00';
const LEASE_END = '2026-01-01T00:05:00+00:00';
const ANSWER_END = '2026-01-02T00:00:00+00:00';

const claimOf = (overrides: Partial<IdempotencyClaim> = {}): IdempotencyClaim => ({
  accountId: 'acct_a',
  key: 'key-1',
  token: randomBytes(12).toString('base64url'),
  fingerprint: null,
  now: NOW,
  leaseUntil: LEASE_END,
  ...overrides,
});

/** An answer with what a byte-for-byte store must keep: escapes, non-ASCII, a line separator. */
const BODY = '{"id":"wbh_x","name":"Ünïcødé \\u2028 \\"quoted\\"","n":1.50}';

const completionOf = (
  claim: IdempotencyClaim,
  overrides: Partial<IdempotencyCompletion> = {},
): IdempotencyCompletion => ({
  key: claim.key,
  token: claim.token,
  fingerprint: 'f'.repeat(64),
  answer: { status: 201, body: BODY, location: 'https://portal.example/v1/webhooks/wbh_x' },
  expiresAt: ANSWER_END,
  ...overrides,
});

const inProgress = (error: unknown) => isPortalError(error, 'IDEMPOTENCY_KEY_IN_PROGRESS');

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error('expected a rejection');
}

export function idempotencyStorageTests(test: Test, factory: StorageFactory): void {
  test(
    'idempotency: the first claim holds the key; a second sees that claim; another account or key is free',
    withStorage(factory, async (storage) => {
      const first = claimOf({ fingerprint: 'a'.repeat(64) });
      assert.is(await storage.claimIdempotencyKey(first), null);
      const held = (await storage.claimIdempotencyKey(claimOf()))!;
      assert.equal(
        { ...held },
        {
          accountId: 'acct_a',
          key: 'key-1',
          status: 'pending',
          token: first.token,
          fingerprint: 'a'.repeat(64),
          answer: null,
          createdAt: NOW,
          expiresAt: LEASE_END,
        },
      );
      assert.is(await storage.claimIdempotencyKey(claimOf({ accountId: 'acct_b' })), null, 'keys are per account');
      assert.is(await storage.claimIdempotencyKey(claimOf({ key: 'KEY-1' })), null, 'keys are compared exactly');
    }),
  );

  test(
    'idempotency: concurrent claims of one key: exactly one holds it',
    withStorage(factory, async (storage) => {
      const claims = Array.from({ length: 12 }, () => claimOf());
      const results = await Promise.all(claims.map((claim) => storage.claimIdempotencyKey(claim)));
      const holders = claims.filter((_, i) => results[i] === null);
      assert.is(holders.length, 1);
      for (const result of results) if (result !== null) assert.is(result.token, holders[0]!.token);
    }),
  );

  test(
    'idempotency: insertWebhook completes the claim with the record: later claims get the answer byte for byte',
    withStorage(factory, async (storage, { db }) => {
      const claim = claimOf();
      await storage.claimIdempotencyKey(claim);
      const webhook = webhookRecord();
      await storage.insertWebhook(webhook, { maxPerAccount: 5 }, completionOf(claim));
      assert.equal(await db.webhook(webhook.id), webhook);
      const held = (await storage.claimIdempotencyKey(claimOf({ now: '2026-01-01T23:59:59+00:00' })))!;
      assert.is(held.status, 'completed');
      assert.is(held.fingerprint, 'f'.repeat(64));
      assert.equal(held.answer, { status: 201, body: BODY, location: 'https://portal.example/v1/webhooks/wbh_x' });
      assert.is(held.expiresAt, ANSWER_END);
      const stored = (await db.idempotencyKey('acct_a', 'key-1'))!;
      assert.is(stored.answer!.body, BODY, 'stored as given');
      assert.is(stored.status, 'completed');
      assert.is(
        await storage.releaseIdempotencyKey('acct_a', 'key-1', claim.token),
        false,
        'a completed key is not released',
      );
    }),
  );

  test(
    'idempotency: insertAgreement completes the claim with the agreement and its events, in one step',
    withStorage(factory, async (storage, { db }) => {
      const claim = claimOf();
      await storage.claimIdempotencyKey(claim);
      const agreement = agreementRecord();
      const event = eventRecord({ type: 'agreement-created' });
      await storage.insertAgreement(
        agreement,
        [event],
        completionOf(claim, { answer: { status: 201, body: '{}', location: null } }),
      );
      assert.ok(await storage.getAgreement('acct_a', agreement.id));
      assert.ok(await db.event(event.id));
      assert.equal((await db.idempotencyKey('acct_a', 'key-1'))!.answer, { status: 201, body: '{}', location: null });
    }),
  );

  test(
    'idempotency: an insert whose claim lapsed and was taken over rejects with IDEMPOTENCY_KEY_IN_PROGRESS and stores nothing',
    withStorage(factory, async (storage, { db }) => {
      const slow = claimOf();
      await storage.claimIdempotencyKey(slow);
      const retry = claimOf({ now: LEASE_END, leaseUntil: '2026-01-01T00:10:00+00:00' });
      assert.is(await storage.claimIdempotencyKey(retry), null, 'a claim whose lease ended is taken over');
      const webhook = webhookRecord();
      assert.ok(inProgress(await rejection(storage.insertWebhook(webhook, undefined, completionOf(slow)))));
      assert.is(await db.webhook(webhook.id), null);
      const agreement = agreementRecord();
      const event = eventRecord({ type: 'agreement-created' });
      assert.ok(inProgress(await rejection(storage.insertAgreement(agreement, [event], completionOf(slow)))));
      assert.is(await storage.getAgreement('acct_a', agreement.id), null);
      assert.is(await db.event(event.id), null);
      assert.is(await db.idempotencyKey('acct_a', 'key-1'), null);
      // The request that took the key over completes it.
      await storage.insertWebhook(webhookRecord(), undefined, completionOf(retry, { fingerprint: 'e'.repeat(64) }));
      assert.is((await db.idempotencyKey('acct_a', 'key-1'))!.fingerprint, 'e'.repeat(64));
      assert.is(await storage.releaseIdempotencyKey('acct_a', 'key-1', slow.token), false);
    }),
  );

  test(
    'idempotency: a token that never claimed the key completes nothing',
    withStorage(factory, async (storage, { db }) => {
      const webhook = webhookRecord();
      assert.ok(inProgress(await rejection(storage.insertWebhook(webhook, undefined, completionOf(claimOf())))));
      assert.is(await db.webhook(webhook.id), null);
    }),
  );

  test(
    "idempotency: an insert refused for the account's limit leaves the key claimed, not completed",
    withStorage(factory, async (storage, { db }) => {
      const claim = claimOf();
      await storage.claimIdempotencyKey(claim);
      const error = await rejection(storage.insertWebhook(webhookRecord(), { maxPerAccount: 0 }, completionOf(claim)));
      assert.ok(isPortalError(error, 'WEBHOOKS_LIMIT'), String(error));
      assert.is(await db.idempotencyKey('acct_a', 'key-1'), null);
      assert.is((await storage.claimIdempotencyKey(claimOf()))!.status, 'pending');
    }),
  );

  test(
    'idempotency: release frees a pending claim for its own token only',
    withStorage(factory, async (storage) => {
      const claim = claimOf();
      await storage.claimIdempotencyKey(claim);
      assert.is(await storage.releaseIdempotencyKey('acct_a', 'key-1', 'tok_other'), false);
      assert.is(await storage.releaseIdempotencyKey('acct_b', 'key-1', claim.token), false);
      assert.is((await storage.claimIdempotencyKey(claimOf()))!.token, claim.token, 'still held');
      assert.is(await storage.releaseIdempotencyKey('acct_a', 'key-1', claim.token), true);
      assert.is(await storage.releaseIdempotencyKey('acct_a', 'key-1', claim.token), false);
      assert.is(await storage.claimIdempotencyKey(claimOf()), null, 'free again');
    }),
  );

  test(
    'idempotency: an answer past its expiry is as absent: a new claim takes the key over',
    withStorage(factory, async (storage, { db }) => {
      const claim = claimOf();
      await storage.claimIdempotencyKey(claim);
      await storage.insertWebhook(webhookRecord(), undefined, completionOf(claim));
      const later = claimOf({ now: ANSWER_END, leaseUntil: '2026-01-02T00:05:00+00:00' });
      assert.is(await storage.claimIdempotencyKey(later), null);
      assert.is((await storage.claimIdempotencyKey(claimOf({ now: ANSWER_END })))!.token, later.token);
      await storage.insertWebhook(
        webhookRecord(),
        undefined,
        completionOf(later, { expiresAt: '2026-01-03T00:00:00+00:00' }),
      );
      assert.is((await db.idempotencyKey('acct_a', 'key-1'))!.expiresAt, '2026-01-03T00:00:00+00:00');
    }),
  );

  test(
    'idempotency: the sweep removes expired answers and lapsed claims, at most `limit`, and keeps live ones',
    withStorage(factory, async (storage, { db }) => {
      const complete = async (key: string, expiresAt: string) => {
        const claim = claimOf({ key });
        assert.is(await storage.claimIdempotencyKey(claim), null);
        await storage.insertWebhook(webhookRecord(), undefined, completionOf(claim, { expiresAt }));
      };
      await complete('old-1', '2026-01-01T01:00:00+00:00');
      await complete('old-2', '2026-01-01T02:00:00+00:00');
      await complete('old-3', '2026-01-01T03:00:00+00:00');
      await complete('live', ANSWER_END);
      await storage.claimIdempotencyKey(claimOf({ key: 'lapsed', leaseUntil: '2026-01-01T00:05:00+00:00' }));
      await storage.claimIdempotencyKey(claimOf({ key: 'running', leaseUntil: '2026-01-01T12:00:00+00:00' }));
      const at = '2026-01-01T06:00:00+00:00';
      const first = await storage.sweepIdempotencyKeys(at, 2);
      assert.is(first, 2);
      assert.is(await storage.sweepIdempotencyKeys(at, 100), 2);
      assert.is(await storage.sweepIdempotencyKeys(at, 100), 0);
      for (const key of ['old-1', 'old-2', 'old-3']) assert.is(await db.idempotencyKey('acct_a', key), null, key);
      assert.ok(await db.idempotencyKey('acct_a', 'live'));
      assert.is((await storage.claimIdempotencyKey(claimOf({ key: 'running', now: at })))!.status, 'pending');
      assert.is((await storage.claimIdempotencyKey(claimOf({ key: 'live', now: at })))!.status, 'completed');
    }),
  );

  reopenable(test, factory)(
    'idempotency: a completed answer survives a reopen, byte for byte',
    withStorage(factory, async (storage, { swap }) => {
      const claim = claimOf();
      await storage.claimIdempotencyKey(claim);
      await storage.insertAgreement(agreementRecord(), [], completionOf(claim));
      const reopened = await swap();
      const held: IdempotencyRecord = (await reopened.claimIdempotencyKey(claimOf()))!;
      assert.is(held.status, 'completed');
      assert.equal(held.answer, completionOf(claim).answer);
      assert.is(held.fingerprint, 'f'.repeat(64));
    }),
  );
}
