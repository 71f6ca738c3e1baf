import { PortalError } from '../errors.js';
import type { AgreementRecord, AgreementSignerRecord, AuditEntry, IdentificationMethod } from '../records.js';
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

const ACTIONS: Record<string, string> = {
  created: 'created',
  'link-issued': 'signing link issued',
  viewed: 'opened by the signer',
  signed: 'signed',
  declined: 'declined',
  expired: 'expired',
  reminder: 'reminder due',
  'identification-code-sent': 'identification code mailed',
  identified: 'signer identified',
  'identification-failed': 'wrong identification code',
  'identification-locked': 'signing link locked after wrong codes',
  consented: 'consented to sign electronically',
  voided: 'voided by the sender',
  'signer-corrected': "a signer's name or e-mail corrected by the sender",
  erased: "signers' personal data erased by the sender",
};

/** Who took a step, in words: a signer by name, the sender, or the portal itself. */
function actorName(record: AgreementRecord, actor: string): string {
  if (actor.startsWith('account:')) return `the sender (${actor})`;
  if (actor === 'system') return 'the portal';
  const signer = record.signers.find((one) => one.id === actor);
  return signer === undefined ? actor : `${signer.firstName} ${signer.lastName} (${actor})`;
}

/** The step that settled a signer, from the trail: their signature or their decline. */
const settlingStep = (audit: readonly AuditEntry[], signer: AgreementSignerRecord) =>
  audit.findLast((entry) => entry.signerId === signer.id && (entry.action === 'signed' || entry.action === 'declined'));

const METHODS: Record<IdentificationMethod, string> = {
  'email-code': 'a one-time code mailed to the signer',
  'access-code': 'an access code the sender gave the signer',
};

/** How and when the signer identified, from the trail: the last `identified` entry; else that none was asked. */
function identificationLine(audit: readonly AuditEntry[], signer: AgreementSignerRecord): string {
  const entry = audit.findLast((one) => one.action === 'identified' && one.signerId === signer.id);
  if (entry?.method !== undefined) return `by ${METHODS[entry.method]}, at ${entry.at}`;
  return signer.shouldIdentify ? 'required; not identified' : 'none required (the signing link alone)';
}

export async function certificatePdf(record: AgreementRecord, now: Date): Promise<Buffer> {
  if (record.status !== 'signed' && record.closedReason === null)
    throw new PortalError('AGREEMENT_STILL_OPEN', record.id, CERTIFICATE_LATER);
  const lib = await loadLibpdf();
  const pdf = lib.PDF.create();
  pdf.setTitle(printable(`Certificate of completion: ${record.name}`));
  pdf.setProducer('customer-portal');
  pdf.setCreator('customer-portal');
  pdf.setCreationDate(now);
  const flow = new Flow(pdf, lib);

  flow.text('Certificate of completion', { size: 20, bold: true });
  flow.gap(8);
  flow.line('Agreement', record.name);
  flow.line('Agreement id', record.id);
  flow.line('Outcome', record.status === 'signed' ? 'signed by every signer' : `closed, ${record.closedReason}`);
  flow.line('Sent by', record.signerName);
  // The sender's own signature, given when the agreement was made.
  const senderSignature = drawableSignature(record.signerSignature);
  if (senderSignature !== null) flow.image(senderSignature, 180, 50);
  flow.line("Sender's signature SHA-256", record.signerSignatureHash);
  flow.line('Created', record.createdAt);
  flow.line('Signing order', record.signingOrder);
  if (record.expiresAt !== null) flow.line('Expires at', record.expiresAt);
  if (record.closedAt !== null) flow.line('Closed at', record.closedAt);
  flow.line('Certificate made', atom(now));

  flow.heading('Documents');
  for (const document of record.documents) {
    flow.line('Name', document.documentName);
    flow.line('Size', `${document.fileSize} bytes`);
    flow.line('SHA-256', document.fileHash);
    flow.gap(5);
  }

  flow.heading('Signers');
  for (const signer of record.signers) {
    const step = settlingStep(record.audit, signer);
    flow.line('Name', `${signer.firstName} ${signer.lastName}`);
    flow.line('E-mail', signer.email);
    flow.line(
      'Status',
      signer.signedAt !== null
        ? `signed at ${signer.signedAt}`
        : signer.declinedAt !== null
          ? `declined at ${signer.declinedAt}`
          : 'not signed',
    );
    if (signer.declineReason !== null) flow.line('Reason given', signer.declineReason);
    if (step !== undefined)
      flow.line('From', `${step.ip ?? 'unknown address'}, ${step.userAgent ?? 'unknown user agent'}`);
    flow.line('Identification', identificationLine(record.audit, signer));
    if (signer.signatureHash !== null) flow.line('Signature SHA-256', signer.signatureHash);
    // Never the stored bytes: a PNG redrawn within the pixel budget, or nothing (docs/signing.md, "Signature images").
    const image = drawableSignature(signer.signature);
    if (image !== null) flow.image(image, 220, 70);
    else if (signer.signature !== null) flow.text('(the signature image could not be read; its hash is above)');
    flow.gap(8);
  }

  flow.heading('Audit trail');
  for (const entry of record.audit) {
    flow.text(`${entry.at}  ${ACTIONS[entry.action] ?? entry.action}`, { bold: true });
    flow.text(
      `by ${actorName(record, entry.actor)}${entry.ip === null ? '' : ` from ${entry.ip}`}${entry.detail === null ? '' : `: "${entry.detail}"`}`,
    );
    if (entry.method !== undefined) flow.text(`method ${METHODS[entry.method]}`);
    if (entry.disclosureHash !== undefined) flow.text(`disclosure SHA-256 ${entry.disclosureHash}`, { size: 8 });
    if (entry.userAgent !== null) flow.text(entry.userAgent, { size: 8 });
    flow.text(`hash ${entry.hash}`, { size: 8 });
    flow.gap(4);
  }
  flow.gap(6);
  flow.line('Final hash', record.audit.at(-1)?.hash ?? 'none');
  flow.line(
    'Chain',
    verifyTrail(record)
      ? 'verified: every entry links to the one before and hashes to what it says, and the last one to the agreement as stated here'
      : 'NOT verified: an entry, or the agreement it vouches for, was changed after it was written',
  );
  // A classic cross-reference table: readers of any age, and pdftotext, take it.
  return Buffer.from(await pdf.save({ useXRefStream: false }));
}
