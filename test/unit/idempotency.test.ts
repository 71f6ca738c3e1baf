import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { memoryBlobs, memoryStorage } from '../../adapters/memory/index.js';
import { isPortalError } from '../../src/errors.js';
import {
  IDEMPOTENCY_TTL_MS,
  createIdempotency,
  fingerprintOf,
  parseIdempotencyKey,
} from '../../src/domain/idempotency.js';
import { createOrphanSweep } from '../../src/domain/orphan-sweep.js';
import { silentLogger } from '../../src/shared/logger.js';
import { webhookRecord } from '../conformance/fixtures.js';

const code = (run: () => unknown) => {
  try {
    run();
  } catch (error) {
    return (error as { code?: string }).code;
  }
  return undefined;
};

test('parseIdempotencyKey: a bare key or a structured-field String; anything else is IDEMPOTENCY_KEY_INVALID', () => {
  assert.is(parseIdempotencyKey(undefined), undefined);
  assert.is(parseIdempotencyKey('abc-123'), 'abc-123');
  assert.is(parseIdempotencyKey('"abc-123"'), 'abc-123');
  assert.is(parseIdempotencyKey('"a\\"b\\\\c"'), 'a"b\\c', 'the escapes of an sf-string');
  assert.is(parseIdempotencyKey('a"b'), 'a"b', 'a quote inside a bare key is visible ASCII');
  assert.is(parseIdempotencyKey('~'.repeat(255)), '~'.repeat(255));
  for (const bad of [
    '',
    ' ',
    '"',
    '""',
    '"abc',
    '"a"b"',
    '"a b"',
    'a b',
    'é',
    '\u0001',
    '~'.repeat(256),
    `"${'a'.repeat(256)}"`,
  ]) {
    assert.is(
      code(() => parseIdempotencyKey(bad)),
      'IDEMPOTENCY_KEY_INVALID',
      JSON.stringify(bad),
    );
  }
  assert.is(
    code(() => parseIdempotencyKey(['a', 'b'])),
    'IDEMPOTENCY_KEY_INVALID',
  );
});

test('fingerprintOf: the operation and the request, as JSON; equal requests match, any change does not', () => {
  const a = fingerprintOf('POST /webhooks', { type: 't', url: 'u' });
  assert.match(a, /^[0-9a-f]{64}$/);
  assert.is(fingerprintOf('POST /webhooks', { type: 't', url: 'u' }), a);
  assert.is.not(fingerprintOf('POST /webhooks', { type: 't', url: 'v' }), a);
  assert.is.not(fingerprintOf('POST /agreements', { type: 't', url: 'u' }), a);
});

test('begin: a held claim is a 409; a completed key with another fingerprint a 422, with the same its answer', async () => {
  const storage = memoryStorage();
  const idempotency = createIdempotency({ storage, clock: () => new Date('2026-01-01T00:00:00Z') });
  const start = await idempotency.begin('acct_a', 'k', 'f1');
  assert.ok(start.claim);
  const error = await idempotency.begin('acct_a', 'k', 'f1').catch((caught: unknown) => caught);
  assert.ok(isPortalError(error, 'IDEMPOTENCY_KEY_IN_PROGRESS'));
  const answer = { status: 201, body: '{"a":1}', location: null };
  await storage.insertWebhook(webhookRecord(), undefined, idempotency.completion(start.claim!, 'f1', answer));
  const reused = await idempotency.begin('acct_a', 'k', 'f2').catch((caught: unknown) => caught);
  assert.ok(isPortalError(reused, 'IDEMPOTENCY_KEY_REUSED'));
  const again = await idempotency.begin('acct_a', 'k', null);
  assert.equal(idempotency.replay(again.completed!, 'f1'), { answer, replayed: true });
  assert.is(
    code(() => idempotency.replay(again.completed!, 'f2')),
    'IDEMPOTENCY_KEY_REUSED',
  );
});

test('release: a storage that fails to free the key is logged, never thrown: the claim lapses by itself', async () => {
  const warnings: string[] = [];
  const storage = { ...memoryStorage(), releaseIdempotencyKey: () => Promise.reject(new Error('down')) };
  const logger = { ...silentLogger, warn: (_fields: object, message: string) => void warnings.push(message) };
  const idempotency = createIdempotency({ storage, clock: () => new Date(), logger });
  await idempotency.release({ accountId: 'acct_a', key: 'k', token: 't' });
  assert.equal(warnings, ['could not release an Idempotency-Key; it is free again once its claim lapses']);
});

test('the orphan sweep removes expired idempotency keys with its run', async () => {
  let now = new Date('2026-01-01T00:00:00Z');
  const clock = () => now;
  const storage = memoryStorage();
  const idempotency = createIdempotency({ storage, clock });
  const start = await idempotency.begin('acct_a', 'k', 'f');
  await storage.insertWebhook(
    webhookRecord(),
    undefined,
    idempotency.completion(start.claim!, 'f', { status: 201, body: '{}', location: null }),
  );
  const sweep = createOrphanSweep({ storage, blobs: memoryBlobs({ clock }), clock, logger: silentLogger });
  await sweep.tick();
  assert.is(await storage.sweepIdempotencyKeys('2026-01-01T23:59:59+00:00', 10), 0, 'a live answer is kept');
  now = new Date(now.getTime() + IDEMPOTENCY_TTL_MS);
  await sweep.tick();
  assert.is(await storage.sweepIdempotencyKeys('2099-01-01T00:00:00+00:00', 10), 0, 'the run removed it already');
  assert.ok((await idempotency.begin('acct_a', 'k', 'other')).claim, 'the key is free');
});

test.run();
