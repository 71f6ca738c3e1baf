import { randomUUID } from 'node:crypto';
import { NOT_RECORDED, recoveredDelivery } from '../../src/rules/deliveries.js';
import { attemptSucceeded } from '../../src/rules/webhook-health.js';
import { PortalError } from '../../src/errors.js';
import type { AttemptRecorded, HealthRule, Storage } from '../../src/ports.js';
import type {
  AutomaticDisableReason,
  DeliveryAttempt,
  WebhookDisabledReason,
  WebhookHealthRecord,
} from '../../src/records.js';
import type { Db, Row } from './client.js';
import { atomOf, type Names } from './schema.js';
import { countCalls } from './storage-call-stats.js';
import { deliveryColumnsOf, insertDeliveriesStatement } from './storage-rows.js';
import { orderingKeys } from './storage-keys.js';

export type HealthMethods = Pick<
  Storage,
  'getWebhookHealth' | 'setInFlightLimit' | 'disableWebhook' | 'enableWebhook' | 'recoverDeliveries'
>;

/** A webhook's health as of its last write, as the columns of `portal_webhook_health` name it. */
interface Previous {
  failures: string;
  failingSince: string;
  lastSuccessAt: string;
  disabledAt: string;
  disabledReason: string;
  disabledBy: string;
}

/**
 * `healthAfterAttempt` of `src/rules/webhook-health.ts` as the column values it writes, given the
 * previous ones and the parameters of `recordAttemptWithHealth`: $6 the attempt's time, $7 whether
 * it succeeded, $8 whether it was a 410, $9 `disableAfterFailures`, $10 `disableAfterMs`, $11 a
 * token of this write. `disabled_by` takes the token when this write disables the webhook: the
 * statement then knows it made the transition, even when another instance's write raced it.
 */
function healthAfterAttempt(p: Previous): string {
  const disables = `(${p.disabledAt} IS NULL AND NOT $7::boolean AND ($8::boolean OR (
      ${p.failures} + 1 >= $9::int AND $6::timestamptz - coalesce(${p.failingSince}, $6::timestamptz) >= $10::bigint * interval '1 millisecond')))`;
  return `CASE WHEN $7::boolean THEN 0 ELSE ${p.failures} + 1 END,
    CASE WHEN $7::boolean THEN NULL ELSE coalesce(${p.failingSince}, $6::timestamptz) END,
    CASE WHEN $7::boolean THEN $6::timestamptz ELSE ${p.lastSuccessAt} END,
    $6::timestamptz,
    CASE WHEN ${disables} THEN $6::timestamptz ELSE ${p.disabledAt} END,
    CASE WHEN ${disables} THEN CASE WHEN $8::boolean THEN 'gone' ELSE 'failing' END ELSE ${p.disabledReason} END,
    CASE WHEN ${disables} THEN $11::text ELSE ${p.disabledBy} END`;
}

const HEALTH_COLUMNS =
  'consecutive_failures, failing_since, last_success_at, last_attempt_at, disabled_at, disabled_reason, disabled_by';

/**
 * The statement that records an attempt (`recording`, CTEs ending with `recorded`: its parameters
 * $1–$5 and its rows' webhook_id, account_id, due_again, ordering_key, status) and the webhook's
 * health in one: one round trip per attempt, as before. A success that leaves the health as it is
 * (its run of successes within one second) writes nothing, so a busy healthy webhook takes no row
 * lock per call. Answers `recorded` (0 or 1) and `disabled`: the reason, when this write disabled
 * the webhook.
 */
export function recordAttemptWithHealth(names: Names, recording: string): string {
  const { table } = names;
  const fresh: Previous = {
    failures: '0',
    failingSince: 'NULL::timestamptz',
    lastSuccessAt: 'NULL::timestamptz',
    disabledAt: 'NULL::timestamptz',
    disabledReason: 'NULL::text',
    disabledBy: 'NULL::text',
  };
  const stored: Previous = {
    failures: 'h.consecutive_failures',
    failingSince: 'h.failing_since',
    lastSuccessAt: 'h.last_success_at',
    disabledAt: 'h.disabled_at',
    disabledReason: 'h.disabled_reason',
    disabledBy: 'h.disabled_by',
  };
  return `WITH ${recording}, webhook AS (
      SELECT r.webhook_id, r.account_id FROM recorded AS r
      WHERE EXISTS (SELECT 1 FROM ${table('webhooks')} AS w WHERE w.id = r.webhook_id)
        AND NOT ($7::boolean AND EXISTS (
          SELECT 1 FROM ${table('webhook_health')} AS h
          WHERE h.webhook_id = r.webhook_id AND h.consecutive_failures = 0
            AND h.last_success_at = $6::timestamptz AND h.last_attempt_at = $6::timestamptz))
    ), health AS (
      INSERT INTO ${table('webhook_health')} AS h (webhook_id, account_id, ${HEALTH_COLUMNS})
      SELECT webhook_id, account_id, ${healthAfterAttempt(fresh)} FROM webhook
      ON CONFLICT (webhook_id) DO UPDATE SET (${HEALTH_COLUMNS}) = ROW(${healthAfterAttempt(stored)})
      RETURNING h.disabled_reason, h.disabled_by
    ),
    -- After the health row (reading it orders the two), as every writer locks them.
    ${countCalls(names, 'SELECT r.webhook_id, r.account_id, $3::jsonb AS entry FROM recorded AS r CROSS JOIN (SELECT count(*) FROM health) AS after_health')}
    SELECT (SELECT count(*) FROM recorded)::int AS recorded, (SELECT bool_or(due_again) FROM recorded) AS due_again,
      (SELECT webhook_id FROM recorded) AS webhook_id, (SELECT ordering_key FROM recorded) AS ordering_key, (SELECT status FROM recorded) AS status,
      (SELECT disabled_reason FROM health WHERE disabled_by = $11::text) AS disabled`;
}

/**
 * The health write of successful attempts recorded together, after the CTE `recorded` (its rows:
 * webhook_id, account_id, at). A success sets the health the same way whatever came before it, so
 * each webhook's attempts fold into one write: that of its latest. As for one attempt, a write that
 * would change nothing is not made; the rows are written in webhook order, so that two such
 * statements at once take their row locks in the same order and cannot deadlock.
 */
export function healthAfterSuccesses({ table }: Names): string {
  return `latest AS (
      SELECT r.webhook_id, r.account_id, max(r.at) AS at FROM recorded AS r
      WHERE EXISTS (SELECT 1 FROM ${table('webhooks')} AS w WHERE w.id = r.webhook_id)
      GROUP BY r.webhook_id, r.account_id
    ), health AS (
      INSERT INTO ${table('webhook_health')} AS h (webhook_id, account_id, consecutive_failures, failing_since, last_success_at, last_attempt_at)
      SELECT l.webhook_id, l.account_id, 0, NULL, l.at, l.at FROM latest AS l
      WHERE NOT EXISTS (
        SELECT 1 FROM ${table('webhook_health')} AS s
        WHERE s.webhook_id = l.webhook_id AND s.consecutive_failures = 0 AND s.last_success_at = l.at AND s.last_attempt_at = l.at)
      ORDER BY l.webhook_id
      ON CONFLICT (webhook_id) DO UPDATE SET consecutive_failures = 0, failing_since = NULL,
        last_success_at = excluded.last_success_at, last_attempt_at = excluded.last_attempt_at
      RETURNING h.webhook_id
    )`;
}

/** The parameters $6–$11 of `recordAttemptWithHealth`. */
export function healthParams(attempt: DeliveryAttempt, rule: HealthRule): unknown[] {
  return [
    attempt.at,
    attemptSucceeded(attempt),
    attempt.statusCode === 410,
    rule.disableAfterFailures,
    rule.disableAfterMs,
    randomUUID(),
  ];
}

/** What `recordAttemptWithHealth` answered, as `Storage.recordAttempt` resolves it. */
export function attemptResult(row: Row | undefined): AttemptRecorded {
  if (row === undefined || Number(row.recorded) !== 1) return NOT_RECORDED;
  return {
    recorded: true,
    disabled: (row.disabled as AutomaticDisableReason | null) ?? null,
    dueAgain: row.due_again === true,
  };
}

/**
 * `holdHealth` of src/rules/webhook-health.ts: webhook $1, if it exists, held until $2 or the later
 * hold its health has already.
 */
export function holdWebhook({ table }: Names): string {
  return `INSERT INTO ${table('webhook_health')} AS h (webhook_id, account_id, held_until)
    SELECT w.id, w.account_id, $2::timestamptz FROM ${table('webhooks')} AS w WHERE w.id = $1::text
    ON CONFLICT (webhook_id) DO UPDATE SET held_until = excluded.held_until
    WHERE h.held_until IS NULL OR h.held_until < excluded.held_until`;
}

/** Whether the webhook of a delivery (aliased d) is disabled. */
function webhookDisabled({ table }: Names): string {
  return `EXISTS (SELECT 1 FROM ${table('webhook_health')} AS h WHERE h.webhook_id = d.webhook_id AND h.disabled_at IS NOT NULL)`;
}

/** A claim's test that a delivery (aliased d) may be sent: its webhook exists and is not disabled. */
export function deliverable(names: Names): string {
  return `(EXISTS (SELECT 1 FROM ${names.table('webhooks')} AS w WHERE w.id = d.webhook_id) AND NOT ${webhookDisabled(names)})`;
}

/**
 * Health, disable, enable and recovery. `disable` and `enable` decide in one statement whose WHERE
 * PostgreSQL checks again on the row it locks, so of two at once exactly one makes the change.
 */
export function createHealth(db: Db, names: Names, announce?: { channel: string }): HealthMethods {
  const { table } = names;
  const webhook = `SELECT id, account_id FROM ${table('webhooks')} WHERE account_id = $1::text AND id = $2::text`;
  const getHealth = `SELECT w.id, w.account_id, coalesce(h.consecutive_failures, 0) AS consecutive_failures,
      ${atomOf('h.failing_since')} AS failing_since, ${atomOf('h.last_success_at')} AS last_success_at,
      ${atomOf('h.last_attempt_at')} AS last_attempt_at, ${atomOf('h.disabled_at')} AS disabled_at, h.disabled_reason,
      ${atomOf('h.held_until')} AS held_until, h.in_flight_limit
    FROM ${table('webhooks')} AS w LEFT JOIN ${table('webhook_health')} AS h ON h.webhook_id = w.id
    WHERE w.account_id = $1::text AND w.id = $2::text`;
  const disable = `WITH webhook AS (${webhook}), changed AS (
      INSERT INTO ${table('webhook_health')} AS h (webhook_id, account_id, disabled_at, disabled_reason)
      SELECT id, account_id, $3::timestamptz, 'manual' FROM webhook
      ON CONFLICT (webhook_id) DO UPDATE SET disabled_at = $3::timestamptz, disabled_reason = 'manual', disabled_by = NULL
      WHERE h.disabled_at IS NULL
      RETURNING 1
    )
    SELECT (SELECT count(*) FROM webhook)::int AS found, (SELECT count(*) FROM changed)::int AS changed`;
  const enable = `WITH webhook AS (${webhook}), changed AS (
      UPDATE ${table('webhook_health')} AS h
      SET disabled_at = NULL, disabled_reason = NULL, disabled_by = NULL, consecutive_failures = 0, failing_since = NULL
      FROM webhook WHERE h.webhook_id = webhook.id AND h.disabled_at IS NOT NULL
      RETURNING 1
    )
    SELECT (SELECT count(*) FROM webhook)::int AS found, (SELECT count(*) FROM changed)::int AS changed`;
  // Recoveries of one webhook wait for each other here (publishes, which hold the webhook FOR KEY
  // SHARE, do not): the next one then reads the deliveries this one made.
  const lockWebhook = `SELECT w.type, h.disabled_at IS NOT NULL AS disabled
    FROM ${table('webhooks')} AS w LEFT JOIN ${table('webhook_health')} AS h ON h.webhook_id = w.id
    WHERE w.account_id = $1::text AND w.id = $2::text
    FOR NO KEY UPDATE OF w`;
  // undeliveredEvents of src/rules/deliveries.ts: a delivery is made no earlier than its event, so
  // every delivery of an event created at or after $2 is at or after $2 too, and the index on
  // (webhook_id, created_at) finds them. Events of another type ($3) are test calls.
  // Pending deliveries are in the queue, finished ones in the log.
  const undelivered = `SELECT d.event_id, e.ordering_key, e.gen FROM (
      SELECT event_id, event_gen, status, seq FROM ${table('queue')} WHERE webhook_id = $1::text AND created_at >= $2::timestamptz
      UNION ALL
      SELECT event_id, event_gen, status, seq FROM ${table('deliveries')} WHERE webhook_id = $1::text AND created_at >= $2::timestamptz
    ) AS d JOIN ${table('events')} AS e ON e.gen = d.event_gen AND e.id = d.event_id
    WHERE e.created_at >= $2::timestamptz AND e.type = $3::text
    GROUP BY d.event_id, e.gen, e.created_at, e.ordering_key
    HAVING bool_and(d.status IN ('failed', 'cancelled'))
    ORDER BY e.created_at, min(d.seq)`;
  const insertDeliveries = insertDeliveriesStatement(names, false);
  const holdEvents = `LOCK TABLE ONLY ${table('events')} IN ROW SHARE MODE`;
  const notifyWork = `SELECT pg_notify($1::text, '')`;
  const keys = orderingKeys(names);

  // The limit a worker set, for the health to show: written only when it differs.
  const setInFlightLimit = `INSERT INTO ${table('webhook_health')} AS h (webhook_id, account_id, in_flight_limit)
    SELECT w.id, w.account_id, $2::int FROM ${table('webhooks')} AS w WHERE w.id = $1::text
    ON CONFLICT (webhook_id) DO UPDATE SET in_flight_limit = excluded.in_flight_limit
    WHERE h.in_flight_limit IS DISTINCT FROM excluded.in_flight_limit`;
  const changed = (row: Row | undefined) => (Number(row?.found) === 0 ? null : Number(row?.changed) === 1);

  return {
    async getWebhookHealth(accountId, webhookId) {
      const [row] = await db.query(getHealth, [accountId, webhookId]);
      if (row === undefined) return null;
      return {
        id: row.id as string,
        accountId: row.account_id as string,
        consecutiveFailures: Number(row.consecutive_failures),
        failingSince: (row.failing_since ?? null) as string | null,
        lastSuccessAt: (row.last_success_at ?? null) as string | null,
        lastAttemptAt: (row.last_attempt_at ?? null) as string | null,
        disabledAt: (row.disabled_at ?? null) as string | null,
        disabledReason: (row.disabled_reason ?? null) as WebhookDisabledReason | null,
        heldUntil: (row.held_until ?? null) as string | null,
        inFlightLimit:
          row.in_flight_limit === null || row.in_flight_limit === undefined ? null : Number(row.in_flight_limit),
      } satisfies WebhookHealthRecord;
    },
    async setInFlightLimit(webhookId, limit) {
      await db.query(setInFlightLimit, [webhookId, limit]);
    },
    async disableWebhook(accountId, webhookId, at) {
      return changed((await db.query(disable, [accountId, webhookId, at]))[0]);
    },
    async enableWebhook(accountId, webhookId) {
      return changed((await db.query(enable, [accountId, webhookId]))[0]);
    },
    async recoverDeliveries(accountId, webhookId, since, now) {
      return db.transaction(async (tx) => {
        // Retention removes an event of a default partition, or a generation's, only under a lock
        // this one holds off: the events read here stay until the deliveries made of them name them.
        await tx.query(holdEvents);
        const [hook] = await tx.query(lockWebhook, [accountId, webhookId]);
        if (hook === undefined) return null;
        if (hook.disabled === true) throw new PortalError('WEBHOOK_DISABLED', webhookId);
        const events = await tx.query(undelivered, [webhookId, since, hook.type]);
        const recovered = events.map((row) =>
          recoveredDelivery(
            {
              id: row.event_id as string,
              accountId,
              type: hook.type as string,
              ...(row.ordering_key === null ? {} : { orderingKey: row.ordering_key as string }),
            },
            webhookId,
            now,
          ),
        );
        if (recovered.length === 0) return [];
        const made = await keys.inOrder(tx, recovered);
        // Each in its event's generation, as a delivery made when the event was published.
        const generations = new Map(events.map((row) => [row.event_id as string, Number(row.gen)]));
        await tx.query(insertDeliveries, [
          ...deliveryColumnsOf(made),
          made.map((delivery) => generations.get(delivery.eventId)!),
        ]);
        if (announce !== undefined) await tx.query(notifyWork, [announce.channel]);
        return made;
      });
    },
  };
}
