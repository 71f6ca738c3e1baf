import type { WebhookCall } from '../ports.js';
import type { EventRecord, WebhookRecord } from '../records.js';
import { VERSION } from '../shared/version.js';
import { signingSecrets } from '../domain/webhooks.js';
import { signWebhook } from './signature.js';

/** The body of a call: exactly these four fields, in this order. */
export function callBody(event: EventRecord): string {
  return JSON.stringify({ id: event.id, type: event.type, createdAt: event.createdAt, data: event.data });
}

/**
 * A signed call for `event` to `webhook`, made at `at` (Standard Webhooks headers plus the spec's
 * `X-Webhook-Signature`). `body` is `callBody(event)`, given when the caller kept it from an
 * earlier call of the same event: only the timestamp, and so the signature, differ between them.
 * During a secret rotation's grace the call carries one signature per secret, the new one first
 * (`v1,<new> v1,<old>`): the body is signed once with each, and both headers share the value.
 */
export function buildCall(webhook: WebhookRecord, event: EventRecord, at: Date, body = callBody(event)): WebhookCall {
  const timestamp = Math.floor(at.getTime() / 1000);
  const signature = signingSecrets(webhook, at)
    .map((secret) => signWebhook(secret, event.id, timestamp, body))
    .join(' ');
  const call: WebhookCall = {
    accountId: webhook.accountId,
    webhookId: webhook.id,
    url: webhook.url,
    body,
    headers: {
      'Content-Type': 'application/json',
      'User-Agent': `customer-portal/${VERSION}`,
      'webhook-id': event.id,
      'webhook-timestamp': String(timestamp),
      'webhook-signature': signature,
      'X-Webhook-Signature': signature,
    },
  };
  if (event.orderingKey !== undefined) call.orderingKey = event.orderingKey;
  return call;
}
