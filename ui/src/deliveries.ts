import { api, segment } from './api.js';
import { el, replace, type errorBox } from './dom.js';
import { duration, time } from './format.js';
import type { Delivery, DeliveryAttempt, List } from './types.js';

/** How often an open delivery log asks for news. */
const REFRESH_MS = 3000;

/**
 * A webhook's delivery log, newest first, refreshed every few seconds while `start`ed; `alongside`
 * is refreshed with it (the webhook's health, which each attempt changes).
 */
export function deliveryLog(base: string, errors: ReturnType<typeof errorBox>, alongside: () => Promise<void>) {
  const list = el('ol', { class: 'deliveries' });
  const updated = el('span', { class: 'hint', role: 'status' });
  const refreshButton = el('button', { type: 'button' }, 'Refresh');
  const node = el(
    'section',
    { 'aria-labelledby': 'log-heading' },
    el('div', { class: 'section-head' }, el('h2', { id: 'log-heading' }, 'Deliveries'), refreshButton, updated),
    list,
  );
  let timer: ReturnType<typeof setInterval> | undefined;

  async function refresh() {
    try {
      const { data } = await api<List<Delivery>>('GET', `${base}/deliveries`);
      // The list is drawn anew; a focused button gets the focus back in its new drawing.
      const focused = document.activeElement?.closest<HTMLElement>('.delivery')?.dataset.id;
      if (data.length === 0) replace(list, el('li', { class: 'empty' }, 'No deliveries yet: send a test call.'));
      else replace(list, ...data.map(item));
      if (focused !== undefined) {
        for (const node of list.querySelectorAll<HTMLElement>('.delivery')) if (node.dataset.id === focused) node.querySelector('button')?.focus();
      }
      updated.textContent = 'Updated ';
      updated.append(time(new Date().toISOString().replace(/\.\d+Z$/, '+00:00')));
    } catch (error) {
      errors.show(error);
    }
  }
  const refreshAll = () => Promise.all([refresh(), alongside()]);
  refreshButton.addEventListener('click', () => void refreshAll());

  function item(delivery: Delivery): HTMLLIElement {
    const redeliver = el('button', { type: 'button' }, 'Redeliver');
    redeliver.addEventListener('click', async () => {
      redeliver.disabled = true;
      try {
        await api('POST', `${base}/deliveries/${segment(delivery.id)}/redeliver`);
        errors.clear();
        await refresh();
      } catch (error) {
        errors.show(error);
        redeliver.disabled = false;
      }
    });
    const attempts = [...delivery.attempts].reverse();
    const older = delivery.attemptCount - delivery.attempts.length;
    return el(
      'li',
      { class: 'card delivery', 'data-status': delivery.status, 'data-id': delivery.id },
      el(
        'div',
        { class: 'delivery-head' },
        el('span', { class: `badge ${STATUS_CLASS[delivery.status]}` }, STATUS[delivery.status]),
        el('code', {}, delivery.eventId),
        el('span', { class: 'hint' }, 'queued ', time(delivery.createdAt)),
      ),
      delivery.nextAttemptAt === null ? null : el('p', { class: 'next' }, 'Next attempt ', time(delivery.nextAttemptAt)),
      attempts.length === 0
        ? el('p', { class: 'hint' }, 'No attempt yet.')
        : el('ol', { class: 'attempts', reversed: true, 'aria-label': 'Attempts, newest first' }, ...attempts.map(attempt)),
      older > 0 ? el('p', { class: 'hint' }, `${older} older attempts not kept.`) : null,
      el('div', { class: 'actions' }, redeliver),
    );
  }

  return {
    node,
    refresh,
    start() {
      void refresh();
      timer = setInterval(() => {
        if (document.visibilityState === 'visible') void refreshAll();
      }, REFRESH_MS);
    },
    stop() {
      clearInterval(timer);
    },
  };
}

const STATUS: Record<Delivery['status'], string> = {
  pending: 'Pending',
  succeeded: 'Succeeded',
  failed: 'Failed',
  cancelled: 'Cancelled',
};
const STATUS_CLASS: Record<Delivery['status'], string> = { pending: 'warn', succeeded: 'good', failed: 'bad', cancelled: '' };

function attempt(entry: DeliveryAttempt): HTMLLIElement {
  const outcome =
    entry.statusCode !== null
      ? el('span', { class: entry.statusCode >= 200 && entry.statusCode < 300 ? 'good-text' : 'bad-text' }, `HTTP ${entry.statusCode}`)
      : el('span', { class: 'bad-text' }, entry.error ?? 'no answer');
  return el('li', {}, time(entry.at), ' · ', outcome, entry.statusCode !== null && entry.error !== null ? ` (${entry.error})` : null, ' · ', duration(entry.durationMs));
}
