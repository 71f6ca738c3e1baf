import * as v from 'valibot';
import { response, failure, webhookIdParameter, queryParameter } from '../route-doc.js';
import type { Route } from '../handler.js';
import { refusal } from '../render-error.js';
import type { WebhookService } from '../../domain/webhooks.js';
import { PortalError } from '../../errors.js';

/** A webhook's call counts and health (extension routes), and disabling or enabling it by hand. */
export function webhookHealthRoutes(webhooks: WebhookService): Route[] {
  return [
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
  ];
}
