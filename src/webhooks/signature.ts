import { type KeyObject, createHmac, createSecretKey, timingSafeEqual } from 'node:crypto';
import type { PortalEvent } from '../records.js';
import { publicKeyObject, schemeOf, signEd25519, verifyEd25519 } from '../shared/webhook-keys.js';

/** How far a `webhook-timestamp` may be from the receiver's clock, either way: five minutes. */
const WEBHOOK_TOLERANCE_SECONDS = 5 * 60;

/** Why a call did not verify; `reason` names it for code, `message` for people. */
export type WebhookVerificationFailure =
  | 'invalid-secret'
  | 'missing-header'
  | 'invalid-timestamp'
  | 'timestamp-too-old'
  | 'timestamp-too-new'
  | 'no-matching-signature'
  | 'invalid-payload'
  | 'body-not-raw';

/** Thrown by `verifyWebhook`; `reason` says which check failed. */
export class WebhookVerificationError extends Error {
  override readonly name = 'WebhookVerificationError';

  constructor(
    readonly reason: WebhookVerificationFailure,
    message: string,
  ) {
    super(message);
  }
}

/**
 * Decoded keys by secret: the worker signs every call, mostly for the same few webhooks. Kept as
 * `KeyObject`s: on Node 24, `createHmac` with a `Buffer` key cost 12–14 µs a call against 2.2 µs with
 * a `KeyObject`, most of the signing's share of a webhook worker's CPU (docs/performance.md,
 * "Figures behind the code": signing keys and fillfactor).
 */
const keys = new Map<string, KeyObject>();
const MAX_CACHED_KEYS = 1000;

/** The HMAC key of a `whsec_…` secret (the prefix may be left out when signing: the portal's own secrets). */
function secretKey(secret: string): KeyObject {
  if (typeof secret !== 'string')
    throw new WebhookVerificationError('invalid-secret', 'The webhook secret is not a string.');
  const cached = keys.get(secret);
  if (cached !== undefined) return cached;
  const encoded = secret.startsWith('whsec_') ? secret.slice('whsec_'.length) : secret;
  const key = /^[A-Za-z0-9+/]+={0,2}$/.test(encoded) ? Buffer.from(encoded, 'base64') : Buffer.alloc(0);
  if (key.length === 0)
    throw new WebhookVerificationError('invalid-secret', 'The webhook secret is not "whsec_" followed by base64.');
  if (keys.size >= MAX_CACHED_KEYS) keys.clear();
  const object = createSecretKey(key);
  keys.set(secret, object);
  return object;
}

function hmac(key: KeyObject, id: string, timestamp: number | string, body: string | Uint8Array): Buffer {
  return createHmac('sha256', key).update(`${id}.${timestamp}.`).update(body).digest();
}

/**
 * The `webhook-signature` value of a call under one secret, over `<id>.<timestamp>.<body>`: with a
 * `whsec_` secret `v1,` + base64 HMAC-SHA256, with a `whsk_` private key `v1a,` + base64 ed25519.
 */
export function signWebhook(secret: string, id: string, timestamp: number, body: string): string {
  if (schemeOf(secret) === 'ed25519')
    return 'v1a,' + signEd25519(secret, Buffer.from(`${id}.${timestamp}.${body}`)).toString('base64');
  return 'v1,' + hmac(secretKey(secret), id, timestamp, body).toString('base64');
}

/** A key `verifyWebhook` checks signatures with: an HMAC secret's bytes, or an ed25519 public key. */
type VerifyingKey = { hmac: KeyObject } | { ed25519: KeyObject };

function verifyingKey(key: string): VerifyingKey {
  if (typeof key === 'string' && key.startsWith('whpk_')) {
    const publicKey = publicKeyObject(key);
    if (publicKey === null)
      throw new WebhookVerificationError(
        'invalid-secret',
        'The public key is not "whpk_" followed by the base64 of 32 bytes.',
      );
    return { ed25519: publicKey };
  }
  // A receiver names which kind of key it holds. Taking an unprefixed key as an HMAC secret, as the
  // Standard Webhooks libraries do, lets anyone who reads a webhook's published public key (its
  // base64, given without "whpk_") forge v1 signatures with it.
  if (typeof key === 'string' && !key.startsWith('whsec_')) {
    throw new WebhookVerificationError(
      'invalid-secret',
      'The key has no prefix: pass the webhook secret as "whsec_…", or an ed25519 public key as "whpk_…", as the portal gave it.',
    );
  }
  return { hmac: secretKey(key) };
}

export type WebhookHeaders =
  | Headers
  | { get(name: string): string | null }
  | Readonly<Record<string, string | readonly string[] | undefined>>;

function headerOf(headers: WebhookHeaders, name: string): string | undefined {
  if (typeof (headers as Headers).get === 'function') return (headers as Headers).get(name) ?? undefined;
  const record = headers as Readonly<Record<string, string | readonly string[] | undefined>>;
  let value = record[name];
  if (value === undefined) {
    const key = Object.keys(record).find((candidate) => candidate.toLowerCase() === name);
    value = key === undefined ? undefined : record[key];
  }
  return Array.isArray(value) ? value.join(' ') : (value as string | undefined);
}

/**
 * Verifies a webhook call the portal made, as its receiver: the `webhook-signature` (any one of
 * several space-separated values; `X-Webhook-Signature` when that header is absent) and a
 * `webhook-timestamp` within five minutes of now. `secret` is the webhook's `whsec_` secret (its
 * `v1,` HMAC signatures compared in constant time) or, for a webhook signing with ed25519, its
 * `whpk_` public key (its `v1a,` signatures). It may be a list: during a rotation a receiver that
 * holds both the new and the old key accepts a call signed with either, and any one match verifies. Pass the body exactly as
 * received, as a string, a Buffer or a Uint8Array: a parsed body (an object) is refused with reason
`body-not-raw`, and a parsed and re-serialized one will not verify. Only the canonical base64 of a
signature counts: another spelling of the same bytes is no match. Returns the parsed event or throws a
 * `WebhookVerificationError`.
 */
export function verifyWebhook<T = PortalEvent>(
  secret: string | readonly string[],
  headers: WebhookHeaders,
  rawBody: string | Buffer | Uint8Array,
  options: { now?: Date; toleranceSeconds?: number } = {},
): T {
  if (typeof rawBody !== 'string' && !(rawBody instanceof Uint8Array)) {
    // The most common receiver mistake: a framework's JSON parser ran first (express.json(), Fastify's default).
    throw new WebhookVerificationError(
      'body-not-raw',
      `The body must be the raw bytes or string as received, not parsed JSON (got ${rawBody === null ? 'null' : typeof rawBody}): ` +
        'read it with express.raw({ type: "application/json" }), or a Fastify content-type parser with parseAs: "buffer".',
    );
  }
  const secrets: readonly string[] = typeof secret === 'string' ? [secret] : secret;
  if (!Array.isArray(secrets) || secrets.length === 0) {
    throw new WebhookVerificationError(
      'invalid-secret',
      'No webhook secret was given: pass a "whsec_…" secret, a "whpk_…" public key, or a list of them.',
    );
  }
  const keys = secrets.map((one) => verifyingKey(one));
  const id = headerOf(headers, 'webhook-id');
  const timestamp = headerOf(headers, 'webhook-timestamp');
  const signatures = headerOf(headers, 'webhook-signature') ?? headerOf(headers, 'x-webhook-signature');
  for (const [name, value] of [
    ['webhook-id', id],
    ['webhook-timestamp', timestamp],
    ['webhook-signature', signatures],
  ] as const) {
    if (value === undefined || value === '')
      throw new WebhookVerificationError('missing-header', `The ${name} header is missing.`);
  }
  if (!/^\d{1,15}$/.test(timestamp!)) {
    throw new WebhookVerificationError('invalid-timestamp', 'The webhook-timestamp header is not a number of seconds.');
  }
  const now = Math.floor((options.now ?? new Date()).getTime() / 1000);
  const tolerance = options.toleranceSeconds ?? WEBHOOK_TOLERANCE_SECONDS;
  const sent = Number(timestamp);
  if (now - sent > tolerance)
    throw new WebhookVerificationError('timestamp-too-old', 'The webhook-timestamp is more than five minutes old.');
  if (sent - now > tolerance)
    throw new WebhookVerificationError(
      'timestamp-too-new',
      'The webhook-timestamp is more than five minutes in the future.',
    );

  const expected = keys.flatMap((key) => ('hmac' in key ? [hmac(key.hmac, id!, timestamp!, rawBody)] : []));
  const publicKeys = keys.flatMap((key) => ('ed25519' in key ? [key.ed25519] : []));
  const message =
    publicKeys.length === 0 ? undefined : Buffer.concat([Buffer.from(`${id}.${timestamp}.`), Buffer.from(rawBody)]);
  let matched = false;
  for (const candidate of signatures!.split(' ')) {
    const [version, encoded] = candidate.split(',', 2);
    if ((version !== 'v1' && version !== 'v1a') || encoded === undefined) continue;
    const given = Buffer.from(encoded, 'base64');
    // Only the canonical spelling: Node's decoder skips characters it does not know, takes the URL-safe
    // alphabet and ignores padding and the unused low bits, so many strings decode to the same bytes.
    // Re-encoding tells them apart, and depends only on what was given, never on the expected bytes.
    if (given.toString('base64') !== encoded) continue;
    if (version === 'v1a') {
      // A public key holds no secret: checked against each, in any time.
      for (const publicKey of publicKeys) if (verifyEd25519(publicKey, message!, given)) matched = true;
      continue;
    }
    // Lengths are public (a SHA-256 is 32 bytes); the bytes are compared in constant time, with
    // every secret's, and no early exit: the time taken does not tell which secret matched.
    for (const bytes of expected) {
      if (given.length === bytes.length && timingSafeEqual(given, bytes)) matched = true;
    }
  }
  if (!matched)
    throw new WebhookVerificationError('no-matching-signature', 'No webhook-signature matches the body and secret.');

  try {
    return JSON.parse(
      typeof rawBody === 'string'
        ? rawBody
        : Buffer.from(rawBody.buffer, rawBody.byteOffset, rawBody.byteLength).toString('utf8'),
    ) as T;
  } catch {
    throw new WebhookVerificationError('invalid-payload', 'The webhook body is signed but is not JSON.');
  }
}
