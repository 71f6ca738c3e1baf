import { CALL_STATS_KEPT_MS, LATENCY_BINS, LATENCY_BOUNDS_MS } from '../../src/rules/call-stats.js';
import type { CallStatsHour } from '../../src/records.js';
import type { Db } from './client.js';
import { atomOf, type Names } from './schema.js';
import { currentSlot } from './outbox/ring.js';

const BINS = Array.from({ length: LATENCY_BINS }, (_, i) => `latency_${i}`);
const COUNTS = ['succeeded', 'failed', 'errors', ...BINS];

/** The table of each webhook's calls by the hour, and the index its sweep reads (migration 14). */
export function callStatsTable({ table }: Names): string[] {
  return [
    `CREATE TABLE ${table('webhook_call_stats')} (
    webhook_id text NOT NULL,
    account_id text NOT NULL,
    hour timestamptz NOT NULL,
    ${COUNTS.map((column) => `${column} integer NOT NULL DEFAULT 0`).join(',\n    ')},
    PRIMARY KEY (webhook_id, hour)
  )`,
    `CREATE INDEX portal_webhook_call_stats_hour ON ${table('webhook_call_stats')} (hour)`,
  ];
}

/** How often an instance sweeps the hours past their span: they age by the hour. */
const SWEEP_EVERY_MS = 60_000;

/** The columns of the counts not yet added to their hours (migration 28; outbox/ring.ts), as a table's definition. */
export const callCountColumns = `webhook_id text NOT NULL,
    account_id text NOT NULL,
    hour timestamptz NOT NULL,
    ${COUNTS.map((column) => `${column} integer NOT NULL`).join(',\n    ')}`;

/**
 * Adds the counts of `partition` (a partition of portal_call_counts, being retired) to their hours,
 * one write a webhook and hour, in key order, as every writer locks the rows.
 */
export const foldCounts =
  ({ table }: Names) =>
  (partition: string) =>
    `INSERT INTO ${table('webhook_call_stats')} AS s (webhook_id, account_id, hour, ${COUNTS.join(', ')})
      SELECT webhook_id, min(account_id), hour, ${COUNTS.map((column) => `sum(${column})`).join(', ')}
      FROM ${partition}
      GROUP BY webhook_id, hour
      ORDER BY webhook_id, hour
      ON CONFLICT (webhook_id, hour) DO UPDATE SET ${COUNTS.map((column) => `${column} = s.${column} + excluded.${column}`).join(', ')}`;

/**
 * The CTE `counted`: the attempts of `source` (a SELECT of webhook_id, account_id and entry, the
 * attempt's jsonb) counted in their webhooks' hours, as `rules/call-stats.ts` counts them (outcome
 * by status, duration bin by `LATENCY_BOUNDS_MS`). Grouped first, one row a webhook and hour,
 * appended to the ring's current slot of portal_call_counts: the hour's own row is written when the
 * slot is retired (`foldCounts`), not by every record (an update each, a dead row version each).
 */
export function countCalls(names: Names, source: string): string {
  const { table } = names;
  const status = `(c.entry->>'statusCode')::int`;
  // rules/call-stats.ts's outcomeIndex: no status and no error is a broker's acknowledgement.
  const outcome = `CASE WHEN c.entry->>'statusCode' IS NULL THEN (CASE WHEN jsonb_typeof(c.entry->'error') = 'null' THEN 0 ELSE 2 END) WHEN ${status} BETWEEN 200 AND 299 THEN 0 ELSE 1 END`;
  const duration = `(c.entry->>'durationMs')::numeric`;
  const bin = `CASE ${LATENCY_BOUNDS_MS.map((bound, i) => `WHEN ${duration} <= ${bound} THEN ${i}`).join(' ')} ELSE ${LATENCY_BOUNDS_MS.length} END`;
  const hour = `date_trunc('hour', (c.entry->>'at')::timestamptz AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'`;
  const sums = [
    `count(*) FILTER (WHERE outcome = 0)`,
    `count(*) FILTER (WHERE outcome = 1)`,
    `count(*) FILTER (WHERE outcome = 2)`,
    ...BINS.map((_, i) => `count(*) FILTER (WHERE bin = ${i})`),
  ];
  return `counted AS (
      INSERT INTO ${table('call_counts')} (webhook_id, account_id, hour, ${COUNTS.join(', ')}, slot)
      SELECT webhook_id, account_id, hour, ${sums.join(', ')}, ${currentSlot(names, 0)}
      FROM (SELECT c.webhook_id, c.account_id, ${hour} AS hour, ${outcome} AS outcome, ${bin} AS bin FROM (${source}) AS c) AS calls
      GROUP BY webhook_id, account_id, hour
    )`;
}

/** `Storage.callStats`, and the sweep of hours past the kept span (run with retention). */
export function createCallStats(db: Db, names: Names) {
  const { table } = names;
  // The hours as written, with the counts of the ring's slots not yet added to them.
  const read = `SELECT ${atomOf('hour')} AS hour, ${COUNTS.map((column) => `sum(${column}) AS ${column}`).join(', ')}
    FROM (
      SELECT hour, ${COUNTS.join(', ')} FROM ${table('webhook_call_stats')}
      WHERE webhook_id = $2::text AND account_id = $1::text AND hour >= $3::timestamptz
      UNION ALL
      SELECT hour, ${COUNTS.join(', ')} FROM ${table('call_counts')}
      WHERE webhook_id = $2::text AND account_id = $1::text AND hour >= $3::timestamptz
    ) AS counts
    GROUP BY hour
    ORDER BY hour`;
  // Measured from the latest hour counted, not the clock: a store written under another clock (a
  // test's, a host's) keeps the span it counted.
  // The latest hour is the latest of both tables: the ring's counts are not added to theirs yet.
  const cutoff = `(SELECT max(hour) FROM (SELECT max(hour) FROM ${table('webhook_call_stats')}
      UNION ALL SELECT max(hour) FROM ${table('call_counts')}) AS latest(hour)) - ${CALL_STATS_KEPT_MS / 1000} * interval '1 second'`;
  const sweep = `WITH doomed AS (
      SELECT ctid FROM ${table('webhook_call_stats')} WHERE hour < ${cutoff} LIMIT $1::int
    ), counts AS (
      -- The ring's rows go with their slot's partition; these are few, from a clock far ahead.
      DELETE FROM ${table('call_counts')} WHERE hour < ${cutoff}
    )
    DELETE FROM ${table('webhook_call_stats')} WHERE ctid IN (SELECT ctid FROM doomed)`;
  let swept = 0;
  return {
    async callStats(accountId: string, webhookId: string, since: string): Promise<CallStatsHour[]> {
      const rows = await db.query(read, [accountId, webhookId, since]);
      return rows.map((row) => ({
        hour: row.hour as string,
        succeeded: Number(row.succeeded),
        failed: Number(row.failed),
        errors: Number(row.errors),
        latency: BINS.map((column) => Number(row[column])),
      }));
    },
    /** At most once a minute per instance: retention calls it up to 20 times a tick. */
    async sweepCallStats(limit: number): Promise<void> {
      if (Date.now() - swept < SWEEP_EVERY_MS) return;
      swept = Date.now();
      await db.query(sweep, [limit], { replayable: true });
    },
  };
}
