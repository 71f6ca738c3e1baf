import { el, errorBox, replace } from './dom.js';
import { pdfPages } from './pdf-pages.js';
import { signaturePad } from './signature-pad.js';
import { type Words, sizeIn, wordsFor } from './words.js';

/**
 * The signing page: what a signer's link opens. The signing token is the link's fragment: it is
 * read here, kept in this tab's memory only, and taken off the address, so it is in no history
 * entry, no server log and no Referer. The page calls the signer's API (`signing`, beside the page
 * under the API root) with it as a bearer, and nothing else.
 */
interface Signer {
  id: string;
  firstName: string;
  lastName: string;
  signedAt: string | null;
  viewedAt: string | null;
  declinedAt: string | null;
}
interface View {
  agreement: {
    id: string;
    name: string;
    status: 'sent' | 'signed';
    signerName: string;
    signingOrder: 'parallel' | 'sequential';
    expiresAt: string | null;
    closedReason: 'declined' | 'expired' | 'voided' | null;
    signers: Signer[];
  };
  signer: Signer & { email: string };
  identification:
    | { required: false }
    | Unverified
    | { required: true; verified: true; method: 'email-code' | 'access-code'; at: string };
  disclosure: { version: string; text: string };
  documents: { id: string; documentName: string; fileSize: number; link: string; signedLink: string | null }[];
  locale: string;
  branding: Branding | null;
}

/** Who asks for the signature (option `branding`): shown at the top, in its colour. */
interface Branding {
  name: string;
  logoUrl: string | null;
  accentColor: string | null;
  supportEmail: string | null;
}

/** What the page says: the browser's language until a view names the agreement's. */
let words: Words = wordsFor(navigator.language);
/** Who asks, once a view said. */
let brand: Branding | null = null;

/** Speaks the view's language and shows its branding from now on. */
function adopt(view: View): void {
  words = wordsFor(view.locale);
  document.documentElement.lang = words.lang;
  brand = view.branding;
  // The colour goes through the CSSOM, which the page's CSP (no inline style) leaves to its own script.
  if (brand?.accentColor != null) document.documentElement.style.setProperty('--accent', brand.accentColor);
}

interface Unverified {
  required: true;
  verified: false;
  methods: ('email-code' | 'access-code')[];
}

/**
 * The origins the host allows to frame this page (`signing.frameAncestors`, in a meta tag): the page
 * tells its parent how signing goes, and only a parent on one of them can receive it (the browser
 * delivers a message to the parent only when its origin is the one named). Never the token.
 */
const frameOrigins = (
  document.querySelector('meta[name="customer-portal-frame-ancestors"]')?.getAttribute('content') ?? ''
)
  .split(' ')
  .filter(Boolean);
function tellParent(status: 'loaded' | 'identified' | 'signed' | 'declined', view: View): void {
  if (window.parent === window) return;
  const message = { type: 'customer-portal:signing', status, agreementId: view.agreement.id, signerId: view.signer.id };
  for (const origin of frameOrigins) window.parent.postMessage(message, origin);
}

class SigningError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

const root = document.getElementById('app')!;
/** The fragment as a token; a malformed escape is kept as written, for the API to refuse plainly. */
function tokenOf(fragment: string): string {
  try {
    return decodeURIComponent(fragment);
  } catch {
    return fragment;
  }
}
const token = tokenOf(location.hash.slice(1));
if (token !== '') history.replaceState(null, '', location.pathname + location.search);
const apiRoot = new URL('.', location.href).href;

async function call(method: 'GET' | 'POST', path: string, body?: unknown): Promise<View> {
  let response: Response;
  try {
    response = await fetch(apiRoot + path, {
      method,
      headers: {
        Accept: 'application/json',
        Authorization: `Bearer ${token}`,
        ...(body === undefined ? {} : { 'Content-Type': 'application/json' }),
      },
      body: body === undefined ? null : JSON.stringify(body),
      credentials: 'omit',
      cache: 'no-store',
    });
  } catch (error) {
    throw new SigningError(0, words.unreachable(error instanceof Error ? error.message : String(error)));
  }
  const parsed = (await response.json().catch(() => undefined)) as { message?: string } | undefined;
  if (!response.ok) throw new SigningError(response.status, parsed?.message ?? words.answered(response.status));
  const view = parsed as unknown as View;
  adopt(view);
  return view;
}

const fullName = (signer: Signer) => `${signer.firstName} ${signer.lastName}`;
/** A date-time as words in the reader's locale. */
const when = (atom: string) => {
  const date = new Date(atom);
  return Number.isNaN(date.getTime())
    ? atom
    : new Intl.DateTimeFormat(words.lang, { dateStyle: 'long', timeStyle: 'short' }).format(date);
};

/** The top bar: the company's logo and name when there is a branding, else the page's name. */
function topBar(): HTMLElement {
  if (brand === null) return el('header', { class: 'top' }, el('span', { class: 'brand' }, words.signing));
  return el(
    'header',
    { class: 'top branded' },
    // A data-URL or an https: one, as the page's CSP takes (img-src 'self' data: https:).
    brand.logoUrl != null ? el('img', { class: 'logo', src: brand.logoUrl, alt: '' }) : null,
    el('span', { class: 'brand' }, brand.name),
  );
}

/** A page with a heading and what follows; the heading takes the focus, so a reader starts there. */
function page(heading: string, ...children: (Node | string | null)[]): void {
  const title = el('h1', { tabindex: -1 }, heading);
  const support =
    brand?.supportEmail == null ? null : el('footer', { class: 'support hint' }, words.support(brand.supportEmail));
  replace(root, topBar(), el('main', { id: 'main', class: 'signing' }, title, ...children, support));
  title.focus({ preventScroll: true });
}

/** What a refused link means, in the signer's words. */
function refused(error: unknown): void {
  const status = error instanceof SigningError ? error.status : 0;
  const message = error instanceof Error ? error.message : String(error);
  const heading =
    status === 410
      ? words.linkExpired
      : status === 401
        ? /replaced/.test(message)
          ? words.linkReplaced
          : /revoked/.test(message)
            ? words.linkLocked
            : words.linkBroken
        : words.somethingWrong;
  page(heading, el('p', { role: 'alert' }, message));
}

/** The state of the agreement for this signer, when there is nothing to sign; `null` when they may sign. */
function closedNotice(view: View): string | null {
  const { agreement, signer } = view;
  if (signer.signedAt !== null) return words.youSigned(when(signer.signedAt));
  if (signer.declinedAt !== null) return words.youDeclined;
  if (agreement.closedReason === 'expired') return words.expired;
  if (agreement.closedReason === 'voided') return words.voided;
  if (agreement.closedReason === 'declined') return words.declinedByOther;
  if (agreement.status === 'signed') return words.signedByAll;
  return null;
}

function waitingFor(view: View): Signer | null {
  if (view.agreement.signingOrder !== 'sequential') return null;
  const first = view.agreement.signers.find((candidate) => candidate.signedAt === null);
  return first !== undefined && first.id !== view.signer.id ? first : null;
}

/** `bo@example.com` as `b…@example.com`: enough to recognise, not to read out to someone looking on. */
function masked(email: string): string {
  const at = email.lastIndexOf('@');
  return at <= 1 ? email : `${email[0]}…${email.slice(at)}`;
}

/**
 * The identification step: a signer who must identify asks for a code by e-mail, or enters the
 * access code the sender gave them; the tries left are shown, and the fifth wrong code locks the
 * link. Once identified, the agreement is shown.
 */
function identify(view: View, identification: Unverified): void {
  const { agreement, signer } = view;
  const byMail = identification.methods.includes('email-code');
  const byAccess = identification.methods.includes('access-code');
  if (!byMail && !byAccess) {
    return page(agreement.name, el('p', { role: 'status' }, words.noWayToIdentify));
  }
  const errors = errorBox();
  // The view says nothing of tries (DESIGN §12); a wrong code's answer says how many are left.
  const status = el('p', { role: 'status', class: 'hint' }, words.fifthWrongCode);
  const code = el('input', {
    id: 'identification-code',
    name: 'code',
    required: true,
    maxlength: 64,
    autocomplete: byMail ? 'one-time-code' : 'off',
    ...(byMail ? { inputmode: 'numeric' } : {}),
  });
  const confirm = el('button', { type: 'submit' }, words.confirm);
  const form = el(
    'form',
    { class: 'panel', hidden: byMail },
    el(
      'div',
      { class: 'field' },
      el('label', { for: 'identification-code' }, byMail ? words.codeFromMail : words.accessCode),
      code,
    ),
    errors.node,
    el('div', { class: 'actions' }, confirm),
  );
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    if (code.value.trim() === '') return errors.show(words.enterCodeFirst);
    confirm.disabled = true;
    try {
      const identified = await call('POST', 'signing/identify', { code: code.value.trim() });
      tellParent('identified', identified);
      show(identified, words.identifiedThanks);
    } catch (error) {
      confirm.disabled = false;
      if (error instanceof SigningError && error.status === 401) return refused(error);
      errors.show(error);
      const left = error instanceof Error ? /(\d+) tr(?:y|ies) left/.exec(error.message) : null;
      if (left !== null) status.textContent = words.triesLeft(Number(left[1]));
      code.select();
    }
  });
  const sendErrors = errorBox();
  const send = el('button', { type: 'button' }, words.mailMeACode);
  send.addEventListener('click', async () => {
    send.disabled = true;
    sendErrors.clear();
    try {
      await call('POST', 'signing/identify/email-code');
      sendErrors.clear();
      sent.textContent = words.codeOnItsWay(masked(signer.email));
      sent.hidden = false;
      send.textContent = words.sendAnother;
      form.hidden = false;
      code.focus();
    } catch (error) {
      sendErrors.show(error);
    } finally {
      send.disabled = false;
    }
  });
  const sent = el('p', { role: 'status', hidden: true });
  const intro = byMail
    ? words.introByMail(fullName(signer), masked(signer.email))
    : words.introByAccess(fullName(signer));
  page(
    agreement.name,
    el('h2', {}, words.confirmWho),
    el('p', {}, intro),
    byMail ? el('div', { class: 'actions' }, send) : null,
    sendErrors.node,
    sent,
    form,
    status,
  );
}

/** A document link serves for 5 minutes; past 4, a click first asks for the view again and follows its fresh link. */
const LINK_FRESH_MS = 4 * 60_000;

function renewing(anchor: HTMLAnchorElement, documentId: string, which: 'link' | 'signedLink'): HTMLAnchorElement {
  let freshAt = Date.now();
  anchor.addEventListener('click', async (event) => {
    if (Date.now() - freshAt < LINK_FRESH_MS) return;
    event.preventDefault();
    try {
      const fresh = (await call('GET', 'signing')).documents.find((one) => one.id === documentId)?.[which];
      if (fresh == null) return;
      anchor.href = fresh;
      freshAt = Date.now();
      anchor.click();
    } catch (error) {
      refused(error);
    }
  });
  return anchor;
}

/**
 * Each document's pages, shown in the page: its completed copy once there is one, else the
 * document as sent. Every view shown is one just answered, so its links are fresh.
 */
function pagesOf(view: View): HTMLElement[] {
  return view.documents.map((document) =>
    pdfPages(document.documentName, document.fileSize, document.signedLink ?? document.link, words),
  );
}

function show(view: View, notice?: string): void {
  const { agreement, signer } = view;
  if (view.identification.required && !view.identification.verified) return identify(view, view.identification);
  const documents = el(
    'ul',
    { class: 'documents', 'aria-label': words.documents },
    ...view.documents.map((document) =>
      el(
        'li',
        {},
        renewing(
          el('a', { href: document.link, rel: 'noopener', download: document.documentName }, document.documentName),
          document.id,
          'link',
        ),
        ' ',
        el('span', { class: 'hint' }, sizeIn(words, document.fileSize)),
        document.signedLink === null ? null : ' · ',
        document.signedLink === null
          ? null
          : renewing(
              el('a', { href: document.signedLink, rel: 'noopener', download: '' }, words.signedCopy),
              document.id,
              'signedLink',
            ),
      ),
    ),
  );
  const about = el(
    'p',
    {},
    words.asks(brand?.name ?? agreement.signerName, fullName(signer)),
    agreement.expiresAt === null ? '' : words.signableUntil(when(agreement.expiresAt)),
  );
  const status = notice === undefined ? null : el('p', { role: 'status', class: 'good-text' }, notice);
  const closed = closedNotice(view);
  if (closed !== null)
    return page(
      agreement.name,
      status,
      el('p', { role: 'status' }, closed),
      el('h2', {}, words.documents),
      documents,
      ...pagesOf(view),
    );
  const waiting = waitingFor(view);
  if (waiting !== null) {
    return page(
      agreement.name,
      about,
      el('p', { role: 'status' }, words.inOrder(fullName(waiting))),
      el('h2', {}, words.documents),
      documents,
      ...pagesOf(view),
    );
  }

  const errors = errorBox();
  const pad = signaturePad(fullName(signer), words);
  const consent = el('input', { id: 'consent', type: 'checkbox' });
  const signButton = el('button', { type: 'submit' }, words.sign);
  const form = el(
    'form',
    { class: 'panel' },
    el('h2', {}, words.yourSignature),
    pad.node,
    el(
      'details',
      { class: 'disclosure' },
      el('summary', {}, words.disclosureSummary),
      ...view.disclosure.text.split(/\n{2,}/).map((paragraph) => el('p', {}, paragraph)),
    ),
    el('label', { class: 'check' }, consent, el('span', {}, words.consent)),
    errors.node,
    el('div', { class: 'actions' }, signButton),
  );
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const signature = pad.value();
    if (signature === null) return errors.show(words.drawFirst);
    if (!consent.checked) return errors.show(words.tickFirst);
    signButton.disabled = true;
    try {
      const signed = await call('POST', 'signing/sign', {
        signature,
        consent: { disclosureVersion: view.disclosure.version },
      });
      tellParent('signed', signed);
      show(signed, words.signedThanks);
    } catch (error) {
      signButton.disabled = false;
      errors.show(error);
    }
  });

  const reason = el('textarea', { id: 'decline-reason', maxlength: 1000, rows: 3 });
  const declineButton = el('button', { type: 'button', class: 'danger' }, words.declineToSign);
  const declineErrors = errorBox();
  const declineWarning = el('p', { class: 'warn-text', role: 'status', hidden: true }, words.declineWarning);
  const decline = el(
    'details',
    { class: 'panel' },
    el('summary', {}, words.declineInstead),
    el('div', { class: 'field' }, el('label', { for: 'decline-reason' }, words.declineWhy), reason),
    declineErrors.node,
    declineWarning,
    el('div', { class: 'actions' }, declineButton),
  );
  let confirming = false;
  declineButton.addEventListener('click', async () => {
    // The first press asks; only the second declines.
    if (!confirming) {
      confirming = true;
      declineWarning.hidden = false;
      declineButton.textContent = words.yesDecline;
      return;
    }
    declineButton.disabled = true;
    try {
      const declined = await call('POST', 'signing/decline', {
        reason: reason.value.trim() === '' ? null : reason.value.trim(),
      });
      tellParent('declined', declined);
      show(declined, words.declinedNotice);
    } catch (error) {
      declineButton.disabled = false;
      declineErrors.show(error);
    }
  });

  page(
    agreement.name,
    status,
    about,
    el('h2', {}, words.documents),
    el('p', { class: 'hint' }, words.openEach),
    documents,
    ...pagesOf(view),
    form,
    decline,
  );
}

if (token === '') refused(new SigningError(401, words.linkIncomplete));
else
  call('GET', 'signing').then((view) => {
    tellParent('loaded', view);
    show(view);
  }, refused);
