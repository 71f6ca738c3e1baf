import { newId } from '../shared/ids.js';
import type { Storage } from '../ports.js';
import { publicShape, type EventRecord, type PortalEvent } from '../records.js';
import { atom } from '../shared/time.js';
import { PortalError, errorMessage } from '../errors.js';
import { checkAccountId, eventType, parseInput, publishOptions } from './inputs.js';
import type { EventCatalogue } from './event-types.js';

/** A new event record; stored with `Storage.publishEvents` or alongside the write that caused it. */
export function newEvent(accountId: string, type: string, data: unknown, now: Date, orderingKey?: string): EventRecord {
  const event: EventRecord = { id: newId('evt'), accountId, type, createdAt: atom(now), data };
  if (orderingKey !== undefined) event.orderingKey = orderingKey;
  return event;
}

/** What `events.publish` takes beside the event. */
export interface PublishOptions {
  /**
   * Deliveries of one webhook that share this key are called one at a time, in publish order: a
   * failing one holds back its key alone (1–255 characters, no control characters).
   */
  orderingKey?: string;
}

/**
 * `data` as the JSON it will be sent as: what is stored is exactly what receivers get (a `Date`
 * becomes its string, `undefined` fields vanish), and what cannot be JSON is refused here, not at
 * the first attempt.
 */
function jsonData(data: unknown): Record<string, unknown> {
  let text: string | undefined;
  try {
    text = JSON.stringify(data);
  } catch (error) {
    throw new PortalError('EVENT_DATA_NOT_JSON', errorMessage(error));
  }
  const parsed: unknown = text === undefined ? undefined : JSON.parse(text);
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed))
    throw new PortalError('EVENT_DATA_NOT_OBJECT');
  return parsed as Record<string, unknown>;
}

/** Publishing events: `portal.events`. */
export function createEventService(deps: {
  storage: Storage;
  clock: () => Date;
  eventTypes: readonly string[];
  /** Asks the worker for an immediate pass; called once events are stored. */
  notify?: () => void;
  /** The schemas data must match, by type. */
  catalogue?: EventCatalogue;
}) {
  const { storage, clock } = deps;
  const notify = deps.notify ?? (() => {});
  const type = eventType(deps.eventTypes);

  return {
    /**
     * Stores the event and one pending delivery per webhook of the account subscribed to `type` (and
     * whose filter its data matches), in one atomic step, and resolves the stored event once that
     * is durable; the first attempt then goes out at once (when this instance runs the worker, or
     * another instance hears of it through `Storage.subscribe`; otherwise at another instance's next
     * tick). With `orderingKey`, a delivery waits for the earlier ones of its webhook and key.
     * Data that breaks its type's schema (`eventTypes.define`) is refused with `EVENT_DATA_INVALID`.
     */
    async publish(
      accountId: string,
      eventType: string,
      data: unknown,
      options: PublishOptions = {},
    ): Promise<PortalEvent> {
      checkAccountId(accountId);
      parseInput(type, eventType, 'eventType');
      const { orderingKey } = parseInput(publishOptions, options, 'publishOptions');
      const event = newEvent(accountId, eventType, jsonData(data), clock(), orderingKey);
      deps.catalogue?.check(eventType, event.data);
      await storage.publishEvents([event]);
      notify();
      return publicShape(event);
    },
  };
}

export type EventService = ReturnType<typeof createEventService>;
