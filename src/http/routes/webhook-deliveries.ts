import * as v from 'valibot';
import { idPattern } from '../../shared/ids.js';
import { response, failure, json, pathParameter, webhookIdParameter, queryParameter } from '../route-doc.js';
import { readJson } from '../json-body.js';
import type { Route } from '../handler.js';
import { refusal } from '../render-error.js';
import type { WebhookService } from '../../domain/webhooks.js';
import type { DeliveryQueryInput } from '../../domain/inputs.js';
import { PortalError } from '../../errors.js';
import { wholeNumber } from '../query-number.js';

/**
 * The delivery log's query string as the service reads it: `limit` a whole number (`wholeNumber`),
 * the rest as given, for the service to check. Only the parameters the route's operation lists get here.
 */
function deliveryLogQuery(query: Record<string, string | string[] | undefined>): DeliveryQueryInput {
  const read: Record<string, string | number> = {};
  for (const [name, value] of Object.entries(query)) {
    if (Array.isArray(value)) throw new PortalError('QUERY_REPEATED', name);
    if (value === undefined) continue;
    read[name] = name === 'limit' ? wholeNumber(value) : value;
  }
  return read as DeliveryQueryInput;
}

/**
 * A webhook's delivery log (extension routes): its pages and filters, a redeliver, a recovery of
 * the deliveries that failed since a time.
 */
export function webhookDeliveryRoutes(webhooks: WebhookService): Route[] {
  return [
    {
      method: ['GET', 'HEAD'],
      path: '/webhooks/:webhookId/deliveries',
      extension: true,
      doc: {
        operationId: 'listWebhookDeliveries',
        summary: 'The delivery log of a webhook',
        tags: ['Webhooks'],
        description: `Newest first (by \`createdAt\`, those of one second the last made first), every attempt included, a page at a time. Each page after the first starts right after the last delivery of the page before, so deliveries made meanwhile do not shift a page; a refresh asks for the first page again, with \`since\` to get only what is newer. Filters combine: all must hold. Finished deliveries older than the portal's retention (\`retention.deliveriesMs\`, 30 days by default) are no longer listed.`,
        parameters: [
          webhookIdParameter,
          queryParameter(
            'limit',
            'How many deliveries a page holds: 1–500, 50 when not given.',
            v.pipe(v.number(), v.integer(), v.minValue(1), v.maxValue(500)),
          ),
          queryParameter(
            'cursor',
            'The `nextCursor` of the page before; without it, the first page.',
            v.pipe(v.string(), v.minLength(1), v.maxLength(200)),
          ),
          queryParameter(
            'status',
            'Only deliveries in this status.',
            v.picklist(['pending', 'succeeded', 'failed', 'cancelled']),
          ),
          queryParameter(
            'eventType',
            'Only deliveries of events of this type (`webhook.test` for test calls).',
            v.pipe(v.string(), v.minLength(1), v.maxLength(200)),
          ),
          queryParameter(
            'eventId',
            'Only the deliveries of this event (usually one; more when a recovery sent it again). Found by the event, not by walking the log.',
            v.pipe(v.string(), v.regex(idPattern('evt'))),
          ),
          queryParameter(
            'since',
            'Only deliveries made at or after this time (RFC 3339 with its offset, read to the second).',
            v.pipe(v.string(), v.isoTimestamp()),
          ),
          queryParameter(
            'until',
            'Only deliveries made before this time (RFC 3339 with its offset, read to the second).',
            v.pipe(v.string(), v.isoTimestamp()),
          ),
        ],
        responses: {
          200: response('A page of the delivery log, and the cursor of the next one.', 'DeliveryList'),
          400: failure(
            'A query parameter is malformed (`limit` outside 1–500, an unknown `status`, a `since` that is not a date-time, a `cursor` this list did not give), unknown, or given more than once.',
          ),
          404: failure('No such webhook in this account.'),
        },
      },
      async handler({ accountId, params, query }) {
        const deliveries = await webhooks.deliveries(accountId, params.webhookId!, deliveryLogQuery(query));
        if (deliveries === null) return refusal('WEBHOOK_NOT_FOUND', params.webhookId!);
        return { status: 200, body: { data: deliveries, nextCursor: deliveries.nextCursor } };
      },
    },
    {
      method: 'POST',
      path: '/webhooks/:webhookId/recover',
      extension: true,
      doc: {
        operationId: 'recoverWebhook',
        summary: 'Send again what a webhook missed',
        parameters: [webhookIdParameter],
        tags: ['Webhooks'],
        description: `Every event of the webhook created at or after \`since\` (to the second) that it did not get (its deliveries failed, or were cancelled while it was disabled, and none succeeded or is pending) is queued again, once: one new delivery each, due now. A second recovery queues none of them twice.`,
        requestBody: { required: true, content: json('RecoverInput') },
        responses: {
          202: response('How many events were queued again.', 'RecoverResult'),
          400: failure('The body is not JSON, or not `{since}` with a date-time.'),
          404: failure('No such webhook in this account.'),
          409: failure('The webhook is disabled: enable it first.'),
          413: failure('The body is over 64 KiB.'),
          415: failure('The body is not `application/json`.'),
        },
      },
      async handler({ accountId, params, req }) {
        const recovered = await webhooks.recover(accountId, params.webhookId!, (await readJson(req)) as never);
        if (recovered === null) return refusal('WEBHOOK_NOT_FOUND', params.webhookId!);
        return { status: 202, body: recovered };
      },
    },
    {
      method: 'POST',
      path: '/webhooks/:webhookId/deliveries/:deliveryId/redeliver',
      extension: true,
      doc: {
        operationId: 'redeliverWebhookDelivery',
        summary: 'Send a delivery again',
        parameters: [webhookIdParameter, pathParameter('deliveryId', 'The delivery id (`whd_…`).')],
        tags: ['Webhooks'],
        description: `The delivery becomes pending and due now, its earlier attempts kept; one that had ended starts the retry schedule again. While a call of the delivery is in flight, the redeliver is queued (\`redeliverQueued\`): one more call follows once that call is recorded, never two at once.`,
        responses: {
          202: response(
            'The delivery, pending again, or with `redeliverQueued` while its call is in flight.',
            'Delivery',
          ),
          404: failure('No such delivery of that webhook in this account.'),
          409: failure('The webhook of the delivery was deleted (there is nowhere to send it) or is disabled.'),
        },
      },
      async handler({ accountId, params }) {
        const { webhookId, deliveryId } = params;
        // The delivery must sit under the webhook the path names.
        const delivery = await webhooks.redeliver(accountId, deliveryId!, webhookId);
        if (delivery === null) return refusal('DELIVERY_NOT_FOUND', deliveryId!, webhookId!);
        return { status: 202, body: delivery };
      },
    },
  ];
}
