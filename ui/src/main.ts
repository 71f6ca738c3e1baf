import { agreementScreen } from './agreements.js';
import { api, session, whenUnauthorized } from './api.js';
import { el, errorBox, replace } from './dom.js';
import { eventTypeScreen } from './event-types.js';
import { fileScreen } from './files.js';
import { showNotFound } from './not-found.js';
import type { Screen } from './screen.js';
import { webhookScreen } from './webhook.js';
import { webhookList } from './webhooks.js';

/**
 * The portal page: a sign-in form until an API key is given, then the screens, chosen by the
 * location's hash (`#/webhooks`, `#/webhooks/wbh_…`, `#/agreements`, `#/files/fsd_…`) so that
 * every screen has a link, the back button works, and no server route is needed beyond the page itself.
 */
const root = document.getElementById('app')!;
const main = el('main', { id: 'main', tabindex: -1 });
let leave: () => void = () => {};

const NAV = [
  { hash: '#/webhooks', label: 'Webhooks', scope: 'webhooks' },
  { hash: '#/event-types', label: 'Event types', scope: 'webhooks' },
  { hash: '#/agreements', label: 'Agreements', scope: 'agreements' },
  { hash: '#/files', label: 'Files', scope: 'files' },
];

/**
 * A portal session's link (`#session=<token>&scopes=webhooks,files`, and `&readOnly=1` for one that
 * may only read): the token is kept in memory only and the fragment is replaced at once, so that it
 * is neither in the history nor in a link copied from the address bar. Only the sections of its
 * scopes are shown, and when it may only read, no control that would change anything.
 */
let scopes: string[] | null = null;
{
  const fragment = new URLSearchParams(location.hash.replace(/^#/, ''));
  const token = fragment.get('session');
  if (token !== null && token !== '') {
    session.useSessionToken(token, fragment.get('readOnly') === '1');
    scopes = (fragment.get('scopes') ?? 'webhooks,agreements,files').split(',');
    const first = NAV.find((item) => scopes!.includes(item.scope));
    history.replaceState(null, '', `${location.pathname}${location.search}${first?.hash ?? '#/webhooks'}`);
  }
}
const sections = () => NAV.filter((item) => scopes === null || scopes.includes(item.scope));

/** A location whose escapes do not decode (`#/webhooks/%E0%A4%A`): shown as not found. */
const undecodable: Screen = (context) => {
  showNotFound(context, 'This link is malformed.', { href: '#/webhooks', label: '← Webhooks' });
  return () => {};
};

function route(): { screen: Screen; rest: string[]; section: string } {
  let parts: string[];
  try {
    parts = location.hash.replace(/^#\/?/, '').split('/').filter(Boolean).map(decodeURIComponent);
  } catch {
    return { screen: undecodable, rest: [], section: '' };
  }
  const [name, ...rest] = parts;
  if (name === 'files') return { screen: fileScreen, rest, section: '#/files' };
  if (name === 'agreements') return { screen: agreementScreen, rest: [], section: '#/agreements' };
  if (name === 'event-types') return { screen: eventTypeScreen, rest: [], section: '#/event-types' };
  if (name === 'webhooks' && rest.length > 0) return { screen: webhookScreen, rest, section: '#/webhooks' };
  return { screen: webhookList, rest: [], section: '#/webhooks' };
}

/** The company the account speaks for (`GET /branding`). */
interface Branding {
  name: string;
  logoUrl: string | null;
  accentColor: string | null;
}
/** The account's branding: `undefined` until asked, once per sign-in. */
let branding: Branding | null | undefined;

/**
 * Asks for the account's branding, then puts it into the top bar in place (the screen under it is
 * not drawn again, nor its data asked for twice); an answer that fails reads as none.
 */
function askBranding(): void {
  branding = null;
  api<{ branding: Branding | null }>('GET', '/branding').then(
    (answer) => {
      const shown = answer?.branding ?? null;
      branding = shown;
      if (shown?.accentColor != null) document.documentElement.style.setProperty('--accent', shown.accentColor);
      const header = root.querySelector('header.top');
      if (shown === null || header === null) return;
      header.classList.add('branded');
      header.querySelector('.brand')?.replaceWith(...brand());
    },
    () => {},
  );
}

/** The top bar's brand: the company's logo and name once known, else the page's name. */
function brand(): HTMLElement[] {
  const name = el('span', { class: 'brand' }, branding?.name ?? 'Customer portal');
  // A data-URL or an https: one, as the page's CSP takes (img-src 'self' data: https:).
  return branding?.logoUrl != null ? [el('img', { class: 'logo', src: branding.logoUrl, alt: '' }), name] : [name];
}

function show(notice?: string): void {
  leave();
  leave = () => {};
  if (session.key() === null) return signInForm(notice);
  if (branding === undefined) askBranding();
  const { screen, rest, section } = route();
  const signOut = el('button', { type: 'button', class: 'link' }, session.onSession() ? 'Close' : 'Sign out');
  signOut.addEventListener('click', () => {
    const wasSession = session.onSession();
    session.signOut();
    scopes = null;
    branding = undefined;
    document.documentElement.style.removeProperty('--accent');
    show(wasSession ? 'Closed. Open the link you were given again to come back while it lasts.' : 'Signed out.');
  });
  replace(
    root,
    el('a', { class: 'skip', href: '#main' }, 'Skip to content'),
    el(
      'header',
      { class: branding == null ? 'top' : 'top branded' },
      ...brand(),
      el(
        'nav',
        { 'aria-label': 'Sections' },
        el(
          'ul',
          {},
          ...sections().map(({ hash, label }) =>
            el('li', {}, el('a', { href: hash, 'aria-current': hash === section ? 'page' : undefined }, label)),
          ),
        ),
      ),
      session.mayChange() ? null : el('span', { class: 'read-only' }, 'Read only'),
      signOut,
    ),
    main,
  );
  let focused = false;
  const title = (text: string) => {
    const heading = el('h1', { tabindex: -1 }, text);
    // Focus moves to the new screen's heading, not on the first draw after sign-in's own focus.
    if (!focused) queueMicrotask(() => heading.focus({ preventScroll: true }));
    focused = true;
    return heading;
  };
  leave = screen({ main, title, rest });
}

function signInForm(notice?: string): void {
  const errors = errorBox();
  // Not a password field: a browser would offer to save the key with the site's passwords. The
  // text is masked by the stylesheet instead, and nothing offers to keep it.
  const key = el('input', {
    id: 'api-key',
    name: 'api-key',
    type: 'text',
    class: 'masked',
    required: true,
    autocomplete: 'off',
    autocapitalize: 'off',
    spellcheck: 'false',
    'aria-describedby': 'api-key-help',
  });
  const submit = el('button', { type: 'submit' }, 'Sign in');
  const form = el(
    'form',
    { class: 'panel signin' },
    el('h1', {}, 'Customer portal'),
    notice === undefined ? null : el('p', { role: 'status' }, notice),
    el(
      'p',
      {},
      'Sign in with your API key. It is kept in this browser tab only, and forgotten when you sign out or close the tab.',
    ),
    el('div', { class: 'field' }, el('label', { for: 'api-key' }, 'API key'), key),
    el(
      'p',
      { id: 'api-key-help', class: 'hint' },
      "Your API key is the one your account uses with this service's API: whoever runs the service gave it to you. Anyone holding it acts for your account, so it is never saved by this page.",
    ),
    errors.node,
    el('div', { class: 'actions' }, submit),
  );
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    submit.disabled = true;
    const candidate = key.value.trim();
    try {
      // A cheap read the key must be allowed: proof it is a key before it is kept.
      await api('GET', '/files', undefined, candidate);
      session.signIn(candidate);
      show();
    } catch (error) {
      errors.show(error);
      submit.disabled = false;
      key.focus();
    }
  });
  replace(root, el('main', { id: 'main' }, form));
  key.focus();
}

whenUnauthorized((message) => {
  const wasSession = session.onSession();
  session.signOut();
  scopes = null;
  show(wasSession ? 'This link has expired or was revoked: ask for a new one.' : message);
});
addEventListener('hashchange', () => show());
show();
