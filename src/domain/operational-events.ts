import { errorMessage } from '../errors.js';
import type { Logger } from '../shared/logger.js';
import type { WebhookDisabledReason } from '../records.js';

/*
 * Operational events: what the portal tells its host about webhook delivery and the completed
 * copies of signed agreements, so that the host can tell its customer ("your endpoint has been
 * disabled"). In process only, never stored or sent: each is emitted once, by the instance whose
 * write made the change.
 */

interface OperationalEventBase {
  accountId: string;
  webhookId: string;
  /** When it happened, ATOM. */
  at: string;
}

/** The webhook was disabled: by a `410 Gone`, by calls failing past the thresholds, or by hand. */
export interface WebhookDisabledEvent extends OperationalEventBase {
  type: 'webhook.disabled';
  reason: WebhookDisabledReason;
  /** The delivery whose attempt disabled it; `null` when disabled by hand. */
  deliveryId: string | null;
}

/** A delivery ended failed: the last retry of its schedule failed (`retries-exhausted`), or a `410 Gone` ended it (`gone`). */
export interface DeliveryExhaustedEvent extends OperationalEventBase {
  type: 'delivery.exhausted';
  reason: 'retries-exhausted' | 'gone';
  deliveryId: string;
  eventId: string;
  /** Attempts the delivery has made in all. */
  attempts: number;
  /** The last attempt's status code, or `null` when no answer came. */
  statusCode: number | null;
  /** Why no answer came (timeout, refused, …); `null` when one did. */
  error: string | null;
}

/** A delivery succeeded after failed attempts. */
export interface DeliveryRecoveredEvent extends OperationalEventBase {
  type: 'delivery.recovered';
  reason: 'succeeded-after-failures';
  deliveryId: string;
  eventId: string;
  /** Failed attempts before this success. */
  failedAttempts: number;
}

interface SealingEventBase {
  accountId: string;
  agreementId: string;
  /** The document concerned, or `null` for the certificate of completion or the agreement as a whole. */
  documentId: string | null;
  at: string;
  /** What went wrong, as the library or the key store said it. */
  reason: string;
}

/** A seal was made without its timestamp: the authority (`sealing.timestampUrl`) failed, so the copy is `B-B`. */
export interface SealingDegradedEvent extends SealingEventBase {
  type: 'sealing.degraded';
}

/**
 * A completed copy could not be made: the document is a PDF the library cannot read or update
 * (`final`: it never will be; the document keeps `signedFileHash: null`), or the sealing key failed
 * (retried on the schedule; `final` once given up).
 */
export interface SealingFailedEvent extends SealingEventBase {
  type: 'sealing.failed';
  final: boolean;
}

export type OperationalEvent =
  | WebhookDisabledEvent
  | DeliveryExhaustedEvent
  | DeliveryRecoveredEvent
  | SealingDegradedEvent
  | SealingFailedEvent;
export type OperationalEventType = OperationalEvent['type'];
/** The event of type `T`. */
export type OperationalEventOf<T extends OperationalEventType> = Extract<OperationalEvent, { type: T }>;
export type OperationalListener<T extends OperationalEventType> = (event: OperationalEventOf<T>) => unknown;

const OPERATIONAL_EVENT_TYPES: readonly OperationalEventType[] = [
  'webhook.disabled',
  'delivery.exhausted',
  'delivery.recovered',
  'sealing.degraded',
  'sealing.failed',
];

export interface OperationalEvents {
  /** Calls `listener` with every event of `type`; returns the function that stops it. */
  on<T extends OperationalEventType>(type: T, listener: OperationalListener<T>): () => void;
  /** Stops `listener`; `false` when it was not listening to `type`. */
  off<T extends OperationalEventType>(type: T, listener: OperationalListener<T>): boolean;
  /**
   * Calls the listeners of the event's type, in the order they were added, synchronously. A
   * listener that throws, or whose promise rejects, is logged and the others still run: a host's
   * listener never breaks delivery.
   */
  emit(event: OperationalEvent): void;
}

/** A typed emitter of operational events; `logger` hears of listeners that fail. */
export function createOperationalEvents(logger: Logger): OperationalEvents {
  const listeners = new Map<OperationalEventType, Set<(event: OperationalEvent) => unknown>>(
    OPERATIONAL_EVENT_TYPES.map((type) => [type, new Set()]),
  );
  const setOf = (type: string) => {
    const set = listeners.get(type as OperationalEventType);
    if (set === undefined)
      throw new TypeError(
        `portal.on: unknown event type "${type}"; the types are ${OPERATIONAL_EVENT_TYPES.join(', ')}`,
      );
    return set;
  };
  const failed = (event: OperationalEvent, error: unknown) =>
    logger.error(
      {
        eventType: event.type,
        ...('webhookId' in event ? { webhookId: event.webhookId } : { agreementId: event.agreementId }),
        err: errorMessage(error),
      },
      'an operational event listener failed',
    );

  const events: OperationalEvents = {
    on(type, listener) {
      if (typeof listener !== 'function') throw new TypeError('portal.on: the listener must be a function');
      setOf(type).add(listener as (event: OperationalEvent) => unknown);
      return () => void events.off(type, listener);
    },
    off(type, listener) {
      return setOf(type).delete(listener as (event: OperationalEvent) => unknown);
    },
    emit(event) {
      for (const listener of [...setOf(event.type)]) {
        try {
          const result = listener(event);
          if (result instanceof Promise) result.catch((error: unknown) => failed(event, error));
        } catch (error) {
          failed(event, error);
        }
      }
    },
  };
  return events;
}
