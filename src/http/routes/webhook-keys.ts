import { MAX_SECRET_GRACE_MS } from '../../domain/inputs.js';
import { response, failure, json, pathParameter, webhookIdParameter, queryParameter } from '../route-doc.js';
import { readOptionalJson } from '../json-body.js';
import type { Route } from '../handler.js';
import { refusal } from '../render-error.js';
import type { WebhookService } from '../../domain/webhooks.js';

/** A webhook's secret rotation and, for an ed25519 webhook, the link to its public keys (extension routes). */
export function webhookSecretRoutes(webhooks: WebhookService): Route[] {
  return [
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
