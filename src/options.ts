import type { AuthOption } from './http/auth.js';
import type { Logger } from './shared/logger.js';
import type { BlobStore, Notifier, Storage, WebhookTransport } from './ports.js';
import type { SealingOptions } from './domain/sealing.js';
import type { Destinations } from './webhooks/destinations.js';

export interface WebhookOptions {
  /** Run the delivery worker in this instance (default `true`); `false` serves the API only. */
  worker?: boolean;
  /** node-cron expression of the worker's poll (default every 5 seconds: `'*\/5 * * * * *'`). */
  tick?: string;
  /** How long one call may take before it counts as failed (default 15000). */
  timeoutMs?: number;
  /** Calls in flight at once per instance (default 32). */
  concurrency?: number;
  /** Calls of one account in flight at once per instance (default a quarter of `concurrency`, at least 1). */
  concurrencyPerAccount?: number;
  /**
   * Adapt each webhook's calls in flight to what its receiver takes: fewer after `429`, `503`,
   * timeouts and failed connections, more while calls succeed, a pause between tries while its
   * receiver is down (default `true`). `false`: every webhook may take the account's share whatever
   * it answers (a `Retry-After` still holds it).
   */
  adaptCallsInFlight?: boolean;
  /** Seconds to wait before each retry (default the Standard Webhooks schedule, about three days). */
  retrySchedule?: readonly number[];
  /** Webhooks one account may have; one more is refused with 409 (default 50). */
  maxPerAccount?: number;
  /**
   * A webhook whose calls have all failed for this long (from the first failure of the run), in at
   * least `disableAfterFailures` attempts in a row, is disabled (default 5 days: 432000000).
   */
  disableAfterMs?: number;
  /** The attempts in a row that must have failed before `disableAfterMs` disables a webhook (default 10). */
  disableAfterFailures?: number;
  /** Let the default HTTP transport call loopback and private addresses (default `false`). */
  allowPrivateNetworks?: boolean;
}

/** How long finished deliveries and events are kept (`retention`); `Infinity` keeps them all. */
export interface RetentionOptions {
  /** Events older than this go once no delivery names them. Default 30 days. */
  eventsMs?: number;
  /** Finished deliveries (succeeded, failed, cancelled) older than this go. Default 30 days. */
  deliveriesMs?: number;
}

interface AgreementOptions {
  /**
   * Every this many ms after an agreement is created, while it is open, an `agreement-reminder-due`
   * event per signer who may sign now (the host sends the reminder), made by the worker's tick
   * (default off). At least 60,000 (a minute).
   */
  reminderIntervalMs?: number;
}

export interface PortalOptions {
  /** Where records live (default: in memory). */
  storage?: Storage;
  /** Where bytes live (default: in memory). */
  blobs?: BlobStore;
  /** API keys, or a function from bearer token to account; default: the keys in `PORTAL_API_KEYS`. */
  auth?: AuthOption;
  /** Path prefix the API is served under (default `/v1`). */
  basePath?: string;
  /** Absolute URL of the API root, used to build links (default: from the request's Host). */
  publicUrl?: string;
  /**
   * Trust the proxy in front (default `false`): `X-Forwarded-Proto` / `X-Forwarded-Host` make the
   * public URL, and the last address of `X-Forwarded-For` (the one that proxy appended) is the
   * client's address in the audit trail.
   */
  trustProxy?: boolean;
  /** HMAC keys for download links, each at least 32 characters: the first signs, every one verifies (default: one random key). */
  signingKeys?: readonly string[];
  webhooks?: WebhookOptions;
  agreements?: AgreementOptions;
  /**
   * How long finished deliveries and events are kept: default 30 days each; `Infinity` keeps all.
   * Removed in batches on the webhook worker's tick, where the worker runs.
   */
  retention?: RetentionOptions;
  /** Performs webhook calls (default: the HTTP transport built from `webhooks`). */
  transport?: WebhookTransport;
  /**
   * Brokers a webhook may publish to instead of an HTTP receiver, the URL's scheme picking one:
   * `{ amqp: amqpDestination() }` from `customer-portal/adapters/amqp`, and likewise `nats`, `mqtt`,
   * `redis`, `sqs`. A webhook URL of a scheme none takes is a `400` naming those taken.
   */
  destinations?: Destinations;
  /** Event types a webhook may subscribe to. */
  eventTypes?: readonly string[];
  /** pino-compatible logger (default: silent). One line per request is logged at `info`. */
  logger?: Logger;
  /** The current time; injectable for tests of expiry and retries. */
  clock?: () => Date;
  /** Serve the routes beyond the spec (webhook management, file and attachment uploads); default `true`. */
  extensions?: boolean;
  /**
   * Mails signers: their identification code, a link issued with `send: true`, reminders with a
   * fresh link (with `agreements.reminderIntervalMs` and `publicUrl`), and `agreement-completed`
   * with the certificate. `smtpNotifier` from `customer-portal/adapters/smtp`, or your own. Mail is
   * kept with its agreement until sent, retried on `webhooks.retrySchedule`. Without it, the e-mail
   * code is not offered and `send: true` is refused.
   */
  notifier?: Notifier;
  /** The signing page: the origins that may frame it, and the disclosure a signer consents to. */
  signing?: SigningOptions;
  /**
   * The key that seals completed copies (PAdES): `{ p12, password?, timestampUrl? }`, or
   * `{ certificate, sign(digest, algorithm), timestampUrl? }` for a key kept elsewhere (an HSM, a
   * KMS). Without it, completed copies are stamped but not sealed.
   */
  sealing?: SealingOptions;
  /** The name mails speak in (default: the agreement's sender, `signerName`). */
  branding?: Branding | ((accountId: string) => Promise<Branding>);
  /**
   * Serve the customer portal page at `path` (default `/portal`), a path outside `basePath`: the
   * account's webhooks, deliveries and files, for a person holding an API key. Default off.
   */
  ui?: UiOptions | false;
}

export interface SigningOptions {
  /**
   * Origins (`https://app.example.com`) that may show the signing page in a frame: its CSP names
   * them in `frame-ancestors` (default `'none'`), and the page posts its progress to the parent
   * (`{type: "customer-portal:signing", status, agreementId, signerId}`) only when it is one of them.
   */
  frameAncestors?: readonly string[];
  /** The ESIGN consumer disclosure shown before signing; the trail records its SHA-256 with the consent. */
  disclosure?: { version: string; text: string };
}

/** Who the portal speaks for, in mails. */
export interface Branding {
  name: string;
  logoUrl?: string;
  accentColor?: string;
  supportEmail?: string;
}

/** `signing.frameAncestors`, checked: each an origin (scheme, host, port; no path), https unless it is localhost. */
export function resolveFrameAncestors(origins: unknown): string[] {
  if (origins === undefined) return [];
  if (!Array.isArray(origins))
    throw new TypeError('signing.frameAncestors must be an array of origins such as "https://app.example.com"');
  return origins.map((origin, index) => {
    const where = `signing.frameAncestors[${index}]`;
    if (typeof origin !== 'string' || !URL.canParse(origin))
      throw new TypeError(`${where} must be an origin such as "https://app.example.com"`);
    const url = new URL(origin);
    if (url.origin === 'null' || url.origin !== origin.replace(/\/+$/, ''))
      throw new TypeError(`${where} must be an origin alone (scheme, host and port, no path): "${url.origin}"`);
    const local = url.hostname === 'localhost' || url.hostname === '127.0.0.1' || url.hostname === '[::1]';
    if (url.protocol !== 'https:' && !(url.protocol === 'http:' && local))
      throw new TypeError(`${where} must be https (http only for localhost)`);
    return url.origin;
  });
}

/** `signing.disclosure`, checked; `null` when the host gives none (each language has its default, `src/domain/locales/`). */
export function resolveDisclosure(disclosure: unknown): { version: string; text: string } | null {
  if (disclosure === undefined) return null;
  const { version, text } = (disclosure ?? {}) as { version?: unknown; text?: unknown };
  if (typeof version !== 'string' || !/^[\x21-\x7e]{1,64}$/.test(version))
    throw new TypeError('signing.disclosure.version must be 1 to 64 visible ASCII characters');
  if (typeof text !== 'string' || text.trim() === '' || text.length > 20_000)
    throw new TypeError('signing.disclosure.text must be a non-empty string of at most 20,000 characters');
  return { version, text };
}

interface UiOptions {
  /** Where the page is served (default `/portal`); it must not overlap `basePath`. */
  path?: string;
}

const DEFAULT_UI_PATH = '/portal';

export const DEFAULT_EVENT_TYPES = [
  'customer-created',
  'agreement-created',
  'agreement-signed',
  'agreement-viewed',
  'agreement-signer-signed',
  'agreement-declined',
  'agreement-expired',
  'agreement-reminder-due',
  'agreement-voided',
] as const;
export const DEFAULT_BASE_PATH = '/v1';

/** `PORTAL_API_KEYS`: comma-separated keys, every one acting for the account `default`. */
export function apiKeysFromEnv(value: string | undefined): string[] {
  return (value ?? '')
    .split(',')
    .map((key) => key.trim())
    .filter((key) => key !== '');
}

/** `/v1`, `v1/` and `/v1/` all mean `/v1`; `''` and `/` mean the root. */
export function normalizeBasePath(basePath: string): string {
  const trimmed = basePath.replace(/^\/+|\/+$/g, '');
  if (!/^[A-Za-z0-9._~\-/]*$/.test(trimmed))
    throw new TypeError(`basePath "${basePath}" has characters a path cannot hold`);
  return trimmed === '' ? '' : '/' + trimmed;
}

export function normalizePublicUrl(publicUrl: string): string {
  if (!URL.canParse(publicUrl)) throw new TypeError(`publicUrl "${publicUrl}" is not an absolute URL`);
  const url = new URL(publicUrl);
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new TypeError('publicUrl must be http or https');
  return url.href.replace(/\/+$/, '');
}

/**
 * The page's path from the `ui` option, or `null` when the page is off. Checked at start: a path of
 * plain segments, not the root, and apart from `basePath` (neither inside the other).
 */
export function resolveUiPath(ui: unknown, basePath: string): string | null {
  if (ui === undefined || ui === false || ui === null) return null;
  if (typeof ui !== 'object' || Array.isArray(ui))
    throw new TypeError("ui must be an object such as { path: '/portal' }, or false");
  const { path = DEFAULT_UI_PATH, ...rest } = ui as { path?: unknown };
  const unknown = Object.keys(rest);
  if (unknown.length > 0) throw new TypeError(`ui has an unknown option "${unknown[0]}"; it takes only "path"`);
  if (typeof path !== 'string') throw new TypeError('ui.path must be a string such as "/portal"');
  const trimmed = path.replace(/\/+$/, '');
  const segments = trimmed.split('/').slice(1);
  if (
    !path.startsWith('/') ||
    segments.length === 0 ||
    segments.some((segment) => !/^[A-Za-z0-9._~-]+$/.test(segment) || /^\.{1,2}$/.test(segment))
  ) {
    throw new TypeError(
      `ui.path "${path}" must be an absolute path of plain segments ([A-Za-z0-9._~-]), such as "/portal", and not "/"`,
    );
  }
  const within = (inner: string, outer: string) => inner === outer || inner.startsWith(outer + '/');
  if (basePath === '' || within(trimmed, basePath) || within(basePath, trimmed)) {
    throw new TypeError(
      `ui.path "${trimmed}" overlaps basePath "${basePath || '/'}": the page and the API need paths apart, such as "/portal" and "/v1"`,
    );
  }
  return trimmed;
}
