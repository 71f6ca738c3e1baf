import { api } from './api.js';
import { el, keptEdit, replace, whileBusy } from './dom.js';
import type { Webhook } from './types.js';

/** What the API takes: calls a second, 1 to 10,000. */
const MIN = 1;
const MAX = 10_000;

/** The limit as the summary says it. */
export const rateLimitText = (rateLimit: number | null | undefined) =>
  rateLimit === null || rateLimit === undefined
    ? 'none: calls go as fast as the receiver answers'
    : `at most ${rateLimit.toLocaleString('en')} ${rateLimit === 1 ? 'call' : 'calls'} a second`;

/**
 * One webhook's rate limit: shown and editable, empty for none. `saved` hears of the webhook as
 * stored; the API names what is wrong with a value it refuses.
 */
export function rateLimitPanel(
  base: string,
  errors: { show(error: unknown): void; clear(): void },
  saved: (webhook: Webhook) => void,
): { node: HTMLElement; show(webhook: Webhook): void } {
  const input = el('input', {
    id: 'edit-rate-limit',
    name: 'rateLimit',
    type: 'number',
    min: String(MIN),
    max: String(MAX),
    step: '1',
    inputmode: 'numeric',
    'aria-describedby': 'rate-limit-hint',
  });
  const save = el('button', { type: 'submit' }, 'Save rate limit');
  const status = el('div', { 'aria-live': 'polite' });
  const form = el(
    'form',
    { class: 'panel', 'aria-labelledby': 'rate-limit-heading' },
    el('h2', { id: 'rate-limit-heading' }, 'Rate limit'),
    el('label', { for: 'edit-rate-limit' }, 'Calls a second at most'),
    input,
    el(
      'p',
      { class: 'hint', id: 'rate-limit-hint' },
      `${MIN} to ${MAX.toLocaleString('en')}; empty for none. Deliveries beyond it wait for a later second, across every instance; other webhooks are not slowed.`,
    ),
    el('div', { class: 'actions' }, save),
    status,
  );
  const showStored = keptEdit(input);
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    return whileBusy(save, errors, async () => {
      const text = input.value.trim();
      const webhook = await api<Webhook>('PATCH', base, { rateLimit: text === '' ? null : Number(text) });
      replace(status, el('p', { class: 'hint', role: 'status' }, `Saved: ${rateLimitText(webhook.rateLimit)}.`));
      saved(webhook);
    });
  });
  return {
    node: form,
    /** Shows the stored limit, unless the field holds an edit of the one shown before. */
    show(webhook) {
      showStored(webhook.rateLimit === undefined ? '' : String(webhook.rateLimit));
    },
  };
}
