import { generateKeyPairSync } from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { verifyWebhook, WebhookVerificationError, type WebhookVerificationFailure } from '../../src/index.js';
import { signWebhook } from '../../src/webhooks/signature.js';

const SECRET = 'whsec_' + Buffer.alloc(32, 42).toString('base64');
const OTHER_SECRET = 'whsec_' + Buffer.alloc(32, 43).toString('base64');
const NOW = new Date('2026-03-01T12:00:00Z');
const SECONDS = Math.floor(NOW.getTime() / 1000);
const BODY = JSON.stringify({
  id: 'evt_1',
  type: 'customer-created',
  createdAt: '2026-03-01T12:00:00+00:00',
  data: { name: 'Zoë' },
});

function signed(overrides: Record<string, string> = {}, secret = SECRET, body = BODY, timestamp = SECONDS) {
  const signature = signWebhook(secret, 'evt_1', timestamp, body);
  return {
    'webhook-id': 'evt_1',
    'webhook-timestamp': String(timestamp),
    'webhook-signature': signature,
    ...overrides,
  };
}

function failure(run: () => unknown): WebhookVerificationFailure {
  try {
    run();
  } catch (error) {
    assert.instance(error, WebhookVerificationError);
    assert.instance(error, Error);
    assert.is((error as Error).name, 'WebhookVerificationError');
    assert.ok((error as Error).message.length > 10, 'a sentence for people');
    return (error as WebhookVerificationError).reason;
  }
  throw new Error('expected verifyWebhook to throw');
}

test('the signature is the one the Standard Webhooks library makes', () => {
  const reference = new Webhook(SECRET).sign('evt_1', NOW, BODY);
  assert.is(signWebhook(SECRET, 'evt_1', SECONDS, BODY), reference);
  assert.match(reference, /^v1,[A-Za-z0-9+/]{43}=$/);
});

test('a call signed by the Standard Webhooks library verifies and the parsed body comes back', () => {
  const signature = new Webhook(SECRET).sign('evt_1', NOW, BODY);
  const headers = { 'webhook-id': 'evt_1', 'webhook-timestamp': String(SECONDS), 'webhook-signature': signature };
  assert.equal(verifyWebhook(SECRET, headers, BODY, { now: NOW }), JSON.parse(BODY));
  assert.equal(verifyWebhook(SECRET, headers, Buffer.from(BODY), { now: NOW }), JSON.parse(BODY), 'a Buffer body');
});

test('headers may be a Headers object, or a plain object with any case and array values', () => {
  const plain = signed();
  assert.ok(verifyWebhook(SECRET, new Headers(plain), BODY, { now: NOW }));
  const shouting = Object.fromEntries(Object.entries(plain).map(([name, value]) => [name.toUpperCase(), value]));
  assert.ok(verifyWebhook(SECRET, shouting, BODY, { now: NOW }));
  assert.ok(
    verifyWebhook(SECRET, { ...plain, 'webhook-signature': ['v1,bm9wZQ==', plain['webhook-signature']] }, BODY, {
      now: NOW,
    }),
  );
});

test('any one of several space-separated signatures may match; other versions are ignored', () => {
  const good = signed()['webhook-signature'];
  const bad = signWebhook(OTHER_SECRET, 'evt_1', SECONDS, BODY);
  const many = `v1a,${good.slice(3)} v2,${good.slice(3)} ${bad} ${good}`;
  assert.ok(verifyWebhook(SECRET, signed({ 'webhook-signature': many }), BODY, { now: NOW }));
  assert.is(
    failure(() =>
      verifyWebhook(SECRET, signed({ 'webhook-signature': `${bad} v2,${good.slice(3)}` }), BODY, { now: NOW }),
    ),
    'no-matching-signature',
  );
});

test('X-Webhook-Signature stands in when webhook-signature is absent', () => {
  const { 'webhook-signature': signature, ...rest } = signed();
  assert.ok(verifyWebhook(SECRET, { ...rest, 'X-Webhook-Signature': signature }, BODY, { now: NOW }));
});

test('a changed body, id, timestamp or secret does not verify', () => {
  const headers = signed();
  assert.is(
    failure(() => verifyWebhook(SECRET, headers, BODY.replace('Zoë', 'Zoe'), { now: NOW })),
    'no-matching-signature',
  );
  assert.is(
    failure(() => verifyWebhook(SECRET, { ...headers, 'webhook-id': 'evt_2' }, BODY, { now: NOW })),
    'no-matching-signature',
  );
  assert.is(
    failure(() => verifyWebhook(SECRET, { ...headers, 'webhook-timestamp': String(SECONDS - 1) }, BODY, { now: NOW })),
    'no-matching-signature',
  );
  assert.is(
    failure(() => verifyWebhook(OTHER_SECRET, headers, BODY, { now: NOW })),
    'no-matching-signature',
  );
  const truncated = headers['webhook-signature'].slice(0, -4);
  assert.is(
    failure(() => verifyWebhook(SECRET, { ...headers, 'webhook-signature': truncated }, BODY, { now: NOW })),
    'no-matching-signature',
  );
});

test('the timestamp must be within five minutes either way', () => {
  const at = (offset: number) => signed({}, SECRET, BODY, SECONDS + offset);
  assert.ok(verifyWebhook(SECRET, at(-300), BODY, { now: NOW }));
  assert.ok(verifyWebhook(SECRET, at(300), BODY, { now: NOW }));
  assert.is(
    failure(() => verifyWebhook(SECRET, at(-301), BODY, { now: NOW })),
    'timestamp-too-old',
  );
  assert.is(
    failure(() => verifyWebhook(SECRET, at(301), BODY, { now: NOW })),
    'timestamp-too-new',
  );
  assert.is(
    failure(() => verifyWebhook(SECRET, signed({ 'webhook-timestamp': '1e9' }), BODY, { now: NOW })),
    'invalid-timestamp',
  );
  assert.is(
    failure(() => verifyWebhook(SECRET, signed({ 'webhook-timestamp': '-5' }), BODY, { now: NOW })),
    'invalid-timestamp',
  );
  // Without `now`, the real clock decides: a call signed a minute ago verifies, one from 2026-03-01 need not.
  const recent = Math.floor(Date.now() / 1000) - 60;
  assert.ok(verifyWebhook(SECRET, signed({}, SECRET, BODY, recent), BODY));
});

test('each missing header is named', () => {
  for (const name of ['webhook-id', 'webhook-timestamp', 'webhook-signature'] as const) {
    const headers: Record<string, string> = signed();
    delete headers[name];
    let message = '';
    try {
      verifyWebhook(SECRET, headers, BODY, { now: NOW });
    } catch (error) {
      assert.is((error as WebhookVerificationError).reason, 'missing-header');
      message = (error as Error).message;
    }
    assert.match(message, name);
  }
});

test('a secret that is not whsec_ + base64 is refused; so is a key without its prefix', () => {
  assert.is(
    failure(() => verifyWebhook('whsec_', signed(), BODY, { now: NOW })),
    'invalid-secret',
  );
  assert.is(
    failure(() => verifyWebhook('whsec_not base64!', signed(), BODY, { now: NOW })),
    'invalid-secret',
  );
  assert.is(
    failure(() => verifyWebhook(SECRET.slice('whsec_'.length), signed(), BODY, { now: NOW })),
    'invalid-secret',
  );
});

test('an ed25519 public key given without whpk_ is not taken as an HMAC secret: a v1 signature forged with it is refused', () => {
  // The public key is published on an open link; anyone can sign HMAC with its base64.
  const { publicKey } = generateKeyPairSync('ed25519');
  const raw = publicKey.export({ format: 'der', type: 'spki' }).subarray(-32).toString('base64');
  const forged = signed({}, `whsec_${raw}`);
  assert.is(
    failure(() => verifyWebhook(raw, forged, BODY, { now: NOW })),
    'invalid-secret',
  );
  assert.is(
    failure(() => verifyWebhook([`whpk_${raw}`, raw], forged, BODY, { now: NOW })),
    'invalid-secret',
  );
  assert.is(
    failure(() => verifyWebhook(`whpk_${raw}`, forged, BODY, { now: NOW })),
    'no-matching-signature',
  );
});

test("a list of secrets: a call signed with any one of them verifies (a rotation's old and new secret)", () => {
  const byOld = signed({}, OTHER_SECRET);
  const byBoth = signed({ 'webhook-signature': `${signed()['webhook-signature']} ${byOld['webhook-signature']}` });
  for (const headers of [signed(), byOld, byBoth])
    assert.ok(verifyWebhook([SECRET, OTHER_SECRET], headers, BODY, { now: NOW }));
  assert.ok(
    verifyWebhook([OTHER_SECRET], byBoth, BODY, { now: NOW }),
    'the old secret alone verifies a call signed with both',
  );
  assert.ok(verifyWebhook([SECRET], byBoth, BODY, { now: NOW }), 'and so does the new one');
  const third = 'whsec_' + Buffer.alloc(32, 44).toString('base64');
  assert.is(
    failure(() => verifyWebhook([third], byBoth, BODY, { now: NOW })),
    'no-matching-signature',
  );
  assert.is(
    failure(() => verifyWebhook([], signed(), BODY, { now: NOW })),
    'invalid-secret',
  );
  assert.is(
    failure(() => verifyWebhook([SECRET, 'whsec_'], signed(), BODY, { now: NOW })),
    'invalid-secret',
    'every secret is checked',
  );
  assert.is(
    failure(() => verifyWebhook(undefined as never, signed(), BODY, { now: NOW })),
    'invalid-secret',
  );
});

test('a signed body that is not JSON is reported as such, after the signature checked out', () => {
  const body = 'not json';
  assert.is(
    failure(() => verifyWebhook(SECRET, signed({}, SECRET, body), body, { now: NOW })),
    'invalid-payload',
  );
});

test('only the canonical base64 of a signature verifies: other spellings of the same bytes do not', () => {
  const headers = signed();
  const good = headers['webhook-signature'];
  const encoded = good.slice(3);
  const bytes = Buffer.from(encoded, 'base64');
  assert.ok(verifyWebhook(SECRET, headers, BODY, { now: NOW }), 'the canonical spelling');
  // The last character before "=" carries two padding bits; each other value of them decodes to the same bytes.
  const last = encoded.at(-2)!;
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
  const index = alphabet.indexOf(last);
  const spellings = [
    encoded.slice(0, -1), // no padding
    encoded + '=', // too much padding
    bytes.toString('base64url'), // the URL-safe alphabet
    ` ${encoded}`.replace(' ', '\t'),
    encoded.slice(0, 10) + '\n' + encoded.slice(10),
    encoded.slice(0, 20) + '.' + encoded.slice(20),
    ...[1, 2, 3].map((bits) => encoded.slice(0, -2) + alphabet[(index & ~3) | ((index + bits) & 3)] + '='),
  ].filter((spelling) => spelling !== encoded);
  for (const spelling of spellings) {
    assert.ok(
      Buffer.from(spelling, 'base64').equals(bytes) || Buffer.from(spelling, 'base64url').equals(bytes),
      `${JSON.stringify(spelling)} decodes to the same bytes`,
    );
    assert.is(
      failure(() => verifyWebhook(SECRET, signed({ 'webhook-signature': `v1,${spelling}` }), BODY, { now: NOW })),
      'no-matching-signature',
      JSON.stringify(spelling),
    );
  }
  // A canonical signature beside a non-canonical one still verifies.
  assert.ok(verifyWebhook(SECRET, signed({ 'webhook-signature': `v1,${spellings[0]} ${good}` }), BODY, { now: NOW }));
});

test("a parsed body (an object) is refused with the library's error, saying to pass the raw bytes or string", () => {
  const headers = signed();
  for (const body of [JSON.parse(BODY), { ...JSON.parse(BODY) }, [1, 2], 42, null, undefined]) {
    try {
      verifyWebhook(SECRET, headers, body as never, { now: NOW });
      assert.unreachable('expected a throw');
    } catch (error) {
      assert.instance(error, WebhookVerificationError, String(body));
      assert.is((error as WebhookVerificationError).reason, 'body-not-raw');
      assert.match((error as Error).message, /raw bytes or string/);
      assert.match((error as Error).message, /not parsed JSON/);
    }
  }
  // Raw bytes in a plain Uint8Array are raw bytes too.
  assert.ok(verifyWebhook(SECRET, headers, new TextEncoder().encode(BODY) as never, { now: NOW }));
});

test.run();
