/**
 * The few record helpers the benches need, written against the public types only: the library's
 * own id and time helpers are internals, free to move.
 */
import { randomUUID } from 'node:crypto';
import type { EventRecord } from '../../src/index.js';

/** An id of the library's shape and length: the prefix, `_`, then 22 characters of `[0-9A-Za-z]`. */
function benchId(prefix: string): string {
  return `${prefix}_${randomUUID().replaceAll('-', '').slice(0, 22)}`;
}

/** A date-time in the API's ATOM form: UTC, second precision, `+00:00`. */
function atom(date: Date): string {
  return date.toISOString().slice(0, 19) + '+00:00';
}

/** An event as `portal.events.publish` stores it, for benches that fill an outbox through `Storage.publishEvents`. */
export function newEvent(accountId: string, type: string, data: unknown, now: Date): EventRecord {
  return { id: benchId('evt'), accountId, type, createdAt: atom(now), data };
}
