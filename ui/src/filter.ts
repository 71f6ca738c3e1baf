import { api } from './api.js';
import { el, keptEdit, replace, whileBusy } from './dom.js';
import { time } from './format.js';
import type { DryRunResult, EventFilter, Webhook } from './types.js';

/**
 * The filter as the text area holds it: JSON, or nothing for none. A parse error is reported in
 * the page's words; the API names what is wrong with a filter that parses.
 */
export function parseFilter(text: string): EventFilter | null {
  if (text.trim() === '') return null;
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new Error(
      'The filter is not JSON: write it as an object, such as {"customer.tier": "gold"}, or leave it empty.',
    );
  }
  return parsed as EventFilter;
}

/** A text area for a filter, with its label and a hint of the grammar. */
export function filterField(id: string, label: string): { node: HTMLElement; input: HTMLTextAreaElement } {
  const input = el('textarea', {
    id,
    name: 'filter',
    rows: 6,
    spellcheck: false,
    placeholder: '{"customer.tier": {"$in": ["gold", "platinum"]}}',
    'aria-describedby': `${id}-hint`,
  });
  const node = el(
    'div',
    { class: 'field' },
    el('label', { for: id }, label),
    input,
    el(
      'p',
      { class: 'hint', id: `${id}-hint` },
      'Only events whose data matches are sent. Paths are dotted (customer.tier); operators: $eq $neq $gt $gte $lt $lte $in $nin $startsWith $endsWith $exist $and $or $not. Empty: every event of the type.',
    ),
  );
  return { node, input };
}

/** The result of a dry run: how many of the recent events matched, and each one. */
function dryRunList(result: DryRunResult): HTMLElement {
  if (result.data.length === 0)
    return el('p', { class: 'hint', role: 'status' }, 'No event of this type yet to try the filter on.');
  return el(
    'div',
    { class: 'dry-run' },
    el('p', { role: 'status' }, `${result.matched} of the ${result.data.length} most recent events match.`),
    el(
      'ul',
      { class: 'dry-run-events', 'aria-label': 'Recent events, newest first' },
      ...result.data.map((event) =>
        el(
          'li',
          { 'data-matches': String(event.matches) },
          el('span', { class: `badge ${event.matches ? 'good' : ''}` }, event.matches ? 'Matches' : 'No match'),
          ' ',
          el('code', {}, event.id),
          ' ',
          time(event.createdAt),
          el('pre', { class: 'event-data' }, JSON.stringify(event.data, null, 2)),
        ),
      ),
    ),
  );
}

/**
 * One webhook's filter: shown, editable, tried on the account's recent events of its type before it
 * is saved. `saved` hears of the webhook as stored.
 */
export function filterPanel(
  base: string,
  errors: { show(error: unknown): void; clear(): void },
  saved: (webhook: Webhook) => void,
): { node: HTMLElement; show(webhook: Webhook): void } {
  const { node: field, input } = filterField('edit-filter', 'The filter, as JSON');
  const results = el('div', { 'aria-live': 'polite' });
  const tryButton = el('button', { type: 'button' }, 'Try on recent events');
  const save = el('button', { type: 'submit' }, 'Save filter');
  const form = el(
    'form',
    { class: 'panel', 'aria-labelledby': 'filter-heading' },
    el('h2', { id: 'filter-heading' }, 'Filter'),
    field,
    el('div', { class: 'actions' }, tryButton, save),
    results,
  );
  let type = '';
  const showStored = keptEdit(input);
  tryButton.addEventListener('click', () =>
    whileBusy(tryButton, errors, async () => {
      const result = await api<DryRunResult>('POST', '/webhooks/dry-run', { type, filter: parseFilter(input.value) });
      replace(results, dryRunList(result));
    }),
  );
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    return whileBusy(save, errors, async () => {
      const webhook = await api<Webhook>('PATCH', base, { filter: parseFilter(input.value) });
      replace(
        results,
        el(
          'p',
          { class: 'hint', role: 'status' },
          webhook.filter === undefined
            ? 'Saved: every event of the type is sent.'
            : 'Saved: events published from now on are matched against it.',
        ),
      );
      saved(webhook);
    });
  });
  return {
    node: form,
    /** Shows the stored filter, unless the text area holds an edit of the one shown before. */
    show(webhook) {
      type = webhook.type;
      showStored(webhook.filter === undefined ? '' : JSON.stringify(webhook.filter, null, 2));
    },
  };
}
