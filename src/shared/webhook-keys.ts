import {
  type KeyObject,
  createPrivateKey,
  createPublicKey,
  generateKeyPairSync,
  randomBytes,
  sign,
  verify,
} from 'node:crypto';

/**
 * Webhook signing keys in the Standard Webhooks forms:
 * - `whsec_` + base64 of 32 random bytes: the HMAC-SHA256 secret of `v1,` signatures, which signs
 *   and verifies alike (the receiver holds it too);
 * - `whsk_` + base64 of an ed25519 private key's 32-byte seed: signs `v1a,` signatures, and never
 *   leaves the portal;
 * - `whpk_` + base64 of the matching 32-byte public key: verifies them, and may be published.
 */
export type SignatureScheme = 'hmac-sha256' | 'ed25519';

const SECRET_PREFIX = 'whsec_';
const PRIVATE_PREFIX = 'whsk_';
const PUBLIC_PREFIX = 'whpk_';
/** The DER prefixes that make a raw ed25519 seed a PKCS #8 key, and a raw public key an SPKI one (RFC 8410). */
const PKCS8_ED25519 = Buffer.from('302e020100300506032b657004220420', 'hex');
const SPKI_ED25519 = Buffer.from('302a300506032b6570032100', 'hex');
const BASE64 = /^[A-Za-z0-9+/]{43}=$/;

/** The scheme a stored secret signs with: its prefix says. */
export const schemeOf = (secret: string): SignatureScheme =>
  secret.startsWith(PRIVATE_PREFIX) ? 'ed25519' : 'hmac-sha256';

/** A new secret of `scheme`: `whsec_…`, or a new key pair's private half, `whsk_…`. */
export function newSigningSecret(scheme: SignatureScheme): string {
  if (scheme === 'hmac-sha256') return SECRET_PREFIX + randomBytes(32).toString('base64');
  const { privateKey } = generateKeyPairSync('ed25519');
  const seed = privateKey.export({ format: 'der', type: 'pkcs8' }).subarray(PKCS8_ED25519.length);
  return PRIVATE_PREFIX + seed.toString('base64');
}

/** Key objects by their text: the worker signs every call, mostly for the same few webhooks. */
const cache = new Map<string, KeyObject>();
const MAX_CACHED = 1000;

function cached(text: string, make: () => KeyObject): KeyObject {
  let key = cache.get(text);
  if (key === undefined) {
    key = make();
    if (cache.size >= MAX_CACHED) cache.clear();
    cache.set(text, key);
  }
  return key;
}

/** The private key of a `whsk_…` secret; throws when it is not one. */
function privateKeyOf(secret: string): KeyObject {
  return cached(secret, () => {
    const encoded = secret.slice(PRIVATE_PREFIX.length);
    if (!secret.startsWith(PRIVATE_PREFIX) || !BASE64.test(encoded))
      throw new Error('The signing key is not "whsk_" followed by the base64 of 32 bytes.');
    return createPrivateKey({
      key: Buffer.concat([PKCS8_ED25519, Buffer.from(encoded, 'base64')]),
      format: 'der',
      type: 'pkcs8',
    });
  });
}

/** The public key of a `whpk_…` key; `null` when it is not one. */
export function publicKeyObject(key: string): KeyObject | null {
  const encoded = key.slice(PUBLIC_PREFIX.length);
  if (!key.startsWith(PUBLIC_PREFIX) || !BASE64.test(encoded)) return null;
  return cached(key, () =>
    createPublicKey({
      key: Buffer.concat([SPKI_ED25519, Buffer.from(encoded, 'base64')]),
      format: 'der',
      type: 'spki',
    }),
  );
}

/** Public keys by their secret: a webhook's is shown with every read of it. */
const publicKeys = new Map<string, string>();

/** The `whpk_…` public key of a `whsk_…` secret. */
export function publicKeyOf(secret: string): string {
  let key = publicKeys.get(secret);
  if (key === undefined) {
    const spki = createPublicKey(privateKeyOf(secret)).export({ format: 'der', type: 'spki' });
    key = PUBLIC_PREFIX + spki.subarray(SPKI_ED25519.length).toString('base64');
    if (publicKeys.size >= MAX_CACHED) publicKeys.clear();
    publicKeys.set(secret, key);
  }
  return key;
}

/** The raw 32 bytes of a `whpk_…` key, base64url: a JWK's `x`. */
export const jwkX = (publicKey: string): string =>
  Buffer.from(publicKey.slice(PUBLIC_PREFIX.length), 'base64').toString('base64url');

/** The ed25519 signature of `message` under a `whsk_…` secret. */
export function signEd25519(secret: string, message: Buffer): Buffer {
  return sign(null, message, privateKeyOf(secret));
}

/** Whether `signature` is the ed25519 signature of `message` under the public key. */
export function verifyEd25519(publicKey: KeyObject, message: Buffer, signature: Buffer): boolean {
  return signature.length === 64 && verify(null, message, publicKey, signature);
}
