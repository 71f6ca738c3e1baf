import * as v from 'valibot';
import { idPattern } from '../../shared/ids.js';
import { DRY_RUN_LIMIT, MAX_SECRET_GRACE_MS } from '../../domain/inputs.js';
import {
  RETRY_AFTER,
  response,
  created,
  failure,
  idempotencyKeyParameter,
  json,
  keyInProgress,
  keyReused,
  pathParameter,
  webhookIdParameter,
  queryParameter,
} from '../route-doc.js';
import { idempotencyKeyOf, idempotentReply } from '../idempotent-reply.js';
import { readJson, readOptionalJson } from '../json-body.js';
import type { Route } from '../handler.js';
import { refusal } from '../render-error.js';
import type { Webhook } from '../../records.js';
import type { WebhookService } from '../../domain/webhooks.js';
import type { DeliveryQueryInput } from '../../domain/inputs.js';
import { PortalError } from '../../errors.js';
import { wholeNumber } from '../query-number.js';

/** `GET` and `DELETE /webhooks/{webhookId}`. An id of the wrong shape cannot exist: 404, as the spec lists no 400. */
export function webhookRoutes(webhooks: WebhookService): Route[] {
  return [
    {
      method: ['GET', 'HEAD'],
      path: '/webhooks/:webhookId',
      doc: {
        operationId: 'getWebhook',
        summary: 'Get a webhook',
        parameters: [webhookIdParameter],
        tags: ['Webhooks'],
        responses: {
          200: response('The webhook.', 'Webhook'),
          404: failure('No such webhook in this account.'),
        },
      },
      async handler({ accountId, params }) {
        const webhook = await webhooks.get(accountId, params.webhookId!);
        if (webhook === null) return refusal('WEBHOOK_NOT_FOUND', params.webhookId!);
        return { status: 200, body: webhook };
      },
    },
    {
      method: 'DELETE',
      path: '/webhooks/:webhookId',
      doc: {
        operationId: 'deleteWebhook',
        summary: 'Delete a webhook',
        parameters: [webhookIdParameter],
        tags: ['Webhooks'],
        description: 'Its pending deliveries are cancelled.',
        responses: {
          204: response('Deleted; no body.'),
          404: failure('No such webhook in this account.'),
        },
      },
      async handler({ accountId, params }) {
        if (!(await webhooks.delete(accountId, params.webhookId!)))
          return refusal('WEBHOOK_NOT_FOUND', params.webhookId!);
        return { status: 204 };
      },
    },
  ];
}

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
 * Beyond the spec (`extensions: true`): create, list, filter and test webhooks, try a filter on
 * recent events, rotate their secrets, read and redeliver their deliveries.
 */
export function webhookExtensionRoutes(webhooks: WebhookService): Route[] {
  return [
    {
      method: 'POST',
      path: '/webhooks',
      extension: true,
      doc: {
        operationId: 'createWebhook',
        summary: 'Create a webhook',
        tags: ['Webhooks'],
        description: `The secret is generated. The types listed are the default \`eventTypes\`; a portal made with others accepts those.`,
        parameters: [idempotencyKeyParameter],
        requestBody: { required: true, content: json('WebhookInput') },
        responses: {
          201: response(
            'The webhook made, with its secret; with `Idempotent-Replayed: true`, the first answer to this `Idempotency-Key`, given again.',
            'Webhook',
            created,
          ),
          400: failure(
            'The body is not JSON, or not `{type, url}` with a known type and an http(s) URL; or a malformed `Idempotency-Key`.',
          ),
          409: failure(
            `The account holds \`webhooks.maxPerAccount\` webhooks already (default 50); or ${keyInProgress}.`,
            { 'Retry-After': RETRY_AFTER },
          ),
          413: failure('The body is over 64 KiB.'),
          415: failure('The body is not `application/json`.'),
          422: keyReused,
        },
      },
      async handler({ accountId, req, baseUrl }) {
        const key = idempotencyKeyOf(req);
        const body = (await readJson(req)) as never;
        if (key !== undefined) {
          const answer = (webhook: Webhook) => ({
            status: 201,
            body: JSON.stringify(webhook),
            location: `${baseUrl}/webhooks/${webhook.id}`,
          });
          return idempotentReply(await webhooks.createIdempotent(accountId, body, { key, answer }));
        }
        const webhook = await webhooks.create(accountId, body);
        return { status: 201, body: webhook, headers: { Location: `${baseUrl}/webhooks/${webhook.id}` } };
      },
    },
    {
      method: ['GET', 'HEAD'],
      path: '/webhooks',
      extension: true,
      doc: {
        operationId: 'listWebhooks',
        summary: 'List the webhooks of the account',
        tags: ['Webhooks'],
        description: `Oldest first; not paginated.`,
        responses: { 200: response('Every webhook of the account.', 'WebhookList') },
      },
      async handler({ accountId }) {
        return { status: 200, body: { data: await webhooks.list(accountId) } };
      },
    },
    {
      method: 'PATCH',
      path: '/webhooks/:webhookId',
      extension: true,
      doc: {
        operationId: 'setWebhookFilter',
        summary: 'Give a webhook a filter, or remove it',
        parameters: [webhookIdParameter],
        tags: ['Webhooks'],
        description: `Events published from then on make a delivery for the webhook only when their \`data\` matches the filter; \`{"filter": null}\` removes it (every event of its type). Deliveries already made are kept. Try a filter first with \`POST /webhooks/dry-run\`.`,
        requestBody: { required: true, content: json('WebhookFilterInput') },
        responses: {
          200: response('The webhook, with its filter (none shown once removed).', 'Webhook'),
          400: failure(
            'The body is not JSON, or the filter breaks its grammar or limits; the message names the part (an unknown operator, a bad path, an operand of the wrong kind).',
          ),
          404: failure('No such webhook in this account.'),
          413: failure('The body is over 64 KiB.'),
          415: failure('A body that is not `application/json`.'),
        },
      },
      async handler({ accountId, params, req }) {
        const webhook = await webhooks.setFilter(accountId, params.webhookId!, (await readJson(req)) as never);
        if (webhook === null) return refusal('WEBHOOK_NOT_FOUND', params.webhookId!);
        return { status: 200, body: webhook };
      },
    },
    {
      method: ['GET', 'HEAD'],
      path: '/webhooks/:webhookId/public-keys',
      extension: true,
      doc: {
        operationId: 'getWebhookPublicKeys',
        summary: "The public keys an ed25519 webhook's calls verify with, and the link for receivers",
        parameters: [webhookIdParameter],
        tags: ['Webhooks'],
        description: `For a webhook created with \`"signatureScheme": "ed25519"\`: its current key and, while a rotation's grace lasts, the previous one, and \`url\`, a link that serves them without the API key (\`GET /webhook-keys/{webhookId}\`). The link is signed with the portal's \`signingKeys\` and stays the same across rotations.`,
        responses: {
          200: response('The keys and the link.', 'WebhookPublicKeysLink'),
          404: failure('No such webhook in this account.'),
          409: failure('The webhook signs with a shared secret (`hmac-sha256`): it has no public keys.'),
        },
      },
      async handler({ accountId, params, baseUrl }) {
        const found = await webhooks.publicKeys(accountId, params.webhookId!, baseUrl);
        if (found === null) return refusal('WEBHOOK_NOT_FOUND', params.webhookId!);
        return { status: 200, body: found };
      },
    },
    {
      method: 'POST',
      path: '/webhooks/dry-run',
      extension: true,
      doc: {
        operationId: 'dryRunWebhookFilter',
        summary: "Try a filter on the account's recent events",
        tags: ['Webhooks'],
        description: `Which of the account's most recent events of \`type\` (\`limit\`, default ${DRY_RUN_LIMIT.default}, at most ${DRY_RUN_LIMIT.max}) a webhook with \`filter\` would get: each event, the most recent first, with \`matches\`. Nothing is stored or sent. Events older than the portal's retention are gone and not tried.`,
        requestBody: { required: true, content: json('DryRunInput') },
        responses: {
          200: response('The events tried, and how many matched.', 'DryRunResult'),
          400: failure(
            'The body is not JSON, `type` is not one of the event types, `limit` is out of range, or the filter breaks its grammar or limits (the message names the part).',
          ),
          413: failure('The body is over 64 KiB.'),
          415: failure('A body that is not `application/json`.'),
        },
      },
      async handler({ accountId, req }) {
        return { status: 200, body: await webhooks.dryRun(accountId, (await readJson(req)) as never) };
      },
    },
    {
      method: 'POST',
      path: '/webhooks/:webhookId/test',
      extension: true,
      doc: {
        operationId: 'testWebhook',
        summary: 'Send a test call',
        parameters: [webhookIdParameter],
        tags: ['Webhooks'],
        description: `A signed call of type \`webhook.test\` (its data \`{"webhookId"}\`) goes to the webhook now, whatever its type, and is recorded and retried like any delivery.`,
        responses: {
          202: response('The delivery of the test call, pending; its attempts show in the delivery log.', 'Delivery'),
          404: failure('No such webhook in this account.'),
          409: failure('The webhook is disabled: enable it first.'),
        },
      },
      async handler({ accountId, params }) {
        const delivery = await webhooks.sendTest(accountId, params.webhookId!);
        if (delivery === null) return refusal('WEBHOOK_NOT_FOUND', params.webhookId!);
        return { status: 202, body: delivery };
      },
    },
    {
      method: 'POST',
      path: '/webhooks/:webhookId/rotate-secret',
      extension: true,
      doc: {
        operationId: 'rotateWebhookSecret',
        summary: 'Give a webhook a new secret, without downtime',
        parameters: [webhookIdParameter],
        tags: ['Webhooks'],
        description: `Until \`graceMs\` has passed (default 24 h) every call is signed with both the new and the replaced secret (\`webhook-signature: v1,<new> v1,<old>\`), so a receiver verifies with either while it moves to the new one; then with the new one alone. A rotation within an earlier one's grace keeps only the secret it replaces. The body is optional.`,
        requestBody: { required: false, content: json('SecretRotationInput') },
        responses: {
          200: response('The webhook with its new secret.', 'Webhook'),
          400: failure(
            `The body is not JSON, or \`graceMs\` is not a whole number of milliseconds from 0 to ${MAX_SECRET_GRACE_MS} (7 days).`,
          ),
          404: failure('No such webhook in this account.'),
          413: failure('The body is over 64 KiB.'),
          415: failure('A body that is not `application/json`.'),
        },
      },
      async handler({ accountId, params, req }) {
        // The body is optional: without one (undefined), the default grace.
        const webhook = await webhooks.rotateSecret(
          accountId,
          params.webhookId!,
          (await readOptionalJson(req)) as never,
        );
        if (webhook === null) return refusal('WEBHOOK_NOT_FOUND', params.webhookId!);
        return { status: 200, body: webhook };
      },
    },
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
      method: ['GET', 'HEAD'],
      path: '/webhooks/:webhookId/stats',
      extension: true,
      doc: {
        operationId: 'getWebhookStats',
        summary: "A webhook's calls over the last 24 hours or 7 days",
        tags: ['Webhooks'],
        description: `The calls made to the webhook, in buckets ending with the current hour (hourly for \`24h\`, six-hourly for \`7d\`): by outcome, and the estimated median and 95th percentile of their durations. Counted as each attempt is recorded, so a week reads at most 168 hourly rows whatever the traffic. On fs, a delivery past 50 attempts read back from a compacted log counts the 50 it keeps.`,
        parameters: [
          webhookIdParameter,
          queryParameter('window', '`24h` (the default) or `7d`.', v.picklist(['24h', '7d'])),
        ],
        responses: {
          200: response('The calls by bucket, and the totals.', 'WebhookStats'),
          400: failure('`window` is not `24h` or `7d`, or is given more than once.'),
          404: failure('No such webhook in this account.'),
        },
      },
      async handler({ accountId, params, query }) {
        if (Array.isArray(query.window)) throw new PortalError('QUERY_REPEATED', 'window');
        const stats = await webhooks.stats(accountId, params.webhookId!, { window: query.window });
        if (stats === null) return refusal('WEBHOOK_NOT_FOUND', params.webhookId!);
        return { status: 200, body: stats };
      },
    },
    {
      method: ['GET', 'HEAD'],
      path: '/webhooks/:webhookId/health',
      extension: true,
      doc: {
        operationId: 'getWebhookHealth',
        summary: 'How the calls of a webhook are going',
        parameters: [webhookIdParameter],
        tags: ['Webhooks'],
        description: `Whether the webhook is enabled, why it was disabled, and its run of failures. A webhook is disabled at once by a \`410 Gone\` answer, and once its calls have all failed for \`webhooks.disableAfterMs\` (default 5 days) in at least \`webhooks.disableAfterFailures\` attempts in a row (default 10).`,
        responses: {
          200: response('The health of the webhook.', 'WebhookHealth'),
          404: failure('No such webhook in this account.'),
        },
      },
      async handler({ accountId, params }) {
        const health = await webhooks.health(accountId, params.webhookId!);
        if (health === null) return refusal('WEBHOOK_NOT_FOUND', params.webhookId!);
        return { status: 200, body: health };
      },
    },
    {
      method: 'POST',
      path: '/webhooks/:webhookId/disable',
      extension: true,
      doc: {
        operationId: 'disableWebhook',
        summary: 'Disable a webhook',
        parameters: [webhookIdParameter],
        tags: ['Webhooks'],
        description: `It gets no calls: its deliveries that fall due meanwhile are cancelled, and \`recover\` queues their events again once it is enabled. A webhook disabled already stays so, its reason kept.`,
        responses: {
          204: response('Disabled; no body.'),
          404: failure('No such webhook in this account.'),
        },
      },
      async handler({ accountId, params }) {
        if ((await webhooks.disable(accountId, params.webhookId!)) === null)
          return refusal('WEBHOOK_NOT_FOUND', params.webhookId!);
        return { status: 204 };
      },
    },
    {
      method: 'POST',
      path: '/webhooks/:webhookId/enable',
      extension: true,
      doc: {
        operationId: 'enableWebhook',
        summary: 'Enable a webhook again',
        parameters: [webhookIdParameter],
        tags: ['Webhooks'],
        description: `Its run of failures is forgotten. Events it missed while disabled are sent only by \`recover\`.`,
        responses: {
          204: response('Enabled; no body.'),
          404: failure('No such webhook in this account.'),
        },
      },
      async handler({ accountId, params }) {
        if ((await webhooks.enable(accountId, params.webhookId!)) === null)
          return refusal('WEBHOOK_NOT_FOUND', params.webhookId!);
        return { status: 204 };
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

/**
 * The public keys link of an ed25519 webhook (`webhooks.publicKeys`): served whatever `extensions`
 * says, as a link the portal handed out must keep working. The link's signature is its authorization.
 */
export function webhookKeyRoutes(webhooks: WebhookService): Route[] {
  return [
    {
      method: ['GET', 'HEAD'],
      path: '/webhook-keys/:webhookId',
      extension: 'served-always',
      doc: {
        parameters: [
          pathParameter('webhookId', 'The webhook id (`wbh_…`).'),
          queryParameter('account', "The webhook's account, as the link gives it.", { type: 'string' }, true),
          queryParameter('signature', "The link's signature, as the link gives it.", { type: 'string' }, true),
        ],
        operationId: 'fetchWebhookPublicKeys',
        summary: "An ed25519 webhook's public keys, for its receiver (no API key)",
        tags: ['Webhooks'],
        description: `The link of \`GET /webhooks/{webhookId}/public-keys\`: a JWK Set of the webhook's current key and, during a rotation's grace, the previous one, so a receiver can verify \`v1a,\` signatures across a rotation without holding anything secret. \`Cache-Control: public, max-age=300\`.`,
        responses: {
          200: response('The keys.', 'WebhookPublicKeys'),
          400: failure('A query parameter other than `account` and `signature`, or one given twice.'),
          404: failure(
            'The link is not one the portal made (a wrong or altered signature), or its webhook is gone or signs with a shared secret.',
          ),
        },
      },
      public: true,
      async handler({ params, query }) {
        const { account, signature } = query;
        const keys =
          typeof account === 'string' && typeof signature === 'string'
            ? await webhooks.publicKeysByLink(account, params.webhookId!, signature)
            : null;
        if (keys === null) return refusal('WEBHOOK_KEYS_NOT_FOUND');
        // Public keys: any cache may keep them a few minutes (a rotation's grace is longer).
        return { status: 200, body: { keys }, headers: { 'Cache-Control': 'public, max-age=300' } };
      },
    },
  ];
}
