import type { Storage } from '../../src/ports.js';
import type { PortalSessionRecord, PortalSessionScope } from '../../src/records.js';
import { type Db, type Row, lockWithin } from './client.js';
import { atomOf, type Names } from './schema.js';

type PortalSessionMethods = Pick<
  Storage,
  'insertPortalSession' | 'getPortalSession' | 'revokePortalSession' | 'sweepPortalSessions'
>;

/** First key of the advisory lock that counts an account's live sessions: 'cpps' in ASCII. */
const SESSION_LOCK_CLASS = 0x63707073;

/** Portal sessions in one table: a request that presents a token reads its row by id. */
export function createPortalSessions(db: Db, { table, schema }: Names): PortalSessionMethods {
  const sessions = table('sessions');
  const sql = {
    insert: `INSERT INTO ${sessions} (id, account_id, secret_hash, scopes, read_only, created_at, expires_at, revoked_at)
      VALUES ($1::text, $2::text, $3::text, $4::text[], $5::boolean, $6::timestamptz, $7::timestamptz, $8::timestamptz)`,
    // As a webhook's insert: the account's live sessions are counted under a lock of the account
    // (released at commit), in a statement after the lock, so two creates at once cannot both see
    // room for one more. The count stops at the limit and reads portal_sessions_unrevoked alone.
    insertWithin: `INSERT INTO ${sessions} (id, account_id, secret_hash, scopes, read_only, created_at, expires_at, revoked_at)
      SELECT $1::text, $2::text, $3::text, $4::text[], $5::boolean, $6::timestamptz, $7::timestamptz, $8::timestamptz
      WHERE (SELECT count(*) FROM (
          SELECT 1 FROM ${sessions}
          WHERE account_id = $2::text AND revoked_at IS NULL AND expires_at > $6::timestamptz LIMIT $9::int
        ) AS live) < $9::int
      RETURNING id`,
    get: `SELECT id, account_id, secret_hash, scopes, read_only, ${atomOf('created_at')} AS created_at,
        ${atomOf('expires_at')} AS expires_at, ${atomOf('revoked_at')} AS revoked_at
      FROM ${sessions} WHERE id = $1::text`,
    // The first update of a session sets its time; a later one finds it set and changes nothing.
    revoke: `WITH found AS (SELECT id, revoked_at FROM ${sessions} WHERE id = $2::text AND account_id = $1::text FOR UPDATE),
        revoked AS (UPDATE ${sessions} AS s SET revoked_at = $3::timestamptz FROM found
          WHERE s.id = found.id AND found.revoked_at IS NULL RETURNING s.id)
      SELECT (SELECT count(*) FROM found)::int AS found, (SELECT count(*) FROM revoked)::int AS revoked`,
    sweep: `WITH gone AS (
        DELETE FROM ${sessions} WHERE id IN (
          SELECT id FROM ${sessions} WHERE expires_at <= $1::timestamptz ORDER BY expires_at LIMIT $2::int)
        RETURNING 1)
      SELECT count(*)::int AS removed FROM gone`,
  };

  return {
    async insertPortalSession(session, limits) {
      const { id, accountId, secretHash, scopes, readOnly, createdAt, expiresAt, revokedAt } = session;
      const params = [id, accountId, secretHash, scopes, readOnly, createdAt, expiresAt, revokedAt];
      const max = limits?.maxLive;
      if (max === undefined) {
        await db.query(sql.insert, params);
        return true;
      }
      return db.transaction(async (tx) => {
        await lockWithin(tx, SESSION_LOCK_CLASS, `${schema}:${accountId}`);
        return (await tx.query(sql.insertWithin, [...params, max])).length === 1;
      });
    },
    async getPortalSession(id) {
      const [row] = await db.query(sql.get, [id]);
      return row === undefined ? null : toRecord(row);
    },
    async revokePortalSession(accountId, id, at) {
      const [row] = await db.query(sql.revoke, [accountId, id, at]);
      if (Number(row?.found ?? 0) === 0) return null;
      return Number(row!.revoked) === 1;
    },
    async sweepPortalSessions(now, limit) {
      const [row] = await db.query(sql.sweep, [now, limit], { replayable: true });
      return Number(row?.removed ?? 0);
    },
  };
}

function toRecord(row: Row): PortalSessionRecord {
  return {
    id: row.id as string,
    accountId: row.account_id as string,
    secretHash: row.secret_hash as string,
    scopes: row.scopes as PortalSessionScope[],
    readOnly: row.read_only === true,
    createdAt: row.created_at as string,
    expiresAt: row.expires_at as string,
    revokedAt: (row.revoked_at as string | null) ?? null,
  };
}
