import { destinationLabel } from './destinations.js';
import { ApiError, api, segment, session } from './api.js';
import { isId, showNotFound } from './not-found.js';
import { callCharts } from './charts.js';
import { deliveryLog } from './deliveries.js';
import { details, el, errorBox, replace } from './dom.js';
import { time } from './format.js';
import type { Screen } from './screen.js';
import type { Webhook, WebhookHealth } from './types.js';
import { healthClass, healthLabel } from './webhooks.js';
import { filterPanel } from './filter.js';
import { rateLimitPanel, rateLimitText } from './rate-limit.js';
import { copyable, verificationRows } from './keys.js';

const REASONS: Record<string, string> = {
  gone: 'the receiver answered 410 Gone',
  failing: 'its calls kept failing',
  manual: 'disabled by hand',
};

/**
 * One webhook: its health, what can be done to it (nothing, when the page may only read: no
 * actions, filter or rate limit editing, or recovery), and its delivery log (refreshed while open).
 */
export const webhookScreen: Screen = ({ main, title, rest }) => {
  const id = rest[0];
  const notFound = () =>
    showNotFound({ main, title }, 'There is no such webhook in this account.', {
      href: '#/webhooks',
      label: '← All webhooks',
    });
  // An id of the wrong shape is not asked for: no request carries what a link made up.
  if (!isId('wbh', id) || rest.length > 1) {
    notFound();
    return () => {};
  }
  const base = `/webhooks/${segment(id)}`;
  const errors = errorBox();
  const summary = el('section', { class: 'panel', 'aria-labelledby': 'health-heading' });
  const secretBox = el('div', { class: 'secret', hidden: true, 'aria-live': 'polite' });
  const actions = el('div', { class: 'actions' });
  const log = deliveryLog(base, errors, () => load());
  const charts = callCharts(base, errors);
  const writable = session.mayChange();
  // The filter is in the summary too; editing it (and trying it, a POST) is a change.
  const filter = writable ? filterPanel(base, errors, () => void load()) : null;
  const rateLimit = writable ? rateLimitPanel(base, errors, () => void load()) : null;
  const heading = title('Webhook');
  replace(
    main,
    el('p', {}, el('a', { href: '#/webhooks' }, '← All webhooks')),
    heading,
    errors.node,
    summary,
    secretBox,
    writable ? actions : null,
    charts.node,
    filter?.node,
    rateLimit?.node,
    writable ? recoverForm(base, errors, () => void log.refresh()) : null,
    log.node,
  );

  let stopped = false;
  /** Whether the webhook was found once: a 404 after that (deleted meanwhile) is shown as an error. */
  let seen = false;
  /** Loads so far: the charts are read again every fifth (each 15 s while the log refreshes). */
  let loads = 0;
  async function load() {
    if (loads++ % 5 === 0) void charts.refresh();
    try {
      const [webhook, health] = await Promise.all([
        api<Webhook>('GET', base),
        api<WebhookHealth>('GET', `${base}/health`),
      ]);
      if (stopped) return;
      seen = true;
      heading.textContent = webhook.url;
      drawSummary(webhook, health);
      drawActions(health);
      filter?.show(webhook);
      rateLimit?.show(webhook);
    } catch (error) {
      if (error instanceof ApiError && error.status === 404 && !seen) {
        stopped = true;
        log.stop();
        return notFound();
      }
      errors.show(error);
    }
  }

  function drawSummary(webhook: Webhook, health: WebhookHealth) {
    replace(
      summary,
      el('h2', { id: 'health-heading' }, 'Health'),
      details([
        ['Status', el('span', { class: healthClass(health), 'data-health': health.status }, healthLabel(health))],
        ['Event type', webhook.type],
        ['Destination', destinationLabel(webhook.url)],
        ...verificationRows(webhook),
        [
          'Filter',
          webhook.filter === undefined
            ? 'none: every event of the type'
            : el('code', {}, JSON.stringify(webhook.filter)),
        ],
        ['Rate limit', rateLimitText(health.rateLimit)],
        [
          'Calls in flight',
          health.inFlightLimit === null
            ? null
            : `at most ${health.inFlightLimit} at once, adapted to what its receiver takes (fewer after 429, 503 or timeouts, more as calls succeed)`,
        ],
        ['Id', el('code', {}, webhook.id)],
        ['Created', time(webhook.createdAt)],
        [
          'Disabled because',
          health.disabledReason === null ? null : (REASONS[health.disabledReason] ?? health.disabledReason),
        ],
        ['Disabled at', health.disabledAt === null ? null : time(health.disabledAt)],
        ['Failing since', health.failingSince === null ? null : time(health.failingSince)],
        ['Failures in a row', health.consecutiveFailures > 0 ? String(health.consecutiveFailures) : null],
        [
          'Calls wait until',
          health.heldUntil === null
            ? null
            : el('span', {}, time(health.heldUntil), ' (its receiver asked, with Retry-After, or is not answering)'),
        ],
        ['Last success', time(health.lastSuccessAt)],
        ['Last attempt', time(health.lastAttemptAt)],
      ]),
    );
  }

  /** Runs one action, shows its error if any, and redraws what it changed. */
  const act = (button: HTMLButtonElement, run: () => Promise<unknown>) => async () => {
    button.disabled = true;
    try {
      await run();
      errors.clear();
      await Promise.all([load(), log.refresh()]);
    } catch (error) {
      errors.show(error);
    } finally {
      button.disabled = false;
    }
  };

  // Made once and updated in place: a refresh never takes the focus from a button.
  let enabled = true;
  const test = el('button', { type: 'button' }, 'Send test call');
  test.addEventListener(
    'click',
    act(test, () => api('POST', `${base}/test`)),
  );
  const toggle = el('button', { type: 'button' }, 'Disable');
  toggle.addEventListener(
    'click',
    act(toggle, () => api('POST', `${base}/${enabled ? 'disable' : 'enable'}`)),
  );
  const grace = el(
    'select',
    { id: 'rotate-grace', name: 'graceMs' },
    ...GRACES.map(([label, ms]) => el('option', { value: String(ms), selected: ms === DEFAULT_GRACE_MS }, label)),
  );
  const rotate = el('button', { type: 'button' }, 'Rotate secret');
  rotate.addEventListener(
    'click',
    act(rotate, async () => {
      const graceMs = Number(grace.value);
      showSecret(await api<Webhook>('POST', `${base}/rotate-secret`, { graceMs }), graceMs);
    }),
  );
  const rotation = el(
    'div',
    { class: 'rotation' },
    el('label', { for: 'rotate-grace' }, 'Old secret keeps signing'),
    grace,
    rotate,
  );
  const remove = el('button', { type: 'button', class: 'danger' }, 'Delete webhook');
  remove.addEventListener('click', async () => {
    if (!confirm('Delete this webhook? Its pending deliveries are cancelled.')) return;
    remove.disabled = true;
    try {
      await api('DELETE', base);
      location.hash = '#/webhooks';
    } catch (error) {
      errors.show(error);
      remove.disabled = false;
    }
  });

  function drawActions(health: WebhookHealth) {
    enabled = health.status === 'enabled';
    toggle.textContent = enabled ? 'Disable' : 'Enable';
    if (actions.childElementCount === 0) replace(actions, test, toggle, rotation, remove);
  }

  /** The rotation's new secret (or, for ed25519, its new public key), to hand to the receiver. */
  function showSecret(webhook: Webhook, graceMs: number) {
    const done = el('button', { type: 'button' }, 'Done');
    done.addEventListener('click', () => {
      replace(secretBox);
      secretBox.hidden = true;
    });
    const ed25519 = webhook.publicKey !== undefined;
    replace(
      secretBox,
      el('h2', {}, ed25519 ? 'New public key' : 'New secret'),
      el(
        'p',
        {},
        ed25519
          ? 'Receivers that fetch the public keys link pick it up by themselves; give it to the others. '
          : 'Give it to your receiver. It stays on this page, behind Reveal. ',
        graceNote(graceMs),
      ),
      copyable(ed25519 ? webhook.publicKey! : webhook.secret!, 'new-secret'),
      el('div', { class: 'actions' }, done),
    );
    secretBox.hidden = false;
    (secretBox.querySelector('button') as HTMLButtonElement | null)?.focus();
  }

  void load();
  log.start();
  return () => {
    stopped = true;
    log.stop();
  };
};

/** How long the replaced secret still signs calls after a rotation (the API takes 0 to 7 days; 24 h when not given). */
const HOUR_MS = 3_600_000;
const DEFAULT_GRACE_MS = 24 * HOUR_MS;
const GRACES: [label: string, ms: number][] = [
  ['not at all', 0],
  ['for 1 hour', HOUR_MS],
  ['for 24 hours', DEFAULT_GRACE_MS],
  ['for 7 days', 7 * 24 * HOUR_MS],
];

function graceNote(graceMs: number): string {
  if (graceMs === 0) return 'The previous key no longer signs calls.';
  const label = GRACES.find(([, ms]) => ms === graceMs)?.[0] ?? `for ${graceMs / HOUR_MS} hours`;
  return `The previous key still signs calls ${label}.`;
}

/** Queues again every event since a moment that the webhook missed. */
function recoverForm(base: string, errors: ReturnType<typeof errorBox>, recovered: () => void): HTMLFormElement {
  const since = el('input', { id: 'recover-since', name: 'since', type: 'datetime-local', required: true, step: 1 });
  const result = el('span', { class: 'hint', role: 'status' });
  const submit = el('button', { type: 'submit' }, 'Recover');
  const form = el(
    'form',
    { class: 'panel inline' },
    el('div', { class: 'field' }, el('label', { for: 'recover-since' }, 'Recover missed events since'), since),
    el('div', { class: 'actions' }, submit, result),
  );
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const moment = new Date(since.value);
    if (Number.isNaN(moment.getTime())) return errors.show(new Error('Give the date and time to recover from.'));
    submit.disabled = true;
    try {
      const { queued } = await api<{ queued: number }>('POST', `${base}/recover`, { since: moment.toISOString() });
      errors.clear();
      result.textContent = queued === 1 ? '1 event queued again.' : `${queued} events queued again.`;
      recovered();
    } catch (error) {
      errors.show(error);
    } finally {
      submit.disabled = false;
    }
  });
  return form;
}
