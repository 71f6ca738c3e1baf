import { createHash, randomBytes } from 'node:crypto';
import { PortalError } from '../errors.js';
import type { Storage } from '../ports.js';
import type { IdempotencyCompletion, IdempotencyRecord, IdempotentAnswer } from '../records.js';
import { silentLogger, type Logger } from '../shared/logger.js';
import { atom } from '../shared/time.js';

/*
 * The Idempotency-Key of the IETF httpapi draft ("The Idempotency-Key HTTP Header Field"): a key and
 * the fingerprint of the request it came with, kept per account. The first request claims the key;
 * the record it creates completes the claim with its answer in the same atomic write, so that one
 * key makes at most one record, even when a claim outlived its process. Only a created record (a 2xx)
 * is kept: a request that failed changed nothing, so its key is released and a retry runs afresh.
 */

/** How long a completed answer is given again. */
export const IDEMPOTENCY_TTL_MS = 24 * 60 * 60 * 1000;
/**
 * How long a claim holds its key while its request runs: longer than a request may take (Node's own
 * `requestTimeout` is 5 minutes), short enough that the claim of a process that died frees the key
 * soon. A request still running past it loses the key to a retry, and its insert is refused.
 */
export const IDEMPOTENCY_LEASE_MS = 5 * 60 * 1000;

/** Visible ASCII, 1 to 255 characters. */
const KEY = /^[\x21-\x7e]{1,255}$/;
/** An RFC 8941 sf-string: printable ASCII between quotes, `"` and `\` escaped. */
const SF_STRING = /^"((?:[\x20\x21\x23-\x5b\x5d-\x7e]|\\["\\])*)"$/;

/**
 * The key of an `Idempotency-Key` header: the draft's structured-field String (`"…"`), or the bare
 * key most clients send; `undefined` without the header. Anything else is a 400.
 */
export function parseIdempotencyKey(header: string | string[] | undefined): string | undefined {
  if (header === undefined) return undefined;
  if (typeof header !== 'string') throw new PortalError('IDEMPOTENCY_KEY_INVALID');
  const value = header.trim();
  // A value that opens a quoted string must be one: `"abc` is a broken key, not the key `"abc`.
  const quoted = value.startsWith('"') ? SF_STRING.exec(value) : null;
  if (value.startsWith('"') && quoted === null) throw new PortalError('IDEMPOTENCY_KEY_INVALID');
  const key = quoted === null ? value : quoted[1]!.replace(/\\(["\\])/g, '$1');
  if (!KEY.test(key)) throw new PortalError('IDEMPOTENCY_KEY_INVALID');
  return key;
}

/** A request's fingerprint: SHA-256 hex of the operation and what it asked for, as JSON with its keys in a fixed order. */
export function fingerprintOf(operation: string, request: unknown): string {
  return createHash('sha256').update(operation).update('\n').update(JSON.stringify(request)).digest('hex');
}

/** The claim a request holds on its key. */
export interface KeyClaim {
  accountId: string;
  key: string;
  token: string;
}

/** What came of a create made with a key: the answer, and whether it is the first one given again. */
export interface IdempotentOutcome {
  answer: IdempotentAnswer;
  replayed: boolean;
}

/** A create asked with an `Idempotency-Key`: the key, and how the route answers for the record created. */
export interface IdempotentCreate<T> {
  key: string;
  answer(created: T): IdempotentAnswer;
}

/** Where a request with a key starts: it holds the key now, or the key holds a completed answer. */
export type KeyStart = { claim: KeyClaim; completed?: undefined } | { claim?: undefined; completed: IdempotencyRecord };

/** The rules of idempotency keys; the services that create records call them. */
export function createIdempotency(deps: { storage: Storage; clock: () => Date; logger?: Logger }) {
  const { storage, clock } = deps;
  const logger = deps.logger ?? silentLogger;

  return {
    /**
     * Claims `key` for a request with `fingerprint` (`null`: not known yet). A claim in progress is a
     * 409; a completed answer is handed back (and, with a known fingerprint that differs, a 422).
     */
    async begin(accountId: string, key: string, fingerprint: string | null): Promise<KeyStart> {
      const now = clock();
      const token = randomBytes(16).toString('base64url');
      const held = await storage.claimIdempotencyKey({
        accountId,
        key,
        token,
        fingerprint,
        now: atom(now),
        leaseUntil: atom(new Date(now.getTime() + IDEMPOTENCY_LEASE_MS)),
      });
      if (held === null) return { claim: { accountId, key, token } };
      if (held.status === 'pending') throw new PortalError('IDEMPOTENCY_KEY_IN_PROGRESS');
      if (fingerprint !== null && held.fingerprint !== fingerprint) throw new PortalError('IDEMPOTENCY_KEY_REUSED');
      return { completed: held };
    },

    /** The completed answer, given again to a request with the same fingerprint; a 422 for another. */
    replay(record: IdempotencyRecord, fingerprint: string): IdempotentOutcome {
      if (record.fingerprint !== fingerprint || record.answer === null) throw new PortalError('IDEMPOTENCY_KEY_REUSED');
      return { answer: record.answer, replayed: true };
    },

    /** What the insert of the created record is handed: the claim completed with `answer`, kept 24 hours. */
    completion(claim: KeyClaim, fingerprint: string, answer: IdempotentAnswer): IdempotencyCompletion {
      const expiresAt = atom(new Date(clock().getTime() + IDEMPOTENCY_TTL_MS));
      return { key: claim.key, token: claim.token, fingerprint, answer, expiresAt };
    },

    /** Frees the key of a request that failed, so that a retry runs afresh; a failure here only waits for the lease. */
    async release(claim: KeyClaim): Promise<void> {
      try {
        await storage.releaseIdempotencyKey(claim.accountId, claim.key, claim.token);
      } catch (error) {
        logger.warn(
          { err: String(error) },
          'could not release an Idempotency-Key; it is free again once its claim lapses',
        );
      }
    },
  };
}
