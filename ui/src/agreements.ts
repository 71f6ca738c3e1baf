import { api, download, segment, session } from './api.js';
import { downloadButton } from './download.js';
import { append, el, errorBox, replace } from './dom.js';
import { size, time } from './format.js';
import type { Screen } from './screen.js';
import type { AgreementSigner, AgreementSummary, AuditEntry, Page, Verification } from './types.js';

/** How many agreements one "Load more" brings. */
const PAGE_SIZE = 20;

/**
 * The account's agreements, newest first: each one's name, status, creation date and signers, and
 * the sender's controls (none when the page may only read). A page at a time: "Load more" asks for
 * the page after the last one shown (the API's cursor), so a big account is never read whole.
 */
export const agreementScreen: Screen = ({ main, title }) => {
  const errors = errorBox();
  const list = el('ul', { class: 'cards agreements' });
  const status = el('p', { class: 'hint', role: 'status' });
  const more = el('button', { type: 'button', hidden: true }, 'Load more');
  // Verifying sends the PDF (a POST), which a read-only session may not.
  const verify = session.mayChange() ? verifyForm() : null;
  replace(main, title('Agreements'), verify, errors.node, list, status, el('div', { class: 'actions' }, more));

  let cursor: string | null = null;
  let shown = 0;
  let stopped = false;

  async function load() {
    more.disabled = true;
    try {
      const query = `?limit=${PAGE_SIZE}` + (cursor === null ? '' : `&cursor=${encodeURIComponent(cursor)}`);
      const page = await api<Page<AgreementSummary>>('GET', `/agreements${query}`);
      if (stopped) return;
      errors.clear();
      const first = shown === 0;
      if (first && page.data.length === 0)
        append(
          list,
          el('li', { class: 'empty' }, 'No agreements yet. Agreements created through the API are listed here.'),
        );
      const cards = page.data.map((agreement) => agreementCard(agreement, errors.show));
      append(list, ...cards);
      shown += cards.length;
      cursor = page.nextCursor;
      more.hidden = cursor === null;
      status.textContent = shown === 0 ? '' : cursor === null ? `All ${shown} shown.` : `${shown} shown, newest first.`;
      // After "Load more", the keyboard goes on from the first agreement it brought.
      if (!first) cards[0]?.focus();
    } catch (error) {
      errors.show(error);
    } finally {
      more.disabled = false;
    }
  }
  more.addEventListener('click', () => void load());

  void load();
  return () => {
    stopped = true;
  };
};

/**
 * **Verify a document**: a PDF someone holds, sent to `POST /verify`: whether it is a completed copy
 * this account issued, unchanged, and what its seal says. The file is read here and sent as it is.
 */
function verifyForm(): HTMLFormElement {
  const errors = errorBox();
  const file = el('input', {
    id: 'verify-file',
    name: 'file',
    type: 'file',
    accept: 'application/pdf,.pdf',
    required: true,
  });
  const submit = el('button', { type: 'submit' }, 'Verify');
  const result = el('div', { class: 'verification', role: 'status', 'aria-live': 'polite' });
  const form = el(
    'form',
    { class: 'panel', 'aria-labelledby': 'verify-heading' },
    el('h2', { id: 'verify-heading' }, 'Verify a document'),
    el(
      'p',
      { class: 'hint' },
      'Is this PDF a completed copy of one of your agreements, unchanged? Its bytes are checked here and its seal read.',
    ),
    errors.node,
    el('div', { class: 'field' }, el('label', { for: 'verify-file' }, 'PDF'), file),
    el('div', { class: 'actions' }, submit),
    result,
  );
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const chosen = file.files?.[0];
    if (chosen === undefined) return;
    submit.disabled = true;
    try {
      const answer = await api<Verification>(
        'POST',
        '/verify',
        chosen.type === 'application/pdf' ? chosen : new Blob([chosen], { type: 'application/pdf' }),
      );
      errors.clear();
      replace(result, ...verificationLines(chosen.name, answer));
    } catch (error) {
      replace(result);
      errors.show(error);
    } finally {
      submit.disabled = false;
    }
  });
  return form;
}

function verificationLines(name: string, answer: Verification): HTMLElement[] {
  const intact = answer.intact
    ? el(
        'p',
        { 'data-intact': 'true' },
        el('span', { class: 'badge good' }, 'Intact'),
        ` ${name} is, to the byte, the completed copy of document ${answer.documentId} of agreement ${answer.agreementId}.`,
      )
    : el(
        'p',
        { 'data-intact': 'false' },
        el('span', { class: 'badge bad' }, 'Not intact'),
        ` ${name} is not a completed copy this account issued, or it was changed since.`,
      );
  const sealed = answer.sealed
    ? el(
        'p',
        { 'data-sealed': 'true' },
        el('span', { class: 'badge good' }, answer.level === null ? 'Sealed' : `Sealed, PAdES ${answer.level}`),
        answer.signedAt === null ? '' : ' on ',
        answer.signedAt === null ? '' : time(answer.signedAt),
        '. Its seal covers every byte and checks; whether its certificate is trusted, a validator such as Adobe or pdfsig says.',
      )
    : el(
        'p',
        { 'data-sealed': 'false' },
        el('span', { class: 'badge warn' }, 'Not sealed'),
        ' No seal covers the whole file and checks against it.',
      );
  return [intact, sealed];
}

const AGREEMENT_STATUS: Record<AgreementSummary['status'], [label: string, className: string]> = {
  sent: ['Awaiting signatures', 'badge warn'],
  signed: ['Signed', 'badge good'],
};
const CLOSED: Record<NonNullable<AgreementSummary['closedReason']>, [label: string, className: string]> = {
  declined: ['Declined', 'badge bad'],
  expired: ['Expired', 'badge bad'],
  voided: ['Voided', 'badge bad'],
};

function agreementCard(agreement: AgreementSummary, showError: (error: unknown) => void): HTMLLIElement {
  const [label, className] = (agreement.closedReason !== null
    ? CLOSED[agreement.closedReason]
    : AGREEMENT_STATUS[agreement.status]) ?? [agreement.status, 'badge'];
  const open = agreement.status === 'sent' && agreement.closedReason === null;
  const writable = session.mayChange();
  const signed = agreement.signers.filter((signer) => signer.signedAt !== null).length;
  /** Draws the card again from the agreement a change answered, in place. */
  const redraw = (updated: AgreementSummary) => {
    const next = agreementCard(updated, showError);
    card.replaceWith(next);
    next.focus();
  };
  const card: HTMLLIElement = el(
    'li',
    { class: 'card agreement', tabindex: -1, 'data-id': agreement.id, 'data-status': agreement.status },
    el('h2', { class: 'name' }, agreement.name),
    el(
      'p',
      { class: 'meta' },
      el('span', { class: className }, label),
      ` · ${signed} of ${agreement.signers.length} signed${agreement.signingOrder === 'sequential' ? ', in order' : ''} · created `,
      time(agreement.createdAt),
      agreement.expiresAt === null ? '' : ' · expires ',
      agreement.expiresAt === null ? '' : time(agreement.expiresAt),
    ),
    el(
      'ul',
      { class: 'signers', 'aria-label': 'Signers' },
      ...agreement.signers.map((signer) => signerItem(agreement, signer, open && writable, showError, redraw)),
    ),
    el(
      'p',
      { class: 'hint' },
      `Sent by ${agreement.signerName} · `,
      agreement.documents.length === 1 ? '1 document' : `${agreement.documents.length} documents`,
    ),
    el(
      'ul',
      { class: 'documents', 'aria-label': 'Documents' },
      ...agreement.documents.map((document) =>
        el(
          'li',
          { 'data-id': document.id },
          el('span', { class: 'file' }, document.documentName),
          ' ',
          el('span', { class: 'hint' }, size(document.fileSize)),
          ' ',
          downloadButton(
            document.documentName,
            `/agreements/${segment(agreement.id)}/documents/${segment(document.id)}/download`,
            showError,
          ),
          // The completed copy: every signature stamped in, sealed (docs/signing.md).
          document.signedFileHash === null ? null : ' ',
          document.signedFileHash === null
            ? null
            : downloadButton(
                document.documentName,
                `/agreements/${segment(agreement.id)}/documents/${segment(document.id)}/signed`,
                showError,
                'Download signed',
              ),
        ),
      ),
    ),
    auditTrail(agreement, showError),
    open ? writable && voidControl(agreement, showError, redraw) : certificateButton(agreement, showError),
    writable && !open && !erased(agreement) && eraseControl(agreement, showError, redraw),
    writable && deleteControl(agreement, showError, () => card.remove()),
  );
  return card;
}

/** Whether the agreement's personal data is erased already (its signers' e-mails read "[erased]"). */
const erased = (agreement: AgreementSummary) => agreement.signers.every((signer) => signer.email === '[erased]');

/**
 * A control that asks first: the first press shows `warning` and turns the button into `confirm`,
 * the second runs `act`. For what cannot be undone.
 */
function askFirst(
  name: string,
  labels: { action: string; confirm: string; warning: string; className: string },
  showError: (error: unknown) => void,
  act: () => Promise<void>,
): HTMLElement {
  const button = el(
    'button',
    { type: 'button', class: 'link-button danger', 'aria-label': `${labels.action} ${name}` },
    labels.action,
  );
  const warning = el('span', { class: 'warn-text', role: 'status', hidden: true }, labels.warning);
  let confirming = false;
  button.addEventListener('click', async () => {
    if (!confirming) {
      confirming = true;
      warning.hidden = false;
      button.textContent = labels.confirm;
      button.setAttribute('aria-label', `${labels.confirm} ${name}`);
      return;
    }
    button.disabled = true;
    try {
      await act();
    } catch (error) {
      button.disabled = false;
      showError(error);
    }
  });
  return el('div', { class: `actions ${labels.className}` }, button, ' ', warning);
}

/**
 * **Delete**: asks first (the second press removes), then `DELETE …`: the agreement, its documents,
 * copies, certificate and trail are gone for good, and the card with them.
 */
function deleteControl(
  agreement: AgreementSummary,
  showError: (error: unknown) => void,
  removed: () => void,
): HTMLElement {
  const labels = {
    action: 'Delete',
    confirm: 'Yes, delete',
    warning: 'Removes it for good, with its documents and trail. Press again to delete.',
    className: 'delete',
  };
  return askFirst(agreement.name, labels, showError, async () => {
    await api('DELETE', `/agreements/${segment(agreement.id)}`);
    removed();
  });
}

/**
 * **Erase personal data** (a signed or closed agreement): asks first, then `POST …/erase-personal-data`:
 * names, e-mails, reasons, IPs and user agents become "[erased]"; the documents and the trail's
 * hashes stay, and the card is drawn again from the answer.
 */
function eraseControl(
  agreement: AgreementSummary,
  showError: (error: unknown) => void,
  redraw: (updated: AgreementSummary) => void,
): HTMLElement {
  const labels = {
    action: 'Erase personal data',
    confirm: 'Yes, erase',
    warning:
      "Replaces the signers' names, e-mails, reasons, IP addresses and browsers with [erased], for good. The documents and the trail's proof stay. Press again to erase.",
    className: 'erase',
  };
  return askFirst(agreement.name, labels, showError, async () => {
    redraw(await api<AgreementSummary>('POST', `/agreements/${segment(agreement.id)}/erase-personal-data`));
  });
}

/** **Void this agreement**: a reason, then `POST …/void`; every signing link stops working. */
function voidControl(
  agreement: AgreementSummary,
  showError: (error: unknown) => void,
  redraw: (updated: AgreementSummary) => void,
): HTMLDetailsElement {
  const reason = el('input', {
    type: 'text',
    required: true,
    maxlength: 1000,
    class: 'void-reason',
    'aria-label': `Why ${agreement.name} is voided`,
    placeholder: 'Reason (the signers are told)',
  });
  const submit = el('button', { type: 'submit', class: 'danger' }, 'Void agreement');
  const form = el('form', { class: 'void-form' }, reason, ' ', submit);
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    submit.disabled = true;
    try {
      redraw(
        await api<AgreementSummary>('POST', `/agreements/${segment(agreement.id)}/void`, { reason: reason.value }),
      );
    } catch (error) {
      showError(error);
    } finally {
      submit.disabled = false;
    }
  });
  return el(
    'details',
    { class: 'void' },
    el('summary', {}, 'Void this agreement'),
    el(
      'p',
      { class: 'hint' },
      'Closes it for good: no one can sign it any more, and every signing link stops working.',
    ),
    form,
  );
}

/** **Correct**: a signer's name or e-mail, while they have not signed; their signing link stops working. */
function correctionControl(
  agreement: AgreementSummary,
  signer: AgreementSigner,
  showError: (error: unknown) => void,
  redraw: (updated: AgreementSummary) => void,
): HTMLDetailsElement {
  const name = `${signer.firstName} ${signer.lastName}`;
  const field = (key: 'firstName' | 'lastName' | 'email', label: string) =>
    el('input', {
      type: key === 'email' ? 'email' : 'text',
      required: true,
      value: signer[key],
      name: key,
      'aria-label': `${label} of ${name}`,
    });
  const inputs = [field('firstName', 'First name'), field('lastName', 'Last name'), field('email', 'E-mail')] as const;
  const submit = el('button', { type: 'submit' }, 'Save correction');
  const form = el('form', { class: 'correct-form' }, ...inputs.flatMap((input) => [input, ' ']), submit);
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const changes = Object.fromEntries(
      inputs.filter((input) => input.value !== signer[input.name as 'email']).map((input) => [input.name, input.value]),
    );
    submit.disabled = true;
    try {
      redraw(
        await api<AgreementSummary>(
          'PATCH',
          `/agreements/${segment(agreement.id)}/signers/${segment(signer.id)}`,
          changes,
        ),
      );
    } catch (error) {
      showError(error);
    } finally {
      submit.disabled = false;
    }
  });
  return el('details', { class: 'correct' }, el('summary', { 'aria-label': `Correct ${name}` }, 'Correct'), form);
}

/**
 * **Certificate** of a signed or closed agreement: the PDF is fetched with the API key (no link can
 * carry it) and saved from memory under its name.
 */
function certificateButton(agreement: AgreementSummary, showError: (error: unknown) => void): HTMLElement {
  const button = el(
    'button',
    {
      type: 'button',
      class: 'link-button',
      'aria-label': `Download the certificate of completion of ${agreement.name}`,
    },
    'Certificate of completion',
  );
  button.addEventListener('click', async () => {
    button.disabled = true;
    try {
      const pdf = await download(`/agreements/${segment(agreement.id)}/certificate`);
      const url = URL.createObjectURL(pdf);
      const save = el('a', { href: url, download: `certificate-${agreement.id}.pdf`, hidden: true });
      document.body.append(save);
      save.click();
      save.remove();
      setTimeout(() => URL.revokeObjectURL(url), 60_000);
    } catch (error) {
      showError(error);
    } finally {
      button.disabled = false;
    }
  });
  return el('div', { class: 'actions' }, button);
}

const ACTIONS: Record<string, string> = {
  created: 'Created',
  'link-issued': 'Signing link made',
  viewed: 'Opened',
  signed: 'Signed',
  declined: 'Declined',
  expired: 'Expired',
  reminder: 'Reminder due',
  'identification-code-sent': 'Identification code mailed',
  identified: 'Identified',
  'identification-failed': 'Wrong identification code',
  'identification-locked': 'Link locked after wrong codes',
  consented: 'Consented to sign electronically',
  voided: 'Voided',
  'signer-corrected': 'Signer corrected',
};

const METHODS: Record<string, string> = {
  'email-code': 'a code mailed to them',
  'access-code': 'the access code you gave them',
};

/** Who took a step, in words: a signer by name, the sender, or the portal itself. */
function actorName(agreement: AgreementSummary, actor: string): string {
  if (actor.startsWith('account:')) return 'the sender';
  if (actor === 'system') return 'the portal';
  const signer = agreement.signers.find((one) => one.id === actor);
  return signer === undefined ? actor : `${signer.firstName} ${signer.lastName}`;
}

/** The agreement's audit trail, read when it is opened; whether its hash chain verifies, said first. */
function auditTrail(agreement: AgreementSummary, showError: (error: unknown) => void): HTMLDetailsElement {
  const agreementId = agreement.id;
  const body = el('div', {}, el('p', { class: 'hint' }, 'Loading…'));
  const details = el('details', { class: 'audit' }, el('summary', {}, 'Audit trail'), body);
  let loaded = false;
  details.addEventListener('toggle', async () => {
    if (!details.open || loaded) return;
    loaded = true;
    try {
      const trail = await api<{ data: AuditEntry[]; verified: boolean }>(
        'GET',
        `/agreements/${segment(agreementId)}/audit`,
      );
      replace(
        body,
        el(
          'p',
          { class: trail.verified ? 'good-text' : 'bad-text', role: 'status' },
          trail.verified
            ? 'Verified: every entry is intact.'
            : 'Not verified: an entry was changed after it was written.',
        ),
        el(
          'ol',
          { class: 'trail' },
          ...trail.data.map((entry) =>
            el(
              'li',
              {},
              el('strong', {}, ACTIONS[entry.action] ?? entry.action),
              ' · ',
              time(entry.at),
              ` · ${actorName(agreement, entry.actor)}`,
              entry.ip === null ? '' : ` · ${entry.ip}`,
              entry.detail === null ? '' : ` · “${entry.detail}”`,
              entry.method === undefined ? '' : ` · by ${METHODS[entry.method] ?? entry.method}`,
              el('br', {}),
              el('code', { class: 'hint', title: "This entry's hash" }, entry.hash),
            ),
          ),
        ),
      );
    } catch (error) {
      loaded = false;
      replace(body);
      showError(error);
    }
  });
  return details;
}

function signerStatus(signer: AgreementSigner): HTMLSpanElement {
  if (signer.signedAt !== null) return el('span', { class: 'good-text' }, 'signed ', time(signer.signedAt));
  if (signer.declinedAt !== null) {
    return el(
      'span',
      { class: 'bad-text' },
      'declined ',
      time(signer.declinedAt),
      signer.declineReason === null ? '' : `: “${signer.declineReason}”`,
    );
  }
  if (signer.viewedAt !== null)
    return el('span', { class: 'warn-text' }, 'opened ', time(signer.viewedAt), ', not signed yet');
  return el('span', { class: 'warn-text' }, 'not signed yet');
}

/** Whether the signer must identify, and how and when they did; `null` when they need not. */
function signerIdentification(signer: AgreementSigner): HTMLSpanElement | null {
  const { identification } = signer;
  // Signed or declined without identifying (the host signed for them): nothing left to identify for.
  if (
    !identification.required ||
    (!identification.verified && (signer.signedAt !== null || signer.declinedAt !== null))
  )
    return null;
  if (identification.verified) {
    return el(
      'span',
      { class: 'good-text identification' },
      `identified by ${METHODS[identification.method!] ?? identification.method} `,
      time(identification.at!),
    );
  }
  return el('span', { class: 'warn-text identification' }, 'must identify before seeing the documents');
}

/**
 * A signer, their status, and while they may still sign, **Copy signing link**: a new link (which
 * replaces their older ones), copied for the sender to pass on, and shown to copy by hand.
 * `actionable`: the agreement is open and the page may change it (else the signer alone is shown).
 */
function signerItem(
  agreement: AgreementSummary,
  signer: AgreementSigner,
  actionable: boolean,
  showError: (error: unknown) => void,
  redraw: (updated: AgreementSummary) => void,
): HTMLLIElement {
  const item = el(
    'li',
    { 'data-signed': signer.signedAt !== null ? 'true' : 'false', 'data-id': signer.id },
    el('span', { class: 'signer-name' }, `${signer.firstName} ${signer.lastName}`),
    ' ',
    el('span', { class: 'hint' }, `<${signer.email}>`),
    ' · ',
    signerStatus(signer),
  );
  const identification = signerIdentification(signer);
  if (identification !== null) item.append(' · ', identification);
  if (!actionable || signer.signedAt !== null || signer.declinedAt !== null) return item;
  const name = `${signer.firstName} ${signer.lastName}`;
  const copy = el(
    'button',
    { type: 'button', class: 'link-button', 'aria-label': `Copy a signing link for ${name}` },
    'Copy signing link',
  );
  const shown = el('span', { class: 'hint', role: 'status' });
  // How the next link is made: an access code the signer must give (passed on by phone or text),
  // and whether the portal mails the link to them.
  const accessCode = el('input', {
    type: 'text',
    minlength: 4,
    maxlength: 64,
    autocomplete: 'off',
    class: 'access-code',
    'aria-label': `Access code for ${name} (optional, 4 to 64 characters)`,
    placeholder: 'Access code (optional)',
  });
  const send = el('input', {
    type: 'checkbox',
    class: 'send-link',
    'aria-label': `Send the link to ${signer.email} by e-mail`,
  });
  const options = el(
    'details',
    { class: 'link-options' },
    el('summary', {}, 'Link options'),
    el('label', {}, accessCode),
    ' ',
    el('label', { class: 'check' }, send, el('span', {}, 'Send by e-mail')),
  );
  copy.addEventListener('click', async () => {
    copy.disabled = true;
    const code = accessCode.value.trim();
    try {
      const { link, expiresAt } = await api<{ link: string; expiresAt: string }>(
        'POST',
        `/agreements/${segment(agreement.id)}/signers/${segment(signer.id)}/signing-link`,
        { ...(code === '' ? {} : { accessCode: code }), ...(send.checked ? { send: true } : {}) },
      );
      const field = el('input', {
        type: 'text',
        readonly: true,
        value: link,
        class: 'link-field',
        'aria-label': `Signing link for ${signer.firstName} ${signer.lastName}`,
      });
      let copied = true;
      try {
        await navigator.clipboard.writeText(link);
      } catch {
        copied = false;
      }
      replace(
        shown,
        send.checked ? `Mailed to ${signer.email}. ` : '',
        copied ? 'Copied; valid until ' : 'Select and copy it; valid until ',
        time(expiresAt),
        '. Older links of this signer no longer work.',
        code === '' ? '' : ' Give them the access code by another channel than this link.',
        field,
      );
      accessCode.value = '';
      if (!copied) field.select();
    } catch (error) {
      showError(error);
    } finally {
      copy.disabled = false;
    }
  });
  item.append(' ', copy, ' ', options, ' ', correctionControl(agreement, signer, showError, redraw), ' ', shown);
  return item;
}
