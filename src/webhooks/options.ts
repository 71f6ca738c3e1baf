import cron from 'node-cron';
import type { WebhookOptions } from '../options.js';
import { DEFAULT_RETRY_SCHEDULE } from '../rules/retry-schedule.js';
import { DEFAULT_DISABLE_AFTER_FAILURES, DEFAULT_DISABLE_AFTER_MS } from '../rules/webhook-health.js';
import { defaultConcurrencyPerAccount } from './worker.js';

export type ResolvedWebhookOptions = Required<WebhookOptions>;

const DEFAULT_TICK = '*/5 * * * * *';
const DEFAULT_TIMEOUT_MS = 15_000;
const DEFAULT_CONCURRENCY = 32;
const DEFAULT_MAX_WEBHOOKS_PER_ACCOUNT = 50;

const isPositiveInteger = (value: unknown): value is number => Number.isSafeInteger(value) && (value as number) > 0;

/** The `webhooks` options with defaults filled in, checked once at `createPortal` so a mistake fails at start. */
export function resolveWebhookOptions(options: WebhookOptions = {}): ResolvedWebhookOptions {
  const resolved: ResolvedWebhookOptions = {
    worker: options.worker ?? true,
    tick: options.tick ?? DEFAULT_TICK,
    timeoutMs: options.timeoutMs ?? DEFAULT_TIMEOUT_MS,
    concurrency: options.concurrency ?? DEFAULT_CONCURRENCY,
    concurrencyPerAccount:
      options.concurrencyPerAccount ?? defaultConcurrencyPerAccount(options.concurrency ?? DEFAULT_CONCURRENCY),
    adaptCallsInFlight: options.adaptCallsInFlight ?? true,
    retrySchedule: options.retrySchedule ?? DEFAULT_RETRY_SCHEDULE,
    allowPrivateNetworks: options.allowPrivateNetworks ?? false,
    maxPerAccount: options.maxPerAccount ?? DEFAULT_MAX_WEBHOOKS_PER_ACCOUNT,
    disableAfterMs: options.disableAfterMs ?? DEFAULT_DISABLE_AFTER_MS,
    disableAfterFailures: options.disableAfterFailures ?? DEFAULT_DISABLE_AFTER_FAILURES,
  };
  if (typeof resolved.tick !== 'string' || !cron.validate(resolved.tick)) {
    throw new TypeError(
      `webhooks.tick "${String(resolved.tick)}" is not a cron expression (node-cron syntax, seconds optional)`,
    );
  }
  if (!isPositiveInteger(resolved.timeoutMs))
    throw new TypeError('webhooks.timeoutMs must be a positive whole number of milliseconds');
  if (!isPositiveInteger(resolved.concurrency))
    throw new TypeError('webhooks.concurrency must be a positive whole number');
  if (!isPositiveInteger(resolved.concurrencyPerAccount))
    throw new TypeError('webhooks.concurrencyPerAccount must be a positive whole number');
  if (typeof resolved.adaptCallsInFlight !== 'boolean')
    throw new TypeError('webhooks.adaptCallsInFlight must be true or false');
  if (!isPositiveInteger(resolved.maxPerAccount))
    throw new TypeError('webhooks.maxPerAccount must be a positive whole number');
  if (!(Number.isSafeInteger(resolved.disableAfterMs) && resolved.disableAfterMs >= 0)) {
    throw new TypeError('webhooks.disableAfterMs must be a whole number of milliseconds, 0 or more');
  }
  if (!isPositiveInteger(resolved.disableAfterFailures))
    throw new TypeError('webhooks.disableAfterFailures must be a positive whole number');
  if (
    !Array.isArray(resolved.retrySchedule) ||
    !resolved.retrySchedule.every((step) => typeof step === 'number' && Number.isFinite(step) && step >= 0)
  ) {
    throw new TypeError('webhooks.retrySchedule must be a list of non-negative numbers of seconds');
  }
  return { ...resolved, retrySchedule: [...resolved.retrySchedule] };
}
