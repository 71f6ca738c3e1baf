import { idempotencyKeyOf, idempotentReply } from '../idempotent-reply.js';
import { readJson, readOptionalJson } from '../json-body.js';
import type { Route } from '../handler.js';
import { refusal } from '../render-error.js';
import { jsonString } from '../reply.js';
import type { Webhook } from '../../records.js';
import type { WebhookService } from '../../domain/webhooks.js';
import type { DeliveryQueryInput } from '../../domain/inputs.js';
import { PortalError } from '../../errors.js';
import { wholeNumber } from '../query-number.js';

/**
 * A webhook as JSON text: what `JSON.stringify` makes of it, put together from its known fields as
 * Fastify does from a response schema (hot path: the most read record).
 */
export function webhookJson(webhook: Webhook): string {
  return (
    '{"id":' +
    jsonString(webhook.id) +
    ',"type":' +
    jsonString(webhook.type) +
    ',"url":' +
    jsonString(webhook.url) +
    (webhook.secret === undefined ? '' : ',"secret":' + jsonString(webhook.secret)) +
    ',"createdAt":' +
    jsonString(webhook.createdAt) +
    (webhook.filter === undefined ? '' : ',"filter":' + JSON.stringify(webhook.filter)) +
    (webhook.signatureScheme === undefined ? '' : ',"signatureScheme":' + jsonString(webhook.signatureScheme)) +
    (webhook.publicKey === undefined ? '' : ',"publicKey":' + jsonString(webhook.publicKey)) +
    '}'
  );
}

/** `GET` and `DELETE /webhooks/{webhookId}`. An id of the wrong shape cannot exist: 404, as the spec lists no 400. */
export function webhookRoutes(webhooks: WebhookService): Route[] {
  return [
    {
      method: ['GET', 'HEAD'],
      path: '/webhooks/:webhookId',
      async handler({ accountId, params }) {
        const webhook = await webhooks.get(accountId, params.webhookId!);
        if (webhook === null) return refusal('WEBHOOK_NOT_FOUND', params.webhookId!);
        return { status: 200, json: webhookJson(webhook) };
      },
    },
    {
      method: 'DELETE',
      path: '/webhooks/:webhookId',
      async handler({ accountId, params }) {
        if (!(await webhooks.delete(accountId, params.webhookId!))) return refusal('WEBHOOK_NOT_FOUND', params.webhookId!);
        return { status: 204 };
      },
    },
  ];
}

/** The query parameters of the delivery log, each at most once. */
const DELIVERY_LOG_QUERY = ['limit', 'cursor', 'status', 'eventType', 'eventId', 'since', 'until'];

/** The delivery log's query string as the service reads it: `limit` a whole number (`wholeNumber`), the rest as given, for the service to check. */
function deliveryLogQuery(query: Record<string, string | string[] | undefined>): DeliveryQueryInput {
  const read: Record<string, string | number> = {};
  for (const name of DELIVERY_LOG_QUERY) {
    const value = query[name];
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
      async handler({ accountId, req, baseUrl }) {
        const key = idempotencyKeyOf(req);
        const body = (await readJson(req)) as never;
        if (key !== undefined) {
          const answer = (webhook: Webhook) => ({ status: 201, body: webhookJson(webhook), location: `${baseUrl}/webhooks/${webhook.id}` });
          return idempotentReply(await webhooks.createIdempotent(accountId, body, { key, answer }));
        }
        const webhook = await webhooks.create(accountId, body);
        return { status: 201, json: webhookJson(webhook), headers: { Location: `${baseUrl}/webhooks/${webhook.id}` } };
      },
    },
    {
      method: ['GET', 'HEAD'],
      path: '/webhooks',
      async handler({ accountId }) {
        return { status: 200, body: { data: await webhooks.list(accountId) } };
      },
    },
    {
      method: 'PATCH',
      path: '/webhooks/:webhookId',
      async handler({ accountId, params, req }) {
        const webhook = await webhooks.setFilter(accountId, params.webhookId!, (await readJson(req)) as never);
        if (webhook === null) return refusal('WEBHOOK_NOT_FOUND', params.webhookId!);
        return { status: 200, json: webhookJson(webhook) };
      },
    },
    {
      method: ['GET', 'HEAD'],
      path: '/webhooks/:webhookId/public-keys',
      async handler({ accountId, params, baseUrl }) {
        const found = await webhooks.publicKeys(accountId, params.webhookId!, baseUrl);
        if (found === null) return refusal('WEBHOOK_NOT_FOUND', params.webhookId!);
        return { status: 200, body: found };
      },
    },
    {
      method: 'POST',
      path: '/webhooks/dry-run',
      async handler({ accountId, req }) {
        return { status: 200, body: await webhooks.dryRun(accountId, (await readJson(req)) as never) };
      },
    },
    {
      method: 'POST',
      path: '/webhooks/:webhookId/test',
      async handler({ accountId, params }) {
        const delivery = await webhooks.sendTest(accountId, params.webhookId!);
        if (delivery === null) return refusal('WEBHOOK_NOT_FOUND', params.webhookId!);
        return { status: 202, body: delivery };
      },
    },
    {
      method: 'POST',
      path: '/webhooks/:webhookId/rotate-secret',
      async handler({ accountId, params, req }) {
        // The body is optional: without one (undefined), the default grace.
        const webhook = await webhooks.rotateSecret(accountId, params.webhookId!, (await readOptionalJson(req)) as never);
        if (webhook === null) return refusal('WEBHOOK_NOT_FOUND', params.webhookId!);
        return { status: 200, json: webhookJson(webhook) };
      },
    },
    {
      method: ['GET', 'HEAD'],
      path: '/webhooks/:webhookId/deliveries',
      query: DELIVERY_LOG_QUERY,
      async handler({ accountId, params, query }) {
        const deliveries = await webhooks.deliveries(accountId, params.webhookId!, deliveryLogQuery(query));
        if (deliveries === null) return refusal('WEBHOOK_NOT_FOUND', params.webhookId!);
        return { status: 200, body: { data: deliveries, nextCursor: deliveries.nextCursor } };
      },
    },
    {
      method: ['GET', 'HEAD'],
      path: '/webhooks/:webhookId/stats',
      query: ['window'],
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
      async handler({ accountId, params }) {
        const health = await webhooks.health(accountId, params.webhookId!);
        if (health === null) return refusal('WEBHOOK_NOT_FOUND', params.webhookId!);
        return { status: 200, body: health };
      },
    },
    {
      method: 'POST',
      path: '/webhooks/:webhookId/disable',
      async handler({ accountId, params }) {
        if ((await webhooks.disable(accountId, params.webhookId!)) === null) return refusal('WEBHOOK_NOT_FOUND', params.webhookId!);
        return { status: 204 };
      },
    },
    {
      method: 'POST',
      path: '/webhooks/:webhookId/enable',
      async handler({ accountId, params }) {
        if ((await webhooks.enable(accountId, params.webhookId!)) === null) return refusal('WEBHOOK_NOT_FOUND', params.webhookId!);
        return { status: 204 };
      },
    },
    {
      method: 'POST',
      path: '/webhooks/:webhookId/recover',
      async handler({ accountId, params, req }) {
        const recovered = await webhooks.recover(accountId, params.webhookId!, (await readJson(req)) as never);
        if (recovered === null) return refusal('WEBHOOK_NOT_FOUND', params.webhookId!);
        return { status: 202, body: recovered };
      },
    },
    {
      method: 'POST',
      path: '/webhooks/:webhookId/deliveries/:deliveryId/redeliver',
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
      query: ['account', 'signature'],
      public: true,
      async handler({ params, query }) {
        const { account, signature } = query;
        const keys =
          typeof account === 'string' && typeof signature === 'string' ? await webhooks.publicKeysByLink(account, params.webhookId!, signature) : null;
        if (keys === null) return refusal('WEBHOOK_KEYS_NOT_FOUND');
        // Public keys: any cache may keep them a few minutes (a rotation's grace is longer).
        return { status: 200, body: { keys }, headers: { 'Cache-Control': 'public, max-age=300' } };
      },
    },
  ];
}
