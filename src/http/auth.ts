import * as crypto from 'node:crypto';
import { LRUCache } from 'lru-cache';
import { PortalError } from '../errors.js';
import { refusal } from './render-error.js';
import type { Reply } from './reply.js';

/** Maps a bearer token to the account it acts for, or `null` when the token is not valid. */
export type AuthFunction = (token: string) => Promise<{ accountId: string } | null> | { accountId: string } | null;

export type AuthOption =
  | AuthFunction
  | {
      /** A list (every key acts for the account `default`) or a map from key to account id. */
      apiKeys: readonly string[] | Readonly<Record<string, string>>;
    };

/**
 * A refused request: the catalogue error, and its answer built once. The API-key authenticator
 * returns one of three shared instances instead of throwing (hot path): a 401 thrown through the
 * dispatcher and rendered again each time cost as much as Fastify's, returned as little as bare
 * node:http's (`npm run bench:instructions`, 401; the figures in docs/performance.md, "Figures behind the code": refusals returned, not thrown).
 */
export class Refused {
  readonly reply: Reply;
  constructor(readonly error: PortalError & { code: 'AUTH_MISSING' | 'AUTH_MALFORMED' | 'AUTH_INVALID' }) {
    this.reply = refusal(error.code);
  }
}

/**
 * Resolves the account of a request's `Authorization` header. With API keys the answer is a string
 * or a `Refused` at once, with an auth function a promise that rejects with the 401 to answer: the
 * dispatcher awaits only the latter, as an await on every request costs a turn of the event loop
 * (hot path).
 */
export type Authenticator = (authorization: string | undefined) => string | Refused | Promise<string>;

const TOKEN68 = /^[A-Za-z0-9\-._~+/]+=*$/;
/** How long an auth function's answer (a miss too) is reused. */
const AUTH_CACHE_TTL_MS = 10_000;
const AUTH_CACHE_MAX = 10_000;

// One instance each, for every refused request: they are never changed, and a refusal is common
// enough that building an exception (and its stack) for each costs (hot path).
const MISSING = new PortalError('AUTH_MISSING');
const MALFORMED = new PortalError('AUTH_MALFORMED');
const INVALID = new PortalError('AUTH_INVALID');
const REFUSED_MISSING = new Refused(MISSING as Refused['error']);
const REFUSED_MALFORMED = new Refused(MALFORMED as Refused['error']);
const REFUSED_INVALID = new Refused(INVALID as Refused['error']);

/** `crypto.hash`, the one-shot digest (Node 20.12 and later): no Hash object to build (hot path). */
const oneShot = (crypto as { hash?: (algorithm: string, data: string, encoding: 'buffer') => Buffer }).hash;
const digest = oneShot
  ? (token: string) => oneShot('sha256', token, 'buffer')
  : (token: string) => crypto.createHash('sha256').update(token).digest();

/**
 * The token of an `Authorization: Bearer <token>` header (the scheme is case-insensitive, RFC 9110;
 * the token a token68, at most 4,096 characters), or why there is none: the one reading of the
 * header, for API keys and signing tokens alike.
 */
export function bearerToken(header: string | undefined): string | Refused {
  if (header === undefined || header === '') return REFUSED_MISSING;
  const space = header.indexOf(' ');
  if (space !== 6 || header.slice(0, 6).toLowerCase() !== 'bearer') return REFUSED_MALFORMED;
  const token = header.slice(7).trim();
  if (token === '' || token.length > 4096 || !TOKEN68.test(token)) return REFUSED_MALFORMED;
  return token;
}

function validAccount(result: unknown): string | null {
  if (result === null || result === undefined) return null;
  const accountId = (result as { accountId?: unknown }).accountId;
  if (typeof accountId !== 'string' || accountId === '') {
    throw new Error('auth function must resolve { accountId: non-empty string } or null');
  }
  return accountId;
}

/** The shortest API key accepted: a shorter one is guessable, or a placeholder left in by mistake. */
const MIN_API_KEY_LENGTH = 16;

/**
 * Checks one configured key before it is hashed, so that a missing one (an unset environment
 * variable) gets this message rather than node:crypto's. The key itself is never quoted.
 */
function checkApiKey(key: unknown, index: number, count: number): void {
  const which = count === 1 ? 'the key' : `key ${index + 1} of ${count}`;
  if (typeof key !== 'string') {
    throw new TypeError(
      `auth.apiKeys: ${which} is ${key === undefined ? 'undefined' : typeof key}, not a string (is its environment variable set?)`,
    );
  }
  if (key.length < MIN_API_KEY_LENGTH) {
    throw new TypeError(
      `auth.apiKeys: ${which} has ${key.length} characters; an API key needs at least ${MIN_API_KEY_LENGTH}`,
    );
  }
  if (!TOKEN68.test(key))
    throw new TypeError(
      `auth.apiKeys: ${which} must be a token68 string (letters, digits, -._~+/, optional trailing =)`,
    );
}

/** The first 6 bytes of a SHA-256 digest as a number: a map key made without a string (hot path). */
const prefixOf = (digest: Buffer) => digest.readUIntBE(0, 6);

/**
 * Builds the request authenticator. Keys are never compared as strings: the presented token is
 * hashed with SHA-256, its first 6 bytes pick the candidate keys (timing of that lookup depends on
 * the hash, which says nothing usable about any key; keys whose digests share those bytes are all
 * candidates), and the full digests are compared with `timingSafeEqual`.
 */
export function createAuthenticator(option: AuthOption): Authenticator {
  if (typeof option === 'function') return cachedAuthenticator(option);
  if (typeof option?.apiKeys !== 'object' || option.apiKeys === null) {
    throw new TypeError('auth.apiKeys must be a list of keys or a map from key to account id');
  }
  const entries: [string, string][] = Array.isArray(option.apiKeys)
    ? option.apiKeys.map((key) => [key, 'default'])
    : Object.entries(option.apiKeys);
  if (entries.length === 0) throw new TypeError('auth.apiKeys must hold at least one key');
  const byPrefix = new Map<number, { digest: Buffer; accountId: string }[]>();
  for (const [index, [key]] of entries.entries()) checkApiKey(key, index, entries.length);
  for (const [key, accountId] of entries) {
    if (typeof accountId !== 'string' || accountId === '')
      throw new TypeError('auth.apiKeys: account ids must be non-empty strings');
    const keyDigest = digest(key);
    const prefix = prefixOf(keyDigest);
    const candidates = byPrefix.get(prefix);
    if (candidates === undefined) byPrefix.set(prefix, [{ digest: keyDigest, accountId }]);
    else candidates.push({ digest: keyDigest, accountId });
  }
  function accountOf(token: string): string | undefined {
    const presented = digest(token);
    const candidates = byPrefix.get(prefixOf(presented));
    if (candidates === undefined) return undefined;
    for (const candidate of candidates) {
      if (crypto.timingSafeEqual(candidate.digest, presented)) return candidate.accountId;
    }
    return undefined;
  }
  return (authorization) => {
    const token = bearerToken(authorization);
    if (typeof token !== 'string') return token;
    return accountOf(token) ?? REFUSED_INVALID;
  };
}

const MISS = Symbol('miss');

/** Wraps an auth function: answers (misses too) are reused for a short while; concurrent asks share one call. */
function cachedAuthenticator(verify: AuthFunction): Authenticator {
  // Keyed by the token's digest so that no raw token is kept in memory.
  const answers = new LRUCache<string, string | typeof MISS>({ max: AUTH_CACHE_MAX, ttl: AUTH_CACHE_TTL_MS });
  const inFlight = new Map<string, Promise<string | typeof MISS>>();
  return async (authorization) => {
    const token = bearerToken(authorization);
    if (typeof token !== 'string') throw token.error;
    const key = digest(token).toString('base64');
    let answer = answers.get(key);
    if (answer === undefined) {
      let pending = inFlight.get(key);
      if (pending === undefined) {
        pending = Promise.resolve(verify(token))
          .then((result) => validAccount(result) ?? MISS)
          .then((value) => {
            answers.set(key, value);
            return value;
          })
          .finally(() => inFlight.delete(key));
        inFlight.set(key, pending);
      }
      answer = await pending;
    }
    if (answer === MISS) throw INVALID;
    return answer;
  };
}
