import { PortalError } from '../../src/errors.js';
import type { Storage } from '../../src/ports.js';
import type { IdempotencyCompletion, IdempotencyRecord } from '../../src/records.js';
import type { Db, Queryable, Row } from './client.js';
import { atomOf, type Names } from './schema.js';

type IdempotencyMethods = Pick<Storage, 'claimIdempotencyKey' | 'releaseIdempotencyKey' | 'sweepIdempotencyKeys'>;

/** The idempotency keys, and `complete`, which an insert runs in its own transaction. */
export interface IdempotencyKeys extends IdempotencyMethods {
  /** Completes the claim inside `tx`, or rejects with `IDEMPOTENCY_KEY_IN_PROGRESS` when its token no longer holds it. */
  complete(tx: Queryable, accountId: string, completion: IdempotencyCompletion): Promise<void>;
}

/** A claim that found the key held, then found it gone before reading it (released meanwhile), tries again; this many times at most. */
const CLAIM_TRIES = 5;

/**
 * Idempotency keys in one table, shared by every instance on the database: a claim is one
 * statement (an insert that takes over an expired row, and only that), so two instances that claim
 * one key at once cannot both hold it. The row lock the completing update takes makes a takeover
 * wait for the insert that completes the key, and the other way round.
 */
export function createIdempotencyKeys(db: Db, { table }: Names): IdempotencyKeys {
  const keys = table('idempotency_keys');
  const sql = {
    claim: `INSERT INTO ${keys} AS k (account_id, key, status, token, fingerprint, created_at, expires_at)
      VALUES ($1::text, $2::text, 'pending', $3::text, $4::text, $5::timestamptz, $6::timestamptz)
      ON CONFLICT (account_id, key) DO UPDATE
        SET status = 'pending', token = EXCLUDED.token, fingerprint = EXCLUDED.fingerprint,
            answer_status = NULL, answer_body = NULL, answer_location = NULL,
            created_at = EXCLUDED.created_at, expires_at = EXCLUDED.expires_at
        WHERE k.expires_at <= EXCLUDED.created_at
      RETURNING token`,
    holder: `SELECT account_id, key, status, token, fingerprint, answer_status, answer_body, answer_location,
        ${atomOf('created_at')} AS created_at, ${atomOf('expires_at')} AS expires_at
      FROM ${keys} WHERE account_id = $1::text AND key = $2::text AND expires_at > $3::timestamptz`,
    complete: `UPDATE ${keys}
      SET status = 'completed', fingerprint = $4::text, answer_status = $5::int, answer_body = $6::text,
          answer_location = $7::text, expires_at = $8::timestamptz
      WHERE account_id = $1::text AND key = $2::text AND token = $3::text AND status = 'pending'
      RETURNING key`,
    release: `DELETE FROM ${keys} WHERE account_id = $1::text AND key = $2::text AND token = $3::text AND status = 'pending' RETURNING key`,
    sweep: `WITH gone AS (
        DELETE FROM ${keys} WHERE (account_id, key) IN (
          SELECT account_id, key FROM ${keys} WHERE expires_at <= $1::timestamptz ORDER BY expires_at LIMIT $2::int)
          -- Checked again on the row as it is when deleted: a claim that took the expired key over meanwhile stays.
          AND expires_at <= $1::timestamptz
        RETURNING 1)
      SELECT count(*)::int AS removed FROM gone`,
  };

  return {
    async claimIdempotencyKey(claim) {
      const { accountId, key, token, fingerprint, now, leaseUntil } = claim;
      for (let i = 0; i < CLAIM_TRIES; i++) {
        const claimed = await db.query(sql.claim, [accountId, key, token, fingerprint, now, leaseUntil]);
        if (claimed.length === 1) return null;
        const [holder] = await db.query(sql.holder, [accountId, key, now]);
        if (holder !== undefined) return toRecord(holder);
      }
      throw new Error(`claimIdempotencyKey: the key was taken and freed ${CLAIM_TRIES} times while it was claimed`);
    },
    async releaseIdempotencyKey(accountId, key, token) {
      return (await db.query(sql.release, [accountId, key, token], { replayable: true })).length === 1;
    },
    async sweepIdempotencyKeys(now, limit) {
      const [row] = await db.query(sql.sweep, [now, limit], { replayable: true });
      return Number(row?.removed ?? 0);
    },
    async complete(tx, accountId, completion) {
      const { key, token, fingerprint, answer, expiresAt } = completion;
      const params = [accountId, key, token, fingerprint, answer.status, answer.body, answer.location, expiresAt];
      if ((await tx.query(sql.complete, params)).length === 0) throw new PortalError('IDEMPOTENCY_KEY_IN_PROGRESS');
    },
  };
}

function toRecord(row: Row): IdempotencyRecord {
  const completed = row.status === 'completed';
  return {
    accountId: row.account_id as string,
    key: row.key as string,
    status: completed ? 'completed' : 'pending',
    token: row.token as string,
    fingerprint: (row.fingerprint as string | null) ?? null,
    answer: completed
      ? {
          status: Number(row.answer_status),
          body: row.answer_body as string,
          location: (row.answer_location as string | null) ?? null,
        }
      : null,
    createdAt: row.created_at as string,
    expiresAt: row.expires_at as string,
  };
}
