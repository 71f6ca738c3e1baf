import { api, eventTypes, segment, session } from './api.js';
import { el, replace, type errorBox } from './dom.js';
import { duration, time } from './format.js';
import { isId } from './not-found.js';
import type { Delivery, DeliveryAttempt, Page } from './types.js';

/** How often an open delivery log asks for news. */
const REFRESH_MS = 3000;
/** Deliveries a page of the log holds: what the page asks for at once. */
const PAGE = 50;
/** Deliveries still going on (due, in flight) a refresh reads again at most. */
const REREAD = 10;

/** What the log is narrowed to: the API's own filters, by name. */
interface Search {
  status?: string;
  eventType?: string;
  eventId?: string;
  since?: string;
  until?: string;
}

const query = (search: Search, extra: Record<string, string>) =>
  new URLSearchParams({
    limit: String(PAGE),
    ...Object.fromEntries(Object.entries(search).filter(([, value]) => value !== undefined)),
    ...extra,
  }).toString();

/** `2026-05-01T10:00` of a `datetime-local` input, in the viewer's zone, as the API's instant. */
function instant(value: string): string | undefined {
  if (value === '') return undefined;
  const date = new Date(value);
  return Number.isNaN(date.getTime()) ? undefined : date.toISOString();
}

/**
 * A webhook's delivery log, newest first, a page at a time, narrowed by a search (status, event
 * type, event id, time range: the API's filters). While `start`ed, a refresh every few seconds asks
 * only for what is newer than the newest shown, and reads again the few shown deliveries whose
 * calls may be going on (found by their event); older pages come on demand. `alongside` is
 * refreshed with it (the webhook's health, which each attempt changes).
 */
export function deliveryLog(base: string, errors: ReturnType<typeof errorBox>, alongside: () => Promise<void>) {
  const list = el('ol', { class: 'deliveries' });
  const updated = el('span', { class: 'hint', role: 'status' });
  const refreshButton = el('button', { type: 'button' }, 'Refresh');
  const olderButton = el('button', { type: 'button', hidden: true }, 'Older deliveries');
  const form = searchForm((search) => void begin(search));
  const node = el(
    'section',
    { 'aria-labelledby': 'log-heading' },
    el('div', { class: 'section-head' }, el('h2', { id: 'log-heading' }, 'Deliveries'), refreshButton, updated),
    form.node,
    list,
    el('div', { class: 'actions' }, olderButton),
  );
  let timer: ReturnType<typeof setInterval> | undefined;
  let search: Search = {};
  /** What the list shows, newest first, and where the page after the last one shown starts. */
  let shown: Delivery[] = [];
  let olderCursor: string | null = null;
  /** Bumped by each new search and each change made here: an answer asked for before it is dropped. */
  let generation = 0;
  /** The refresh under way: the timer, Refresh and an action never run two at once. */
  let refreshing: Promise<void> | null = null;

  function draw() {
    // The list is drawn anew; a focused button gets the focus back in its new drawing.
    const focused = document.activeElement?.closest<HTMLElement>('.delivery')?.dataset.id;
    const searching = Object.keys(search).length > 0;
    if (shown.length === 0)
      replace(
        list,
        el(
          'li',
          { class: 'empty' },
          searching ? 'No delivery matches this search.' : 'No deliveries yet: send a test call.',
        ),
      );
    else replace(list, ...shown.map(item));
    if (focused !== undefined) {
      for (const node of list.querySelectorAll<HTMLElement>('.delivery'))
        if (node.dataset.id === focused) node.querySelector('button')?.focus();
    }
    olderButton.hidden = olderCursor === null;
  }

  function stamp() {
    updated.textContent = 'Updated ';
    updated.append(time(new Date().toISOString().replace(/\.\d+Z$/, '+00:00')));
  }

  /** Puts `fresh` in place of the deliveries it holds, and before the rest when newer: newest first. */
  function merge(fresh: Delivery[]) {
    const byId = new Map(fresh.map((delivery) => [delivery.id, delivery]));
    const kept = shown.map((delivery) => byId.get(delivery.id) ?? delivery);
    const known = new Set(shown.map((delivery) => delivery.id));
    const added = fresh.filter((delivery) => !known.has(delivery.id));
    shown = [...added, ...kept].sort((a, b) => (a.createdAt < b.createdAt ? 1 : a.createdAt > b.createdAt ? -1 : 0));
  }

  /** A new search: its first page, in place of whatever was shown. */
  async function begin(next: Search) {
    search = next;
    const mine = ++generation;
    try {
      const { data, nextCursor } = await api<Page<Delivery>>('GET', `${base}/deliveries?${query(search, {})}`);
      if (mine !== generation) return;
      shown = data;
      olderCursor = nextCursor;
      draw();
      stamp();
      errors.clear();
    } catch (error) {
      errors.show(error);
    }
  }

  /**
   * What changed since the last look: the deliveries made since the newest shown (`since` is read to
   * the second, so that one comes again and is merged), and the shown ones whose calls may be going on
   * (pending and due, or waiting behind their key): each read by its event, a few at most.
   */
  function refresh(): Promise<void> {
    refreshing ??= lookAgain().finally(() => (refreshing = null));
    return refreshing;
  }

  async function lookAgain() {
    if (shown.length === 0) return begin(search);
    const mine = generation;
    const newest = shown[0]!.createdAt;
    const since = search.since !== undefined && search.since > newest ? search.since : newest;
    const now = new Date().toISOString();
    const going = shown
      .filter(
        (delivery) =>
          delivery.status === 'pending' &&
          (delivery.nextAttemptAt === null || delivery.nextAttemptAt <= now || delivery.redeliverQueued),
      )
      .slice(0, REREAD);
    try {
      const [newer, ...again] = await Promise.all([
        api<Page<Delivery>>('GET', `${base}/deliveries?${query(search, { since })}`),
        ...going.map((delivery) =>
          api<Page<Delivery>>('GET', `${base}/deliveries?${query(search, { eventId: delivery.eventId, limit: '5' })}`),
        ),
      ]);
      if (mine !== generation) return;
      // A full page with none of those shown: more came than a page holds, and the list starts again
      // from the newest rather than with a gap. (A page of one busy second holds known ones: no gap.)
      const known = new Set(shown.map((delivery) => delivery.id));
      if (newer!.nextCursor !== null && !newer!.data.some((delivery) => known.has(delivery.id))) return begin(search);
      merge([...newer!.data, ...again.flatMap((page) => page.data)]);
      draw();
      stamp();
    } catch (error) {
      errors.show(error);
    }
  }

  async function older() {
    if (olderCursor === null) return;
    const mine = generation;
    olderButton.disabled = true;
    try {
      const { data, nextCursor } = await api<Page<Delivery>>(
        'GET',
        `${base}/deliveries?${query(search, { cursor: olderCursor })}`,
      );
      if (mine !== generation) return;
      const known = new Set(shown.map((delivery) => delivery.id));
      shown = [...shown, ...data.filter((delivery) => !known.has(delivery.id))];
      olderCursor = nextCursor;
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
        const again = await api<Delivery>('POST', `${base}/deliveries/${segment(delivery.id)}/redeliver`);
        errors.clear();
        // A refresh asked for before this change would bring back the delivery as it was.
        generation++;
        merge([again]);
        draw();
      } catch (error) {
        errors.show(error);
        redeliver.disabled = false;
      }
    });
    const attempts = [...delivery.attempts].reverse();
    const older = delivery.attemptCount - delivery.attempts.length;
    const byEvent = el('button', { type: 'button', class: 'link' }, delivery.eventId);
    byEvent.setAttribute('aria-label', `Show the deliveries of event ${delivery.eventId}`);
    byEvent.addEventListener('click', () => form.set({ eventId: delivery.eventId }));
    return el(
      'li',
      { class: 'card delivery', 'data-status': delivery.status, 'data-id': delivery.id },
      el(
        'div',
        { class: 'delivery-head' },
        el('span', { class: `badge ${STATUS_CLASS[delivery.status]}` }, STATUS[delivery.status]),
        el('code', {}, byEvent),
        el('span', { class: 'hint' }, delivery.eventType),
        delivery.orderingKey === null
          ? null
          : el('span', { class: 'hint ordering-key' }, 'key ', el('code', {}, delivery.orderingKey)),
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
        : el(
            'ol',
            { class: 'attempts', reversed: true, 'aria-label': 'Attempts, newest first' },
            ...attempts.map(attempt),
          ),
      older > 0 ? el('p', { class: 'hint' }, `${older} older attempts not kept.`) : null,
      session.mayChange() ? el('div', { class: 'actions' }, redeliver) : null,
    );
  }

  return {
    node,
    refresh,
    start() {
      void begin(search);
      timer = setInterval(() => {
        if (document.visibilityState === 'visible') void refreshAll();
      }, REFRESH_MS);
    },
    stop() {
      clearInterval(timer);
    },
  };
}

/** The search of the log: each field one of the API's filters; Clear shows everything again. */
function searchForm(searched: (search: Search) => void) {
  const status = el(
    'select',
    { id: 'search-status', name: 'status' },
    el('option', { value: '' }, 'Any status'),
    ...Object.entries(STATUS).map(([value, label]) => el('option', { value }, label)),
  );
  const type = el(
    'select',
    { id: 'search-type', name: 'eventType' },
    el('option', { value: '' }, 'Any event type'),
    ...[...eventTypes(), 'webhook.test'].map((name) => el('option', { value: name }, name)),
  );
  const eventId = el('input', {
    id: 'search-event',
    name: 'eventId',
    type: 'text',
    placeholder: 'evt_…',
    autocomplete: 'off',
    spellcheck: 'false',
  });
  const since = el('input', { id: 'search-since', name: 'since', type: 'datetime-local', step: 1 });
  const until = el('input', { id: 'search-until', name: 'until', type: 'datetime-local', step: 1 });
  const problem = el('p', { class: 'error', role: 'alert', hidden: true });
  const clear = el('button', { type: 'button' }, 'Clear');
  const field = (id: string, label: string, input: HTMLElement) =>
    el('div', { class: 'field' }, el('label', { for: id }, label), input);
  const node = el(
    'form',
    { class: 'panel search', role: 'search', 'aria-label': 'Search the deliveries' },
    field('search-status', 'Status', status),
    field('search-type', 'Event type', type),
    field('search-event', 'Event id', eventId),
    field('search-since', 'Made from', since),
    field('search-until', 'Made before', until),
    problem,
    el('div', { class: 'actions' }, el('button', { type: 'submit' }, 'Search'), clear),
  );
  const read = (): Search | string => {
    const id = eventId.value.trim();
    if (id !== '' && !isId('evt', id)) return 'An event id looks like evt_ followed by letters and digits.';
    const search: Search = {};
    if (status.value !== '') search.status = status.value;
    if (type.value !== '') search.eventType = type.value;
    if (id !== '') search.eventId = id;
    const from = instant(since.value);
    const to = instant(until.value);
    if (from !== undefined) search.since = from;
    if (to !== undefined) search.until = to;
    return search;
  };
  node.addEventListener('submit', (event) => {
    event.preventDefault();
    const search = read();
    problem.hidden = typeof search !== 'string';
    if (typeof search === 'string') {
      problem.textContent = search;
      return eventId.focus();
    }
    searched(search);
  });
  clear.addEventListener('click', () => {
    node.reset();
    problem.hidden = true;
    searched({});
  });
  return {
    node,
    /** Shows one search (an event's deliveries, from a delivery's event id) and runs it. */
    set(search: Search) {
      node.reset();
      eventId.value = search.eventId ?? '';
      problem.hidden = true;
      searched(search);
      eventId.focus();
    },
  };
}

const STATUS: Record<Delivery['status'], string> = {
  pending: 'Pending',
  succeeded: 'Succeeded',
  failed: 'Failed',
  cancelled: 'Cancelled',
};
const STATUS_CLASS: Record<Delivery['status'], string> = {
  pending: 'warn',
  succeeded: 'good',
  failed: 'bad',
  cancelled: '',
};

function attempt(entry: DeliveryAttempt): HTMLLIElement {
  const outcome =
    entry.statusCode !== null
      ? el(
          'span',
          { class: entry.statusCode >= 200 && entry.statusCode < 300 ? 'good-text' : 'bad-text' },
          `HTTP ${entry.statusCode}`,
        )
      : entry.error === null
        ? // A destination beyond HTTP answers no status: no error is the broker's acknowledgement.
          el('span', { class: 'good-text' }, 'Acknowledged by the broker')
        : el('span', { class: 'bad-text' }, entry.error);
  return el(
    'li',
    {},
    time(entry.at),
    ' · ',
    outcome,
    entry.statusCode !== null && entry.error !== null ? ` (${entry.error})` : null,
    ' · ',
    duration(entry.durationMs),
    entry.local
      ? el(
          'span',
          { class: 'hint', title: "The portal's egress proxy failed: the call never left." },
          " · the portal's side, not counted",
        )
      : null,
    entry.held
      ? el(
          'span',
          {
            class: 'hint',
            title: 'The receiver asked to wait (Retry-After): its calls waited, and this is no failure.',
          },
          ' · asked to wait, not counted',
        )
      : null,
  );
}
