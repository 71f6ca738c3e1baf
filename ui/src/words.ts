/**
 * What the signing page says, one catalogue per language: English and French, complete. The page
 * speaks the agreement's `locale` once its view is read (a tag's language: `fr-CA` reads French),
 * and the browser's language before that (a link that does not work); English for any other.
 * The mails and the certificate have their own catalogues on the server (`src/domain/locales/`).
 */
export interface Words {
  /** The BCP 47 language the catalogue is written in, for `<html lang>` and dates. */
  lang: string;
  /** A size's units, smallest first: one byte, bytes, then each 1,024 times larger. */
  units: [one: string, many: string, ...larger: string[]];
  signing: string;
  support: (email: string) => string;
  unreachable: (why: string) => string;
  answered: (status: number) => string;
  linkExpired: string;
  linkReplaced: string;
  linkLocked: string;
  linkBroken: string;
  somethingWrong: string;
  linkIncomplete: string;
  youSigned: (when: string) => string;
  youDeclined: string;
  expired: string;
  voided: string;
  declinedByOther: string;
  signedByAll: string;
  noWayToIdentify: string;
  fifthWrongCode: string;
  confirm: string;
  codeFromMail: string;
  accessCode: string;
  enterCodeFirst: string;
  identifiedThanks: string;
  triesLeft: (count: number) => string;
  mailMeACode: string;
  codeOnItsWay: (to: string) => string;
  sendAnother: string;
  introByMail: (name: string, to: string) => string;
  introByAccess: (name: string) => string;
  confirmWho: string;
  documents: string;
  signedCopy: string;
  asks: (sender: string, name: string) => string;
  signableUntil: (when: string) => string;
  inOrder: (name: string) => string;
  yourSignature: string;
  disclosureSummary: string;
  consent: string;
  sign: string;
  drawFirst: string;
  tickFirst: string;
  signedThanks: string;
  declineToSign: string;
  declineWarning: string;
  declineInstead: string;
  declineWhy: string;
  yesDecline: string;
  declinedNotice: string;
  openEach: string;
  pagesOf: (document: string) => string;
  pageOf: (page: number, pages: number, document: string) => string;
  pagesLoading: string;
  pagesUnavailable: string;
  pagesNotPdf: string;
  pagesTooLarge: string;
  morePages: (count: number) => string;
  drawHere: string;
  clear: string;
  draw: string;
  type: string;
  typedLabel: string;
  howToSign: string;
}

const en: Words = {
  lang: 'en',
  units: ['byte', 'bytes', 'KB', 'MB', 'GB'],
  signing: 'Signing',
  support: (email) => `Questions? Write to ${email}.`,
  unreachable: (why) => `The portal could not be reached (${why}).`,
  answered: (status) => `The portal answered ${status}.`,
  linkExpired: 'This link has expired',
  linkReplaced: 'This link has been replaced',
  linkLocked: 'This link is locked',
  linkBroken: 'This link does not work',
  somethingWrong: 'Something went wrong',
  linkIncomplete: 'This page opens from the signing link you were sent; the link is not complete.',
  youSigned: (when) => `You signed this agreement on ${when}. Nothing more is needed from you.`,
  youDeclined: 'You declined this agreement. It is closed.',
  expired: 'This agreement has expired: it can no longer be signed.',
  voided: 'The sender voided this agreement: it can no longer be signed.',
  declinedByOther: 'This agreement was declined by a signer: it is closed.',
  signedByAll: 'This agreement is signed by everyone.',
  noWayToIdentify:
    'You need to confirm who you are before you can see this agreement, and the sender has set up no way to. Ask them for a new link.',
  fifthWrongCode: 'The fifth wrong code locks this link.',
  confirm: 'Confirm',
  codeFromMail: 'The 6-digit code from the e-mail',
  accessCode: 'The access code the sender gave you',
  enterCodeFirst: 'Enter the code first.',
  identifiedThanks: 'Thank you: you are identified.',
  triesLeft: (count) => `${count} ${count === 1 ? 'try' : 'tries'} left.`,
  mailMeACode: 'E-mail me a code',
  codeOnItsWay: (to) => `A code is on its way to ${to}. It works for 10 minutes.`,
  sendAnother: 'Send another code',
  introByMail: (name, to) => `Before you see the documents, confirm it is you, ${name}: we e-mail a code to ${to}.`,
  introByAccess: (name) =>
    `Before you see the documents, confirm it is you, ${name}, with the access code the sender gave you.`,
  confirmWho: 'Confirm who you are',
  documents: 'Documents',
  signedCopy: 'signed copy',
  asks: (sender, name) => `${sender} asks you, ${name}, to sign this agreement.`,
  signableUntil: (when) => ` It can be signed until ${when}.`,
  inOrder: (name) =>
    `This agreement is signed in order: ${name} signs before you. Open this link again once they have.`,
  yourSignature: 'Your signature',
  disclosureSummary: 'Signing electronically: what you agree to',
  consent: 'I have read the documents and the terms of signing electronically above, and agree to sign electronically.',
  sign: 'Sign',
  drawFirst: 'Draw or type your signature first.',
  tickFirst: 'Tick the box to agree to sign electronically.',
  signedThanks: 'Thank you: you have signed.',
  declineToSign: 'Decline to sign',
  declineWarning: 'Declining closes the agreement for everyone: no one can sign it after you. Are you sure?',
  declineInstead: 'Decline instead',
  declineWhy: 'Why (optional, sent to the sender)',
  yesDecline: 'Yes, decline',
  declinedNotice: 'You have declined. The sender is told.',
  openEach: 'Open each document before you sign.',
  pagesOf: (document) => `The pages of ${document}`,
  pageOf: (page, pages, document) => `Page ${page} of ${pages} of ${document}`,
  pagesLoading: 'Loading the pages…',
  pagesUnavailable: 'The pages cannot be shown here: open the document to read it.',
  pagesNotPdf: 'This document is not a PDF: open it to read it.',
  pagesTooLarge: 'This document is too large to show here: open it to read it.',
  morePages: (count) =>
    `${count} more ${count === 1 ? 'page' : 'pages'}: open the document to read ${count === 1 ? 'it' : 'them'}.`,
  drawHere: 'Draw your signature here with a mouse, pen or finger',
  clear: 'Clear',
  draw: 'Draw',
  type: 'Type',
  typedLabel: 'Your name as your signature',
  howToSign: 'How to sign',
};

const fr: Words = {
  lang: 'fr',
  units: ['octet', 'octets', 'Ko', 'Mo', 'Go'],
  signing: 'Signature',
  support: (email) => `Une question ? Écrivez à ${email}.`,
  unreachable: (why) => `Le portail est injoignable (${why}).`,
  answered: (status) => `Le portail a répondu ${status}.`,
  linkExpired: 'Ce lien a expiré',
  linkReplaced: 'Ce lien a été remplacé',
  linkLocked: 'Ce lien est bloqué',
  linkBroken: 'Ce lien ne fonctionne pas',
  somethingWrong: 'Un problème est survenu',
  linkIncomplete: 'Cette page s’ouvre depuis le lien de signature qui vous a été envoyé ; ce lien est incomplet.',
  youSigned: (when) => `Vous avez signé ce contrat le ${when}. Rien d’autre n’est attendu de vous.`,
  youDeclined: 'Vous avez refusé ce contrat. Il est clos.',
  expired: 'Ce contrat a expiré : il ne peut plus être signé.',
  voided: 'L’expéditeur a annulé ce contrat : il ne peut plus être signé.',
  declinedByOther: 'Un signataire a refusé ce contrat : il est clos.',
  signedByAll: 'Ce contrat est signé par tous.',
  noWayToIdentify:
    'Vous devez confirmer votre identité avant de voir ce contrat, et l’expéditeur n’a prévu aucun moyen de le faire. Demandez-lui un nouveau lien.',
  fifthWrongCode: 'Le cinquième code erroné bloque ce lien.',
  confirm: 'Confirmer',
  codeFromMail: 'Le code à 6 chiffres reçu par e-mail',
  accessCode: 'Le code d’accès que l’expéditeur vous a donné',
  enterCodeFirst: 'Saisissez d’abord le code.',
  identifiedThanks: 'Merci : votre identité est confirmée.',
  triesLeft: (count) => `${count} ${count === 1 ? 'essai restant' : 'essais restants'}.`,
  mailMeACode: 'M’envoyer un code par e-mail',
  codeOnItsWay: (to) => `Un code est en route vers ${to}. Il est valable 10 minutes.`,
  sendAnother: 'Envoyer un autre code',
  introByMail: (name, to) =>
    `Avant de voir les documents, confirmez qu’il s’agit bien de vous, ${name} : nous envoyons un code à ${to}.`,
  introByAccess: (name) =>
    `Avant de voir les documents, confirmez qu’il s’agit bien de vous, ${name}, avec le code d’accès que l’expéditeur vous a donné.`,
  confirmWho: 'Confirmez votre identité',
  documents: 'Documents',
  signedCopy: 'copie signée',
  asks: (sender, name) => `${sender} vous demande, ${name}, de signer ce contrat.`,
  signableUntil: (when) => ` Il peut être signé jusqu’au ${when}.`,
  inOrder: (name) =>
    `Ce contrat se signe dans l’ordre : ${name} signe avant vous. Rouvrez ce lien une fois que ce sera fait.`,
  yourSignature: 'Votre signature',
  disclosureSummary: 'Signer électroniquement : ce que vous acceptez',
  consent:
    'J’ai lu les documents et les conditions de la signature électronique ci-dessus, et j’accepte de signer électroniquement.',
  sign: 'Signer',
  drawFirst: 'Dessinez ou tapez d’abord votre signature.',
  tickFirst: 'Cochez la case pour accepter de signer électroniquement.',
  signedThanks: 'Merci : vous avez signé.',
  declineToSign: 'Refuser de signer',
  declineWarning: 'Refuser clôt le contrat pour tous : personne ne pourra le signer après vous. Êtes-vous sûr ?',
  declineInstead: 'Refuser plutôt',
  declineWhy: 'Pourquoi (facultatif, transmis à l’expéditeur)',
  yesDecline: 'Oui, refuser',
  declinedNotice: 'Vous avez refusé. L’expéditeur en est informé.',
  openEach: 'Ouvrez chaque document avant de signer.',
  pagesOf: (document) => `Les pages de ${document}`,
  pageOf: (page, pages, document) => `Page ${page} sur ${pages} de ${document}`,
  pagesLoading: 'Chargement des pages…',
  pagesUnavailable: 'Les pages ne peuvent pas être affichées ici : ouvrez le document pour le lire.',
  pagesNotPdf: 'Ce document n’est pas un PDF : ouvrez-le pour le lire.',
  pagesTooLarge: 'Ce document est trop volumineux pour être affiché ici : ouvrez-le pour le lire.',
  morePages: (count) =>
    `${count} ${count === 1 ? 'autre page' : 'autres pages'} : ouvrez le document pour ${count === 1 ? 'la' : 'les'} lire.`,
  drawHere: 'Dessinez votre signature ici avec une souris, un stylet ou le doigt',
  clear: 'Effacer',
  draw: 'Dessiner',
  type: 'Taper',
  typedLabel: 'Votre nom comme signature',
  howToSign: 'Comment signer',
};

const CATALOGUES: Record<string, Words> = { en, fr };

/** `1536` → `1.5 KB` (`1,5 Ko` in French): 1 KB = 1,024 bytes, in the catalogue's number format. */
export function sizeIn(words: Words, bytes: number): string {
  const [one, many, ...larger] = words.units;
  if (bytes === 1) return `1 ${one}`;
  let value = bytes;
  let unit = -1;
  while (value >= 1024 && unit < larger.length - 1) {
    value /= 1024;
    unit += 1;
  }
  const number = new Intl.NumberFormat(words.lang, { maximumFractionDigits: 1 }).format(value);
  return `${number} ${unit === -1 ? many : larger[unit]}`;
}

/** The catalogue of `locale`'s language (`fr-CA` → French), English when there is none. */
export function wordsFor(locale: string | undefined): Words {
  const language = (locale ?? 'en').toLowerCase().split('-')[0]!;
  return CATALOGUES[language] ?? en;
}
