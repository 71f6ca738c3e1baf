import { DRY_RUN_LIMIT } from '../../domain/inputs.js';
import {
  RETRY_AFTER,
  response,
  created,
  failure,
  idempotencyKeyParameter,
  json,
  keyInProgress,
  keyReused,
  webhookIdParameter,
} from '../route-doc.js';
import { idempotencyKeyOf, idempotentReply } from '../idempotent-reply.js';
import { readJson } from '../json-body.js';
import type { Route } from '../handler.js';
import { refusal } from '../render-error.js';
import type { Webhook } from '../../records.js';
import type { WebhookService } from '../../domain/webhooks.js';

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
 * Beyond the spec (`extensions: true`): create, list and change webhooks, try a filter on recent
 * events, send a test call. Their deliveries, health and keys have files of their own.
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
            'The body is not JSON, or not `{type, url}` with a known type and an http(s) URL or one of a configured destination (the message names the schemes taken); a `filter` or `rateLimit` out of its grammar or range; or a malformed `Idempotency-Key`.',
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
        summary: "Change a webhook's filter or rate limit",
        parameters: [webhookIdParameter],
        tags: ['Webhooks'],
        description: `\`filter\`: events published from then on make a delivery for the webhook only when their \`data\` matches it; \`{"filter": null}\` removes it (every event of its type). Deliveries already made are kept. Try a filter first with \`POST /webhooks/dry-run\`.

\`rateLimit\`: at most that many of its calls start in any one-second window, across instances (1 … 10,000); \`{"rateLimit": null}\` removes it. It applies at once: deliveries waiting for a later second under the old limit are paced again, and the calls of the current second count toward the new one. Either key, or both; a key left out is kept.`,
        requestBody: { required: true, content: json('WebhookFilterInput') },
        responses: {
          200: response('The webhook as changed (no `filter` or `rateLimit` key once removed).', 'Webhook'),
          400: failure(
            'The body is not JSON, names neither `filter` nor `rateLimit`, the filter breaks its grammar or limits, or the rate limit is not a whole number from 1 to 10,000; the message names the part (an unknown operator, a bad path, an operand of the wrong kind).',
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
  ];
}
