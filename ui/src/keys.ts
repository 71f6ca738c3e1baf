import { api, segment } from './api.js';
import { el, replace } from './dom.js';
import type { Webhook } from './types.js';

/** A value in code with a Copy button and a status line for what the copy did. */
export function copyable(value: string, id?: string): HTMLElement {
  const code = el('code', id === undefined ? {} : { id }, value);
  const status = el('span', { class: 'hint', role: 'status' });
  const copy = el('button', { type: 'button', class: 'link-button' }, 'Copy');
  copy.addEventListener('click', async () => {
    try {
      await navigator.clipboard.writeText(value);
      status.textContent = 'Copied.';
    } catch {
      getSelection()?.selectAllChildren(code);
      status.textContent = 'Selected: press Ctrl+C (⌘C) to copy.';
    }
  });
  return el('span', { class: 'copyable' }, code, ' ', copy, ' ', status);
}

/** A secret kept out of sight until asked for: Reveal shows it with Copy, Hide takes it away again. */
function revealable(secret: string): HTMLElement {
  const slot = el('span', { class: 'secret-value' });
  const toggle = el('button', { type: 'button', class: 'link-button', 'aria-expanded': 'false' }, 'Reveal');
  toggle.addEventListener('click', () => {
    const shown = toggle.getAttribute('aria-expanded') === 'true';
    toggle.setAttribute('aria-expanded', String(!shown));
    toggle.textContent = shown ? 'Reveal' : 'Hide';
    if (shown) replace(slot);
    else replace(slot, copyable(secret, 'webhook-secret'));
  });
  return el('span', {}, toggle, ' ', slot);
}

/** What a receiver verifies a webhook's calls with: its secret behind Reveal, or its public key and the link that serves its keys. */
export function verificationRows(webhook: Webhook): [string, HTMLElement | string][] {
  if (webhook.publicKey === undefined)
    return [['Secret', webhook.secret === undefined ? '—' : revealable(webhook.secret)]];
  const link = el('span', {});
  const get = el('button', { type: 'button', class: 'link-button' }, 'Show the link');
  get.addEventListener('click', async () => {
    get.disabled = true;
    try {
      const { url } = await api<{ url: string }>('GET', `/webhooks/${segment(webhook.id)}/public-keys`);
      replace(link, copyable(url, 'public-keys-url'));
    } catch (error) {
      replace(link, el('span', { class: 'error' }, error instanceof Error ? error.message : String(error)));
      get.disabled = false;
    }
  });
  return [
    ['Signatures', 'ed25519 (v1a): verified with the public key'],
    ['Public key', copyable(webhook.publicKey, 'webhook-public-key')],
    ['Public keys link', el('span', {}, get, ' ', link)],
  ];
}
