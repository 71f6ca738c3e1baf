import { api, segment } from './api.js';
import { el, replace, type errorBox } from './dom.js';
import { duration, time } from './format.js';
import type { Delivery, DeliveryAttempt, Page } from './types.js';

/** How often an open delivery log asks for news. */
const REFRESH_MS = 3000;
/** Deliveries a page of the log holds: what the page asks for at once. */
const PAGE = 50;

/**
 * A webhook's delivery log, newest first, a page at a time: the first page, refreshed every few
 * seconds while `start`ed (only that page is asked for again: the newest deliveries, and the ones
 * whose calls are going on), and older pages on demand. `alongside` is refreshed with it (the
 * webhook's health, which each attempt changes).
 */
export function deliveryLog(base: string, errors: ReturnType<typeof errorBox>, alongside: () => Promise<void>) {
  const list = el('ol', { class: 'deliveries' });
  const updated = el('span', { class: 'hint', role: 'status' });
  const refreshButton = el('button', { type: 'button' }, 'Refresh');
  const olderButton = el('button', { type: 'button', hidden: true }, 'Older deliveries');
  const node = el(
    'section',
    { 'aria-labelledby': 'log-heading' },
    el('div', { class: 'section-head' }, el('h2', { id: 'log-heading' }, 'Deliveries'), refreshButton, updated),
    list,
    el('div', { class: 'actions' }, olderButton),
  );
  let timer: ReturnType<typeof setInterval> | undefined;
  /** What the list shows, newest first, and where the page after the last one shown starts. */
  let shown: Delivery[] = [];
  let olderCursor: string | null = null;
  let loadedOlder = false;

  function draw() {
    // The list is drawn anew; a focused button gets the focus back in its new drawing.
    const focused = document.activeElement?.closest<HTMLElement>('.delivery')?.dataset.id;
    if (shown.length === 0) replace(list, el('li', { class: 'empty' }, 'No deliveries yet: send a test call.'));
    else replace(list, ...shown.map(item));
    if (focused !== undefined) {
      for (const node of list.querySelectorAll<HTMLElement>('.delivery')) if (node.dataset.id === focused) node.querySelector('button')?.focus();
    }
    olderButton.hidden = olderCursor === null;
  }

  /** Asks for the first page again and puts it in place of what it covers: the older pages stay. */
  async function refresh() {
    try {
      const { data, nextCursor } = await api<Page<Delivery>>('GET', `${base}/deliveries?limit=${PAGE}`);
      const fresh = new Set(data.map((delivery) => delivery.id));
      // The oldest delivery of the fresh page marks where it ends; what was shown older than that stays.
      const oldest = data.at(-1);
      const kept = oldest === undefined ? [] : shown.filter((delivery) => !fresh.has(delivery.id) && delivery.createdAt <= oldest.createdAt && loadedOlder);
      shown = [...data, ...kept];
      if (!loadedOlder) olderCursor = nextCursor;
      draw();
      updated.textContent = 'Updated ';
      updated.append(time(new Date().toISOString().replace(/\.\d+Z$/, '+00:00')));
    } catch (error) {
      errors.show(error);
    }
  }

  async function older() {
    if (olderCursor === null) return;
    olderButton.disabled = true;
    try {
      const { data, nextCursor } = await api<Page<Delivery>>('GET', `${base}/deliveries?limit=${PAGE}&cursor=${encodeURIComponent(olderCursor)}`);
      const known = new Set(shown.map((delivery) => delivery.id));
      shown = [...shown, ...data.filter((delivery) => !known.has(delivery.id))];
      olderCursor = nextCursor;
      loadedOlder = true;
      draw();
    } catch (error) {
      errors.show(error);
    } finally {
      olderButton.disabled = false;
    }
  }
  const refreshAll = () => Promise.all([refresh(), alongside()]);
  refreshButton.addEventListener('click', () => void refreshAll());
  olderButton.addEventListener('click', () => void older());

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
        el('span', { class: 'hint' }, delivery.eventType),
        delivery.orderingKey === null ? null : el('span', { class: 'hint ordering-key' }, 'key ', el('code', {}, delivery.orderingKey)),
        el('span', { class: 'hint' }, 'queued ', time(delivery.createdAt)),
      ),
      delivery.redeliverQueued
        ? el('p', { class: 'next' }, 'A call is in flight; it is sent again once that call is recorded.')
        : delivery.nextAttemptAt !== null
          ? el('p', { class: 'next' }, 'Next attempt ', time(delivery.nextAttemptAt))
          : delivery.status === 'pending' && delivery.orderingKey !== null
            ? el('p', { class: 'next' }, 'Waiting for an earlier delivery of its key to end.')
            : null,
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
