/**
 * The delivery log and the events read back: a delivery by id, a webhook's deliveries newest first
 * in pages (the order of `listDeliveries` in every adapter), an account's latest events of a type.
 * A delivery is in the queue while pending and in portal_deliveries once finished, moved in one
 * statement: a read, in one snapshot, finds it in exactly one of the two.
 */
import { PortalError } from '../../../src/errors.js';
import type { Storage } from '../../../src/ports.js';
import type { DeliveryQuery } from '../../../src/records.js';
import type { Db } from '../client.js';
import type { Names } from '../schema.js';
import { deliveryColumns, eventColumns, toDelivery, toEvent } from '../storage-rows.js';

export function createDeliveryLog(
  db: Db,
  names: Names,
): Pick<Storage, 'recentEvents' | 'getDelivery' | 'listDeliveries'> {
  const { table } = names;
  // From the index on (account_id, type, created_at), read backwards.
  const recentEvents = `SELECT ${eventColumns()} FROM ${table('events')}
    WHERE account_id = $1::text AND type = $2::text
    ORDER BY created_at DESC
    LIMIT $3::int`;
  const selectDelivery = `SELECT ${deliveryColumns()} FROM ${table('queue')} WHERE account_id = $1::text AND id = $2::text
    UNION ALL SELECT ${deliveryColumns()} FROM ${table('deliveries')} WHERE account_id = $1::text AND id = $2::text`;
  /**
   * A page of a delivery log: the statement for the filters given (one text per combination, so
   * each is planned for what it filters on), its parameters in order. In the queue and in the log,
   * the index on (webhook_id, created_at, seq) is read backwards from the cursor or `until`, and stops
   * at `since` or the page's length; the two are merged.
   */
  const pageStatements = new Map<string, string>();
  function deliveryPage(
    accountId: string,
    webhookId: string,
    query: DeliveryQuery,
  ): { text: string; params: unknown[] } {
    const params: unknown[] = [accountId, webhookId];
    const where = ['webhook_id = $2::text', 'account_id = $1::text'];
    const add = (condition: (at: string) => string, ...values: unknown[]) => {
      const at = values.map((value) => `$${params.push(value)}`);
      where.push(condition(at.join(',')));
    };
    if (query.after !== undefined) {
      // A bigint's range, checked here: a 19-digit key past it would fail the cast in the server.
      if (!/^[0-9]{1,19}$/.test(query.after.key) || BigInt(query.after.key) > 9223372036854775807n) {
        throw new PortalError('INPUT_INVALID', 'cursor', 'is not one this list gave; pass nextCursor as it came.');
      }
      params.push(query.after.createdAt, query.after.key);
      where.push(`(created_at, seq) < ($${params.length - 1}::timestamptz, $${params.length}::bigint)`);
    }
    if (query.status !== undefined) add((at) => `status = ${at}::text`, query.status);
    if (query.eventType !== undefined) add((at) => `event_type = ${at}::text`, query.eventType);
    if (query.eventId !== undefined) add((at) => `event_id = ${at}::text`, query.eventId);
    if (query.since !== undefined) add((at) => `created_at >= ${at}::timestamptz`, query.since);
    if (query.until !== undefined) add((at) => `created_at < ${at}::timestamptz`, query.until);
    params.push(query.limit + 1);
    const shape = where.join(' AND ');
    let text = pageStatements.get(shape);
    if (text === undefined) {
      // Ordered by the table's columns (d.): a bare created_at here would name the formatted text
      // the select list gives back, and sort every delivery of the webhook by it.
      const part = (
        name: string,
      ) => `(SELECT ${deliveryColumns('d')}, d.seq::text AS page_key, d.created_at AS page_at, d.seq AS page_seq
        FROM ${table(name)} AS d
        WHERE ${shape}
        ORDER BY d.created_at DESC, d.seq DESC
        LIMIT $${params.length}::int)`;
      text = `SELECT * FROM (${part('queue')} UNION ALL ${part('deliveries')}) AS page
        ORDER BY page.page_at DESC, page.page_seq DESC
        LIMIT $${params.length}::int`;
      pageStatements.set(shape, text);
    }
    return { text, params };
  }

  return {
    async recentEvents(accountId, type, limit) {
      return (await db.query(recentEvents, [accountId, type, limit])).map((row) => toEvent(row));
    },
    async getDelivery(accountId, id) {
      const [row] = await db.query(selectDelivery, [accountId, id]);
      return row === undefined ? null : toDelivery(row);
    },
    async listDeliveries(accountId, webhookId, query) {
      const { text, params } = deliveryPage(accountId, webhookId, query);
      const rows = await db.query(text, params);
      const deliveries = rows.slice(0, query.limit).map((row) => toDelivery(row));
      const last = rows.length > query.limit ? rows[query.limit - 1]! : undefined;
      return {
        deliveries,
        next: last === undefined ? null : { createdAt: deliveries.at(-1)!.createdAt, key: last.page_key as string },
      };
    },
  };
}
