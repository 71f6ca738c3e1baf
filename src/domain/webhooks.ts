import { PortalError } from '../errors.js';
import { isId, newId } from '../shared/ids.js';
import type { Storage, WebhookChanges } from '../ports.js';
import type { Delivery, DeliveryRecord, PortalEvent, Webhook, WebhookHealth, WebhookRecord } from '../records.js';
import { atom, atomAtLeast } from '../shared/time.js';
import { type SignatureScheme, jwkX, newSigningSecret, publicKeyOf, schemeOf } from '../shared/webhook-keys.js';
import {
  DEFAULT_SECRET_GRACE_MS,
  type DeliveryQueryInput,
  type SecretRotationInput,
  checkAccountId,
  normalUrl,
  parseInput,
  recoverInput,
  secretRotationInput,
  webhookInput,
  type WebhookUrls,
  webhookFilterInput,
  dryRunInput,
  DRY_RUN_LIMIT,
} from './inputs.js';
import { checkFilter, matchesFilter, type EventFilter } from '../rules/event-filter.js';
import { deliveryQuery, encodeCursor } from './delivery-log.js';
import type { LinkSigner } from './download-links.js';
import { createIdempotency, fingerprintOf, type IdempotentCreate, type IdempotentOutcome } from './idempotency.js';
import type { OperationalEvent } from './operational-events.js';
import { healthShape } from '../rules/webhook-health.js';
import { type WebhookStats, statsWindow, summarize, windowStart } from '../rules/call-stats.js';

export interface WebhookInput {
  type: string;
  url: string;
  /**
   * `ed25519`: its calls carry `v1a,` signatures, verified with the webhook's public key (`whpk_…`);
   * default `hmac-sha256`: `v1,` signatures under a shared `whsec_` secret.
   */
  signatureScheme?: SignatureScheme;
  /** Which events of its type it gets (see `rules/event-filter.ts`); absent or `null`: every one. */
  filter?: EventFilter | null;
  /** At most this many of its calls start in any one-second window (1 … 10,000); absent or `null`: no limit. */
  rateLimit?: number | null;
}

/** What `webhooks.dryRun` takes: a type, a filter (`null`: none) and how many recent events to try. */
export interface DryRunInput {
  type: string;
  filter: EventFilter | null;
  limit?: number;
}

/** One of the events a dry run tried, and whether the filter matches it. */
export interface DryRunEvent extends PortalEvent {
  matches: boolean;
}

/** A dry run's answer: the events tried, the most recent first, and how many matched. */
export interface DryRunResult {
  data: DryRunEvent[];
  matched: number;
}

/** What `webhooks.recover` takes: events since when (ATOM or any RFC 3339 date-time, or a `Date`). */
export interface RecoverInput {
  since: string | Date;
}

/** The type of the event a test call carries; no webhook subscribes to it. */
export const TEST_EVENT_TYPE = 'webhook.test';

/** A webhook secret in the Standard Webhooks form: `whsec_` + base64 of 32 random bytes. */
export function newWebhookSecret(): string {
  return newSigningSecret('hmac-sha256');
}

/**
 * The secrets a call made at `at` is signed with: the webhook's own, then, while a rotation's grace
 * lasts (until `previousSecretUntil`, exclusive), the secret it replaced.
 */
export function signingSecrets(webhook: WebhookRecord, at: Date): string[] {
  const { secret, previousSecret, previousSecretUntil } = webhook;
  if (previousSecret === undefined || previousSecretUntil === undefined) return [secret];
  return at.getTime() < Date.parse(previousSecretUntil) ? [secret, previousSecret] : [secret];
}

/** What a public keys link signs: tagged, so that it means nothing anywhere else. */
const keysMessage = (accountId: string, webhookId: string) =>
  JSON.stringify(['customer-portal/webhook-keys/v1', accountId, webhookId]);

/**
 * A webhook URL as answers show it: a broker's password (`amqp://user:pass@…`) replaced by `***`,
 * and a user without a password too, which is a token there (`nats://token@…`). HTTP URLs carry no
 * credentials and come back as they are.
 */
function shownUrl(url: string): string {
  if (!url.includes('@')) return url;
  const parsed = URL.canParse(url) ? new URL(url) : null;
  if (parsed === null) return url;
  if (parsed.password !== '') parsed.password = '***';
  else if (parsed.username !== '') parsed.username = '***';
  else return url;
  return parsed.href;
}

/** A webhook as the API shows it: no account. Field by field, as a copy without one key costs more. */
function webhookShape(record: WebhookRecord): Webhook {
  if (schemeOf(record.secret) === 'ed25519') {
    // The private key never leaves the portal: the receiver verifies with the public one.
    const shape: Webhook = { id: record.id, type: record.type, url: shownUrl(record.url), createdAt: record.createdAt };
    if (record.filter !== undefined) shape.filter = record.filter;
    if (record.rateLimit !== undefined) shape.rateLimit = record.rateLimit;
    shape.signatureScheme = 'ed25519';
    shape.publicKey = publicKeyOf(record.secret);
    return shape;
  }
  const shape: Webhook = {
    id: record.id,
    type: record.type,
    url: shownUrl(record.url),
    secret: record.secret,
    createdAt: record.createdAt,
  };
  if (record.filter !== undefined) shape.filter = record.filter;
  if (record.rateLimit !== undefined) shape.rateLimit = record.rateLimit;
  return shape;
}

/** One key of a webhook's public key set (RFC 7517/8037), and which it is: the current one, or one a rotation's grace keeps. */
export interface WebhookPublicKey {
  kty: 'OKP';
  crv: 'Ed25519';
  alg: 'EdDSA';
  use: 'sig';
  /** The key as `whpk_…`, which `verifyWebhook` takes. */
  kid: string;
  /** The raw public key, base64url. */
  x: string;
  status: 'current' | 'previous';
  /** Until when the previous key still signs (ATOM); `null` for the current one. */
  until: string | null;
}

/** The public keys an ed25519 webhook's calls verify with at `at`: its own, and the previous one during a rotation's grace. */
function publicKeySet(record: WebhookRecord, at: Date): WebhookPublicKey[] {
  const key = (secret: string, status: WebhookPublicKey['status'], until: string | null): WebhookPublicKey => {
    const kid = publicKeyOf(secret);
    return { kty: 'OKP', crv: 'Ed25519', alg: 'EdDSA', use: 'sig', kid, x: jwkX(kid), status, until };
  };
  const [current, previous] = signingSecrets(record, at);
  return previous === undefined
    ? [key(current!, 'current', null)]
    : [key(current!, 'current', null), key(previous, 'previous', record.previousSecretUntil!)];
}

/** A delivery as the API shows it: no account, no lease. */
function deliveryShape(record: DeliveryRecord): Delivery {
  const {
    id,
    webhookId,
    eventId,
    eventType,
    status,
    attempts,
    attemptCount,
    nextAttemptAt,
    createdAt,
    orderingKey,
    redeliverQueued,
  } = record;
  return {
    id,
    webhookId,
    eventId,
    eventType,
    status,
    attempts,
    attemptCount,
    nextAttemptAt,
    createdAt,
    orderingKey,
    redeliverQueued,
  };
}

/** A page of a delivery log: the deliveries, and the cursor of the page after it (`null`: the last). */
export type DeliveryList = Delivery[] & { readonly nextCursor: string | null };

/** The rules for webhook records; the routes and `portal.webhooks` both call these. */
export function createWebhookService(deps: {
  storage: Storage;
  clock: () => Date;
  eventTypes: readonly string[];
  /**
   * Webhooks one account may have (`webhooks.maxPerAccount`, resolved with its default in
   * `webhooks/options.ts`, which `createPortal` always passes); the store enforces it atomically as
   * it inserts (`Storage.insertWebhook`). A service made without it sets no limit.
   */
  maxPerAccount?: number;
  /** Asks the delivery worker for a pass now (after a redeliver). */
  notify?: () => void;
  /** Tells the host of a webhook disabled by hand (`portal.on`). */
  emit?: (event: OperationalEvent) => void;
  /** Signs the links to webhooks' public keys. */
  signer: LinkSigner;
  /** The API root links are built under outside a request. */
  publicUrl?: string;
  /** The schemes a webhook URL may have beyond `http(s)`: those of the `destinations` configured (default none). */
  urls?: WebhookUrls;
}) {
  const { storage, clock } = deps;
  const notify = deps.notify ?? (() => {});
  const emit = deps.emit ?? (() => {});
  const input = webhookInput(deps.eventTypes, deps.urls);
  const idempotency = createIdempotency({ storage, clock });

  const newRecord = (
    accountId: string,
    { type, url, filter, rateLimit, signatureScheme }: WebhookInput,
  ): WebhookRecord => ({
    id: newId('wbh'),
    accountId,
    type,
    url: normalUrl(url),
    secret: newSigningSecret(signatureScheme ?? 'hmac-sha256'),
    createdAt: atom(clock()),
    ...(filter === undefined || filter === null ? {} : { filter }),
    ...(rateLimit === undefined || rateLimit === null ? {} : { rateLimit }),
  });
  const dryRun = dryRunInput(deps.eventTypes);

  /** The input of a create, its filter checked (a 400 naming the part that is wrong). */
  function createFields(body: WebhookInput): WebhookInput {
    const fields = parseInput(input, body, 'webhook');
    return fields.filter === undefined || fields.filter === null
      ? fields
      : { ...fields, filter: checkFilter(fields.filter, 'webhook.filter') };
  }

  async function health(accountId: string, webhookId: string): Promise<WebhookHealth | null> {
    checkAccountId(accountId);
    if (!isId('wbh', webhookId)) return null;
    const [record, webhook] = await Promise.all([
      storage.getWebhookHealth(accountId, webhookId),
      storage.getWebhook(accountId, webhookId),
    ]);
    return record && healthShape(record, atom(clock()), webhook?.rateLimit ?? null);
  }

  /**
   * Changes the webhook's `filter`, its `rateLimit`, or both; `null` removes one. A filter applies
   * to events published from then on; a rate limit at once, to what is waiting too. Resolves the
   * webhook, or `null` when absent or of another account; a filter that breaks the grammar or its
   * limits, a rate limit out of range, or a body naming neither is a 400 naming the part.
   */
  async function update(accountId: string, webhookId: string, body: WebhookChanges): Promise<Webhook | null> {
    checkAccountId(accountId);
    const { filter, rateLimit } = parseInput(webhookFilterInput, body, 'webhook');
    const changes: WebhookChanges = {};
    if (filter !== undefined) changes.filter = filter === null ? null : checkFilter(filter, 'webhook.filter');
    if (rateLimit !== undefined) changes.rateLimit = rateLimit;
    if (!isId('wbh', webhookId)) return null;
    const record = await storage.updateWebhook(accountId, webhookId, changes, atom(clock()));
    return record && webhookShape(record);
  }

  return {
    async create(accountId: string, body: WebhookInput): Promise<Webhook> {
      checkAccountId(accountId);
      const record = newRecord(accountId, createFields(body));
      await storage.insertWebhook(record, { maxPerAccount: deps.maxPerAccount });
      return webhookShape(record);
    },

    /**
     * `create` under an `Idempotency-Key`: the first request with the key creates the webhook and
     * keeps `request.answer` of it; a retry with the same fields gets that answer again and creates
     * nothing. The key of a request that failed (a 400, the account's limit) is free again.
     */
    async createIdempotent(
      accountId: string,
      body: WebhookInput,
      request: IdempotentCreate<Webhook>,
    ): Promise<IdempotentOutcome> {
      checkAccountId(accountId);
      const fields = createFields(body);
      const fingerprint = fingerprintOf('POST /webhooks', {
        type: fields.type,
        url: fields.url,
        filter: fields.filter ?? undefined,
        rateLimit: fields.rateLimit ?? undefined,
        signatureScheme: fields.signatureScheme,
      });
      const start = await idempotency.begin(accountId, request.key, fingerprint);
      if (start.completed !== undefined) return idempotency.replay(start.completed, fingerprint);
      try {
        const record = newRecord(accountId, fields);
        const answer = request.answer(webhookShape(record));
        await storage.insertWebhook(
          record,
          { maxPerAccount: deps.maxPerAccount },
          idempotency.completion(start.claim, fingerprint, answer),
        );
        return { answer, replayed: false };
      } catch (error) {
        await idempotency.release(start.claim);
        throw error;
      }
    },

    /** The webhook, or `null` when absent or of another account. */
    async get(accountId: string, id: string): Promise<Webhook | null> {
      checkAccountId(accountId);
      // An id not of our shape (a control character in it, say) names nothing: it never reaches the store.
      if (!isId('wbh', id)) return null;
      const record = await storage.getWebhook(accountId, id);
      return record && webhookShape(record);
    },

    /** Every webhook of the account, oldest first. */
    async list(accountId: string): Promise<Webhook[]> {
      checkAccountId(accountId);
      return (await storage.listWebhooks(accountId)).map(webhookShape);
    },

    update,

    /** `update` with `{ filter }`: gives the webhook `filter`, or with `null` removes it. */
    setFilter: (accountId: string, webhookId: string, body: { filter: EventFilter | null }) =>
      update(accountId, webhookId, body),

    /**
     * Which of the account's most recent events of `type` (up to `limit`, default 20, at most 100)
     * a webhook with `filter` would get, without storing or sending anything: each event with
     * `matches`, the most recent first, and how many matched. A bad filter is a 400 naming the part.
     */
    async dryRun(accountId: string, body: DryRunInput): Promise<DryRunResult> {
      checkAccountId(accountId);
      const { type, filter, limit = DRY_RUN_LIMIT.default } = parseInput(dryRun, body, 'dryRun');
      const checked = filter === null ? null : checkFilter(filter, 'dryRun.filter');
      const events = await storage.recentEvents(accountId, type, limit);
      const data = events.map(({ id, type, createdAt, data }) => ({
        id,
        type,
        createdAt,
        data,
        matches: checked === null || matchesFilter(checked, data),
      }));
      return { data, matched: data.filter((event) => event.matches).length };
    },

    /** Removes the webhook and cancels its pending deliveries; `false` when absent. */
    async delete(accountId: string, id: string): Promise<boolean> {
      checkAccountId(accountId);
      if (!isId('wbh', id)) return false;
      return storage.deleteWebhook(accountId, id);
    },

    /**
     * Gives the webhook a new secret. For `graceMs` (default 24 h, at most 7 days; 0: none) every
     * call is signed with both the new and the replaced secret, so a receiver can move to the new one
     * without a failed call; then with the new one alone. A rotation within an earlier one's grace
     * keeps only the secret it replaces. Resolves the webhook with its new secret, or `null` when
     * absent or of another account; a bad `graceMs` is a 400 naming it.
     */
    async rotateSecret(
      accountId: string,
      webhookId: string,
      options: SecretRotationInput = {},
    ): Promise<Webhook | null> {
      checkAccountId(accountId);
      const { graceMs = DEFAULT_SECRET_GRACE_MS } = parseInput(secretRotationInput, options, 'rotation');
      if (!isId('wbh', webhookId)) return null;
      // The new key is of the webhook's scheme, which never changes.
      const current = await storage.getWebhook(accountId, webhookId);
      if (current === null) return null;
      const rotation = {
        secret: newSigningSecret(schemeOf(current.secret)),
        previousSecretUntil: graceMs === 0 ? null : atomAtLeast(clock(), graceMs),
      };
      const record = await storage.rotateWebhookSecret(accountId, webhookId, rotation);
      return record && webhookShape(record);
    },

    /**
     * An ed25519 webhook's public keys (`publicKeySet`: the current one, and the previous one while
     * a rotation's grace lasts) and the link that serves them without the API key, for receivers
     * to fetch: stable across rotations, signed with the portal's `signingKeys`, under `baseUrl`
     * (default: the `publicUrl` option). `null` when absent or of another account; a 409 for a
     * webhook signing with a shared secret.
     */
    async publicKeys(
      accountId: string,
      webhookId: string,
      baseUrl?: string,
    ): Promise<{ keys: WebhookPublicKey[]; url: string } | null> {
      checkAccountId(accountId);
      if (!isId('wbh', webhookId)) return null;
      const record = await storage.getWebhook(accountId, webhookId);
      if (record === null) return null;
      if (schemeOf(record.secret) !== 'ed25519') throw new PortalError('WEBHOOK_NO_PUBLIC_KEYS', webhookId);
      const root = baseUrl ?? deps.publicUrl;
      if (root === undefined)
        throw new TypeError(
          'webhooks.publicKeys: give baseUrl, or set the publicUrl option, to build the link outside a request',
        );
      const query = new URLSearchParams({
        account: accountId,
        signature: deps.signer.signText(keysMessage(accountId, webhookId)),
      });
      return { keys: publicKeySet(record, clock()), url: `${root}/webhook-keys/${webhookId}?${query}` };
    },

    /**
     * The public keys a link of `publicKeys` serves: `null` when its signature is not one of the
     * portal's, or the webhook is absent or signs with a shared secret (the route answers 404 alike).
     */
    async publicKeysByLink(
      accountId: string,
      webhookId: string,
      signature: string,
    ): Promise<WebhookPublicKey[] | null> {
      if (!isId('wbh', webhookId) || !deps.signer.verifyText(keysMessage(accountId, webhookId), signature)) return null;
      const record = await storage.getWebhook(accountId, webhookId);
      if (record === null || schemeOf(record.secret) !== 'ed25519') return null;
      return publicKeySet(record, clock());
    },

    /**
     * A page of the webhook's delivery log, newest first, every attempt included: up to `limit`
     * (default 50, at most 500) deliveries, after the page whose `nextCursor` is `cursor`, of one
     * `status` or `eventType`, made at or after `since` and before `until` (each optional). The
     * list's `nextCursor` gives the next page (`null`: none). `null` when the webhook is absent
     * or of another account (so "no such webhook" and "nothing delivered yet" differ); a bad
     * query is a 400 naming the part.
     */
    async deliveries(
      accountId: string,
      webhookId: string,
      input: DeliveryQueryInput = {},
    ): Promise<DeliveryList | null> {
      checkAccountId(accountId);
      const query = deliveryQuery(input);
      if (!isId('wbh', webhookId)) return null;
      if ((await storage.getWebhook(accountId, webhookId)) === null) return null;
      const page = await storage.listDeliveries(accountId, webhookId, query);
      const list = page.deliveries.map(deliveryShape);
      // Not enumerable: the list is still an array of deliveries to compare, spread and serialise.
      return Object.defineProperty(list, 'nextCursor', {
        value: page.next === null ? null : encodeCursor(page.next),
        enumerable: false,
      }) as DeliveryList;
    },

    /**
     * Sends a signed `webhook.test` call to the webhook now, whatever its type, recorded in its
     * delivery log and retried like any other; the event's data names the webhook. `null` when the
     * webhook is absent or of another account; a 409 while it is disabled.
     */
    async sendTest(accountId: string, webhookId: string): Promise<Delivery | null> {
      checkAccountId(accountId);
      if (!isId('wbh', webhookId)) return null;
      const state = await storage.getWebhookHealth(accountId, webhookId);
      if (state === null) return null;
      // Its delivery would be cancelled unsent: say so instead.
      if (state.disabledAt !== null) throw new PortalError('WEBHOOK_DISABLED', webhookId);
      const event = {
        id: newId('evt'),
        accountId,
        type: TEST_EVENT_TYPE,
        createdAt: atom(clock()),
        data: { webhookId },
      };
      const [delivery] = await storage.publishEvents([event], { webhookId });
      // Deleted in between: there is no webhook left to test.
      if (delivery === undefined) return null;
      notify();
      return deliveryShape(delivery);
    },

    /** How the webhook's calls are going, and whether it is disabled; `null` when absent or of another account. */
    health,

    /**
     * Disables the webhook: it gets no calls, and its deliveries that fall due meanwhile are
     * cancelled (`recover` queues their events again once it is enabled). Already disabled, it
     * stays so, its reason kept. Resolves its health; `null` when absent or of another account.
     */
    async disable(accountId: string, webhookId: string): Promise<WebhookHealth | null> {
      checkAccountId(accountId);
      if (!isId('wbh', webhookId)) return null;
      const at = atom(clock());
      const disabled = await storage.disableWebhook(accountId, webhookId, at);
      if (disabled === null) return null;
      if (disabled) emit({ type: 'webhook.disabled', accountId, webhookId, deliveryId: null, reason: 'manual', at });
      return health(accountId, webhookId);
    },

    /**
     * How the webhook's calls went over `window` (`24h`, hourly buckets, the default; or `7d`, 6-hour
     * buckets), ending with the current hour: calls by outcome and the estimated p50 and p95 of
     * their durations, each bucket and in total. Read from the hourly counts the store keeps, so a
     * week costs at most 168 rows. `null` when the webhook is absent or of another account.
     */
    async stats(accountId: string, webhookId: string, input: { window?: unknown } = {}): Promise<WebhookStats | null> {
      checkAccountId(accountId);
      const window = statsWindow(input.window);
      if (!isId('wbh', webhookId)) return null;
      if ((await storage.getWebhook(accountId, webhookId)) === null) return null;
      const now = clock();
      return summarize(window, now, await storage.callStats(accountId, webhookId, windowStart(window, now)));
    },

    /**
     * Enables the webhook again, its run of failures forgotten; events missed meanwhile are sent
     * only by `recover`. Resolves its health; `null` when absent or of another account.
     */
    async enable(accountId: string, webhookId: string): Promise<WebhookHealth | null> {
      checkAccountId(accountId);
      if (!isId('wbh', webhookId)) return null;
      if ((await storage.enableWebhook(accountId, webhookId)) === null) return null;
      return health(accountId, webhookId);
    },

    /**
     * Queues again, once, every event of the webhook since `since` that it did not get: deliveries
     * that failed (their retries exhausted, or a 410) or were cancelled while it was disabled, and
     * none of its deliveries succeeded or is pending. One new delivery each, due now. Resolves how
     * many; `null` when the webhook is absent or of another account; a 409 while it is disabled.
     */
    async recover(accountId: string, webhookId: string, input: RecoverInput): Promise<{ queued: number } | null> {
      checkAccountId(accountId);
      const { since } = parseInput(recoverInput, input, 'recover');
      if (!isId('wbh', webhookId)) return null;
      const made = await storage.recoverDeliveries(
        accountId,
        webhookId,
        atom(typeof since === 'string' ? new Date(since) : since),
        atom(clock()),
      );
      if (made === null) return null;
      if (made.length > 0) notify();
      return { queued: made.length };
    },

    /**
     * Sends the delivery again: pending, due now, the attempts so far kept in the log. A delivery
     * that had ended (succeeded or failed) starts the retry schedule from its first step; one still
     * pending is only brought forward. While its call is in flight (a live lease) the redeliver is
     * queued (`redeliverQueued`): one more call follows once that one is recorded, and one delivery
     * never has two calls at once. `null` when absent or of another account; a 409 when its
     * webhook was deleted, as there is nowhere to send it, or is disabled. Given `webhookId`, a
     * delivery of another webhook is absent too.
     */
    async redeliver(accountId: string, deliveryId: string, webhookId?: string): Promise<Delivery | null> {
      checkAccountId(accountId);
      if (!isId('whd', deliveryId) || (webhookId !== undefined && !isId('wbh', webhookId))) return null;
      const current = await storage.getDelivery(accountId, deliveryId);
      if (current === null || (webhookId !== undefined && current.webhookId !== webhookId)) return null;
      const state = await storage.getWebhookHealth(accountId, current.webhookId);
      if (state === null) throw new PortalError('DELIVERY_WEBHOOK_DELETED', deliveryId);
      if (state.disabledAt !== null) throw new PortalError('WEBHOOK_DISABLED', current.webhookId);
      const delivery = await storage.redeliver(accountId, deliveryId, atom(clock()));
      if (delivery === null) return null;
      notify();
      return deliveryShape(delivery);
    },
  };
}

export type WebhookService = ReturnType<typeof createWebhookService>;
