import { api, segment } from './api.js';
import { downloadButton } from './download.js';
import { append, el, errorBox, replace } from './dom.js';
import { size, time } from './format.js';
import type { Screen } from './screen.js';
import type { AgreementSigner, AgreementSummary, Page } from './types.js';

/** How many agreements one "Load more" brings. */
const PAGE_SIZE = 20;

/**
 * The account's agreements, newest first, read-only: each one's name, status, creation date and
 * signers. A page at a time: "Load more" asks for the page after the last one shown (the API's
 * cursor), so a big account is never read whole.
 */
export const agreementScreen: Screen = ({ main, title }) => {
  const errors = errorBox();
  const list = el('ul', { class: 'cards agreements' });
  const status = el('p', { class: 'hint', role: 'status' });
  const more = el('button', { type: 'button', hidden: true }, 'Load more');
  replace(main, title('Agreements'), errors.node, list, status, el('div', { class: 'actions' }, more));

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
      if (first && page.data.length === 0) append(list, el('li', { class: 'empty' }, 'No agreements yet. Agreements created through the API are listed here.'));
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

const AGREEMENT_STATUS: Record<AgreementSummary['status'], [label: string, className: string]> = {
  sent: ['Awaiting signatures', 'badge warn'],
  signed: ['Signed', 'badge good'],
};

function agreementCard(agreement: AgreementSummary, showError: (error: unknown) => void): HTMLLIElement {
  const [label, className] = AGREEMENT_STATUS[agreement.status] ?? [agreement.status, 'badge'];
  const signed = agreement.signers.filter((signer) => signer.signedAt !== null).length;
  return el(
    'li',
    { class: 'card agreement', tabindex: -1, 'data-id': agreement.id, 'data-status': agreement.status },
    el('h2', { class: 'name' }, agreement.name),
    el(
      'p',
      { class: 'meta' },
      el('span', { class: className }, label),
      ` · ${signed} of ${agreement.signers.length} signed · created `,
      time(agreement.createdAt),
    ),
    el('ul', { class: 'signers', 'aria-label': 'Signers' }, ...agreement.signers.map(signerItem)),
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
          downloadButton(document.documentName, `/agreements/${segment(agreement.id)}/documents/${segment(document.id)}/download`, showError),
        ),
      ),
    ),
  );
}

function signerItem(signer: AgreementSigner): HTMLLIElement {
  return el(
    'li',
    { 'data-signed': signer.signedAt !== null ? 'true' : 'false' },
    el('span', { class: 'signer-name' }, `${signer.firstName} ${signer.lastName}`),
    ' ',
    el('span', { class: 'hint' }, `<${signer.email}>`),
    ' · ',
    signer.signedAt === null ? el('span', { class: 'warn-text' }, 'not signed yet') : el('span', { class: 'good-text' }, 'signed ', time(signer.signedAt)),
  );
}
