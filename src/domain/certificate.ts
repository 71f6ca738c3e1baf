import { PortalError } from '../errors.js';
import type { AgreementRecord, AgreementSignerRecord, AuditEntry } from '../records.js';
import { type Speech, speechOf } from './locales/index.js';
import type { ShownBranding } from './branding.js';
import { atom } from '../shared/time.js';
import { verifyTrail } from './audit-trail.js';
import { Flow, loadLibpdf, printable } from './pdf-layout.js';
import { drawableSignature } from './signature-data.js';

/**
 * The certificate of completion of an agreement that is signed or closed: a PDF (@libpdf/core, the
 * one PDF library of the package) that states the agreement, each document's name, size and
 * SHA-256, each signer with their e-mail, their step (time, IP), their signature image, and the
 * whole audit trail with its final hash. Everything in it is read from the stored agreement;
 * nothing is signed here.
 */

/** What a request for the certificate of an open agreement is told. */
export const CERTIFICATE_LATER = 'its certificate of completion is made once it is signed or closed.';

/** Who took a step, in words: a signer by name, the sender, or the portal itself. */
function actorName(words: Speech['certificate'], record: AgreementRecord, actor: string): string {
  if (actor.startsWith('account:')) return words.theSender(actor);
  if (actor === 'system') return words.thePortal;
  const signer = record.signers.find((one) => one.id === actor);
  return signer === undefined ? actor : `${signer.firstName} ${signer.lastName} (${actor})`;
}

/** The step that settled a signer, from the trail: their signature or their decline. */
const settlingStep = (audit: readonly AuditEntry[], signer: AgreementSignerRecord) =>
  audit.findLast((entry) => entry.signerId === signer.id && (entry.action === 'signed' || entry.action === 'declined'));

/** How and when the signer identified, from the trail: the last `identified` entry; else that none was asked. */
function identificationLine(speech: Speech, audit: readonly AuditEntry[], signer: AgreementSignerRecord): string {
  const words = speech.certificate;
  const entry = audit.findLast((one) => one.action === 'identified' && one.signerId === signer.id);
  if (entry?.method !== undefined) return words.identifiedBy(words.methods[entry.method], speech.when(entry.at));
  return signer.shouldIdentify ? words.identificationMissing : words.noneRequired;
}

/**
 * The certificate of completion of a signed or closed agreement, in its `locale`'s language, under
 * the company's name and, given as a data-URL PNG or JPEG, its logo (option `branding`).
 */
export async function certificatePdf(
  record: AgreementRecord,
  now: Date,
  branding: ShownBranding | null = null,
): Promise<Buffer> {
  if (record.status !== 'signed' && record.closedReason === null)
    throw new PortalError('AGREEMENT_STILL_OPEN', record.id, CERTIFICATE_LATER);
  const speech = speechOf(record.locale);
  const words = speech.certificate;
  const when = speech.when;
  const lib = await loadLibpdf();
  const pdf = lib.PDF.create();
  pdf.setTitle(printable(words.titleOf(record.name)));
  pdf.setProducer('customer-portal');
  pdf.setCreator('customer-portal');
  pdf.setCreationDate(now);
  const flow = new Flow(pdf, lib);

  if (branding !== null) {
    const logo = branding.logoUrl === null ? null : drawableSignature(branding.logoUrl);
    if (logo !== null) flow.image(logo, 160, 48);
    flow.text(branding.name, { size: 12, bold: true });
    flow.gap(6);
  }
  flow.text(words.title, { size: 20, bold: true });
  flow.gap(8);
  flow.line(words.agreement, record.name);
  flow.line(words.agreementId, record.id);
  flow.line(
    words.outcome,
    record.status === 'signed'
      ? words.signedByAll
      : words.closed(words.reasons[record.closedReason!] ?? String(record.closedReason)),
  );
  flow.line(words.sentBy, record.signerName);
  // The sender's own signature, given when the agreement was made.
  const senderSignature = drawableSignature(record.signerSignature);
  if (senderSignature !== null) flow.image(senderSignature, 180, 50);
  flow.line(words.senderSignatureHash, record.signerSignatureHash);
  flow.line(words.created, when(record.createdAt));
  flow.line(words.signingOrder, words.order[record.signingOrder]);
  if (record.expiresAt !== null) flow.line(words.expiresAt, when(record.expiresAt));
  if (record.closedAt !== null) flow.line(words.closedAt, when(record.closedAt));
  flow.line(words.made, when(atom(now)));

  flow.heading(words.documents);
  for (const document of record.documents) {
    flow.line(words.name, document.documentName);
    flow.line(words.size, words.bytes(document.fileSize));
    flow.line('SHA-256', document.fileHash);
    flow.gap(5);
  }

  flow.heading(words.signers);
  for (const signer of record.signers) {
    const step = settlingStep(record.audit, signer);
    flow.line(words.name, `${signer.firstName} ${signer.lastName}`);
    flow.line(words.email, signer.email);
    flow.line(
      words.status,
      signer.signedAt !== null
        ? words.signedAt(when(signer.signedAt))
        : signer.declinedAt !== null
          ? words.declinedAt(when(signer.declinedAt))
          : words.notSigned,
    );
    if (signer.declineReason !== null) flow.line(words.reason, signer.declineReason);
    if (step !== undefined)
      flow.line(words.from, `${step.ip ?? words.unknownAddress}, ${step.userAgent ?? words.unknownAgent}`);
    flow.line(words.identification, identificationLine(speech, record.audit, signer));
    if (signer.signatureHash !== null) flow.line(words.signatureHash, signer.signatureHash);
    // Never the stored bytes: a PNG redrawn within the pixel budget, or nothing (docs/signing.md, "Signature images").
    const image = drawableSignature(signer.signature);
    if (image !== null) flow.image(image, 220, 70);
    else if (signer.signature !== null) flow.text(words.unreadableSignature);
    flow.gap(8);
  }

  flow.heading(words.auditTrail);
  for (const entry of record.audit) {
    flow.text(`${when(entry.at)}  ${words.actions[entry.action] ?? entry.action}`, { bold: true });
    flow.text(words.by(actorName(words, record, entry.actor), entry.ip, entry.detail));
    if (entry.method !== undefined) flow.text(words.method(words.methods[entry.method]));
    if (entry.disclosureHash !== undefined) flow.text(words.disclosureHash(entry.disclosureHash), { size: 8 });
    if (entry.userAgent !== null) flow.text(entry.userAgent, { size: 8 });
    flow.text(words.hash(entry.hash), { size: 8 });
    flow.gap(4);
  }
  flow.gap(6);
  flow.line(words.finalHash, record.audit.at(-1)?.hash ?? words.none);
  flow.line(words.chain, verifyTrail(record) ? words.verified : words.notVerified);
  // A classic cross-reference table: readers of any age, and pdftotext, take it.
  return Buffer.from(await pdf.save({ useXRefStream: false }));
}
