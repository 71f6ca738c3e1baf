import { api, eventTypes, segment, session } from './api.js';
import { destinationKinds, destinationLabel } from './destinations.js';
import { filterField, parseFilter } from './filter.js';
import { copyable } from './keys.js';
import { el, errorBox, replace } from './dom.js';
import { time } from './format.js';
import type { Screen } from './screen.js';
import type { List, Webhook, WebhookHealth } from './types.js';

/** A webhook's state in words: "Enabled", or "Disabled (failing)" and the like. */
export function healthLabel(health: WebhookHealth | null): string {
  if (health === null) return 'Unknown';
  if (health.status === 'enabled') return health.failingSince === null ? 'Enabled' : 'Enabled, failing';
  return `Disabled (${health.disabledReason ?? 'manual'})`;
}

export const healthClass = (health: WebhookHealth | null) =>
  health === null
    ? 'badge'
    : health.status === 'disabled'
      ? 'badge bad'
      : health.failingSince === null
        ? 'badge good'
        : 'badge warn';

/** The list of the account's webhooks with their health, and the form that creates one (unless the page may only read). */
export const webhookList: Screen = ({ main, title }) => {
  const errors = errorBox();
  const list = el('ul', { class: 'cards', 'aria-live': 'polite' });
  const writable = session.mayChange();
  const form = writable ? createForm(() => void load()) : null;
  replace(main, title('Webhooks'), errors.node, form, el('h2', {}, 'Your webhooks'), list);

  async function load() {
    try {
      const { data } = await api<List<Webhook>>('GET', '/webhooks');
      const healths = await Promise.all(
        data.map((webhook) => api<WebhookHealth>('GET', `/webhooks/${segment(webhook.id)}/health`).catch(() => null)),
      );
      errors.clear();
      if (data.length === 0)
        return replace(
          list,
          el('li', { class: 'empty' }, writable ? 'No webhooks yet: create one above.' : 'No webhooks yet.'),
        );
      replace(list, ...data.map((webhook, i) => card(webhook, healths[i] ?? null)));
    } catch (error) {
      errors.show(error);
    }
  }
  void load();
  return () => {};
};

function card(webhook: Webhook, health: WebhookHealth | null): HTMLLIElement {
  return el(
    'li',
    { class: 'card' },
    el('a', { class: 'url', href: `#/webhooks/${segment(webhook.id)}` }, webhook.url),
    el(
      'p',
      { class: 'meta' },
      el('span', { class: 'type' }, webhook.type),
      ' · ',
      el('span', { class: 'destination' }, destinationLabel(webhook.url)),
      webhook.filter === undefined ? null : el('span', { class: 'hint' }, ' (filtered)'),
      ' · ',
      el('span', { class: healthClass(health) }, healthLabel(health)),
      health?.failingSince ? el('span', {}, ' since ', time(health.failingSince)) : null,
      ' · created ',
      time(webhook.createdAt),
    ),
  );
}

function createForm(created: () => void): HTMLFormElement {
  const errors = errorBox();
  const type = el(
    'select',
    { id: 'new-type', name: 'type', required: true },
    ...eventTypes().map((name) => el('option', { value: name }, name)),
  );
  const url = el('input', {
    id: 'new-url',
    name: 'url',
    type: 'url',
    required: true,
    placeholder: 'https://example.com/hooks',
    autocomplete: 'url',
  });
  const kinds = destinationKinds();
  const destination = el(
    'select',
    { id: 'new-destination', name: 'destination' },
    ...kinds.map((kind, i) => el('option', { value: String(i) }, kind.label)),
  );
  // The URL's example follows the kind chosen; the URL itself says where calls go.
  destination.addEventListener('change', () => {
    url.placeholder = kinds[Number(destination.value)]?.example ?? '';
  });
  const filter = filterField('new-filter', 'Filter (optional)');
  const scheme = el(
    'select',
    { id: 'new-scheme', name: 'signatureScheme' },
    el('option', { value: 'hmac-sha256' }, 'HMAC-SHA256 with a shared secret (v1)'),
    el('option', { value: 'ed25519' }, 'ed25519 with a public key (v1a)'),
  );
  const created_ = el('div', { class: 'secret', hidden: true, 'aria-live': 'polite' });
  const submit = el('button', { type: 'submit' }, 'Create webhook');
  const form = el(
    'form',
    { class: 'panel', 'aria-labelledby': 'create-heading' },
    el('h2', { id: 'create-heading' }, 'Create a webhook'),
    el('div', { class: 'field' }, el('label', { for: 'new-type' }, 'Event type'), type),
    kinds.length > 1
      ? el('div', { class: 'field' }, el('label', { for: 'new-destination' }, 'Destination'), destination)
      : null,
    el('div', { class: 'field' }, el('label', { for: 'new-url' }, 'URL'), url),
    kinds.length > 1
      ? el(
          'p',
          { class: 'hint' },
          "A broker's URL may carry its user and password: they are kept to publish with, and shown as ***.",
        )
      : null,
    filter.node,
    el('div', { class: 'field' }, el('label', { for: 'new-scheme' }, 'Signatures'), scheme),
    errors.node,
    el('div', { class: 'actions' }, submit),
    created_,
  );
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    submit.disabled = true;
    try {
      const chosen = parseFilter(filter.input.value);
      const body: Record<string, unknown> = { type: type.value, url: url.value, signatureScheme: scheme.value };
      if (chosen !== null) body.filter = chosen;
      const webhook = await api<Webhook>('POST', '/webhooks', body);
      errors.clear();
      url.value = '';
      filter.input.value = '';
      showCreated(created_, webhook);
      created();
    } catch (error) {
      errors.show(error);
    } finally {
      submit.disabled = false;
    }
  });
  return form;
}

/** The webhook just made, and what its receiver verifies calls with: its secret, or its public key. */
function showCreated(box: HTMLElement, webhook: Webhook): void {
  const ed25519 = webhook.publicKey !== undefined;
  replace(
    box,
    el('h3', {}, 'Webhook created'),
    el(
      'p',
      {},
      ed25519
        ? "Its calls are signed with ed25519: the receiver verifies them with this public key (or the public keys link on the webhook's page). "
        : "Give this secret to the receiver: it verifies every call with it. It stays on the webhook's page, behind Reveal. ",
    ),
    copyable(ed25519 ? webhook.publicKey! : webhook.secret!, 'created-secret'),
    el('p', {}, el('a', { href: `#/webhooks/${segment(webhook.id)}` }, 'Open the webhook')),
  );
  box.hidden = false;
}
