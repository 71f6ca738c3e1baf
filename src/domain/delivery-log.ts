import { PortalError } from '../errors.js';
import type { DeliveryCursor, DeliveryQuery } from '../records.js';
import { atom, isRealDateTime } from '../shared/time.js';
import { DELIVERIES_PAGE, type DeliveryQueryInput, deliveryQueryInput, parseInput } from './inputs.js';

const ATOM = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\+00:00$/;

/**
 * The cursor a client is given for the page after this one: the last delivery's time and the
 * store's key for it, as base64url JSON. Opaque to clients; a store reads only what it wrote.
 */
export const encodeCursor = (cursor: DeliveryCursor): string =>
  Buffer.from(JSON.stringify([cursor.createdAt, cursor.key])).toString('base64url');

/** The position a cursor names; `null` when the text is not one `encodeCursor` made. */
function decodeCursor(text: string): DeliveryCursor | null {
  let value: unknown;
  try {
    value = JSON.parse(Buffer.from(text, 'base64url').toString('utf8'));
  } catch {
    return null;
  }
  if (!Array.isArray(value) || value.length !== 2) return null;
  const [createdAt, key] = value as unknown[];
  if (
    typeof createdAt !== 'string' ||
    !ATOM.test(createdAt) ||
    !isRealDateTime(createdAt) ||
    typeof key !== 'string' ||
    key === '' ||
    key.length > 64
  ) {
    return null;
  }
  return { createdAt, key };
}

const toAtom = (value: string | Date | undefined) =>
  value === undefined ? undefined : atom(typeof value === 'string' ? new Date(value) : value);

/**
 * The store's query for a page of a delivery log, from what a caller gave (the route's query
 * string, read, or `portal.webhooks.deliveries`' options): each part checked, a bad one a 400
 * naming it. `since` and `until` are read to the second: made at or after `since`, before `until`.
 */
export function deliveryQuery(input: DeliveryQueryInput): DeliveryQuery {
  const {
    limit = DELIVERIES_PAGE.default,
    cursor,
    status,
    eventType,
    eventId,
    since,
    until,
  } = parseInput(deliveryQueryInput, input, 'deliveries');
  const after = cursor === undefined ? undefined : decodeCursor(cursor);
  if (after === null)
    throw new PortalError('INPUT_INVALID', 'cursor', 'is not one this list gave; pass nextCursor as it came.');
  const query: DeliveryQuery = { limit };
  if (after !== undefined) query.after = after;
  if (status !== undefined) query.status = status;
  if (eventType !== undefined) query.eventType = eventType;
  if (eventId !== undefined) query.eventId = eventId;
  if (since !== undefined) query.since = toAtom(since);
  if (until !== undefined) query.until = toAtom(until);
  return query;
}
