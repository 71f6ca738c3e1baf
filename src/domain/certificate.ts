import { PortalError } from '../errors.js';
import type { AgreementRecord, AgreementSignerRecord, AuditEntry } from '../records.js';
import { atom } from '../shared/time.js';
import { verifyTrail } from './audit-trail.js';
import { drawableSignature } from './signature-data.js';

/**
 * The certificate of completion of an agreement that is signed or closed: a PDF (pdfkit) that
 * states the agreement, each document's name, size and SHA-256, each signer with their e-mail,
 * their step (time, IP), their signature image, and the whole audit trail with its final hash.
 * Everything in it is read from the stored agreement; nothing is signed here.
 */

const ACTIONS: Record<string, string> = {
  created: 'created',
  'link-issued': 'signing link issued',
  viewed: 'opened by the signer',
  signed: 'signed',
  declined: 'declined',
  expired: 'expired',
  reminder: 'reminder due',
};

/** The standard PDF fonts encode Windows-1252 only: another character is shown as `?` (the trail's JSON keeps it exact). */
const printable = (text: string) => text.replace(/[^\x20-\x7e\u00a0-\u00ff\u20ac\u2013\u2014\u2018\u2019\u201c\u201d\u2022\u2026]/g, '?');

/** The step that settled a signer, from the trail: their signature or their decline. */
const settlingStep = (audit: readonly AuditEntry[], signer: AgreementSignerRecord) =>
  audit.findLast((entry) => entry.signerId === signer.id && (entry.action === 'signed' || entry.action === 'declined'));

/**
 * pdfkit, loaded with the first certificate: its fonts and tables are some 6 MiB of heap that every
 * collection of a portal that never makes one would otherwise mark again (bench rows "POST
 * /v1/agreements, 5 × 1 MiB" and "5 MiB download"; docs/performance.md, "The portal's heap").
 */
let pdfkit: ReturnType<typeof loadPdfkit> | undefined;
const loadPdfkit = () => import('pdfkit');

export async function certificatePdf(record: AgreementRecord, now: Date): Promise<Buffer> {
  if (record.status !== 'signed' && record.closedReason === null) throw new PortalError('AGREEMENT_STILL_OPEN', record.id);
  pdfkit ??= loadPdfkit();
  const { default: PDFDocument } = await pdfkit;
  const doc = new PDFDocument({
    size: 'A4',
    margin: 50,
    info: { Title: printable(`Certificate of completion: ${record.name}`), Producer: 'customer-portal', Creator: 'customer-portal', CreationDate: now },
  });
  const chunks: Buffer[] = [];
  doc.on('data', (chunk: Buffer) => chunks.push(chunk));
  const ended = new Promise<void>((resolve, reject) => {
    doc.on('end', resolve);
    doc.on('error', reject);
  });

  const heading = (text: string) => doc.moveDown(0.8).font('Helvetica-Bold').fontSize(13).text(text).font('Helvetica').fontSize(10).moveDown(0.3);
  const line = (label: string, value: string) => doc.font('Helvetica-Bold').text(`${label}: `, { continued: true }).font('Helvetica').text(printable(value));

  doc.font('Helvetica-Bold').fontSize(20).text('Certificate of completion');
  doc.font('Helvetica').fontSize(10).moveDown(0.5);
  line('Agreement', record.name);
  line('Agreement id', record.id);
  line('Outcome', record.status === 'signed' ? 'signed by every signer' : `closed, ${record.closedReason}`);
  line('Sent by', record.signerName);
  line('Created', record.createdAt);
  line('Signing order', record.signingOrder);
  if (record.expiresAt !== null) line('Expires at', record.expiresAt);
  if (record.closedAt !== null) line('Closed at', record.closedAt);
  line('Certificate made', atom(now));

  heading('Documents');
  for (const document of record.documents) {
    line('Name', document.documentName);
    line('Size', `${document.fileSize} bytes`);
    line('SHA-256', document.fileHash);
    doc.moveDown(0.4);
  }

  heading('Signers');
  for (const signer of record.signers) {
    const step = settlingStep(record.audit, signer);
    line('Name', `${signer.firstName} ${signer.lastName}`);
    line('E-mail', signer.email);
    line('Status', signer.signedAt !== null ? `signed at ${signer.signedAt}` : signer.declinedAt !== null ? `declined at ${signer.declinedAt}` : 'not signed');
    if (signer.declineReason !== null) line('Reason given', signer.declineReason);
    if (step !== undefined) line('From', `${step.ip ?? 'unknown address'}, ${step.userAgent ?? 'unknown user agent'}`);
    if (signer.signatureHash !== null) line('Signature SHA-256', signer.signatureHash);
    // Never the stored bytes: a PNG redrawn within the pixel budget, or nothing (docs/signing.md, "Signature images").
    const image = drawableSignature(signer.signature);
    if (image !== null) doc.image(image, { fit: [220, 70] });
    else if (signer.signature !== null) doc.text('(the signature image could not be read; its hash is above)');
    doc.moveDown(0.6);
  }

  heading('Audit trail');
  for (const entry of record.audit) {
    doc.font('Helvetica-Bold').text(`${entry.at}  ${ACTIONS[entry.action] ?? entry.action}`, { continued: true });
    doc
      .font('Helvetica')
      .text(printable(`  by ${entry.actor}${entry.ip === null ? '' : ` from ${entry.ip}`}${entry.detail === null ? '' : `: "${entry.detail}"`}`));
    if (entry.userAgent !== null) doc.fontSize(8).text(printable(entry.userAgent)).fontSize(10);
    doc.fontSize(8).text(`hash ${entry.hash}`).fontSize(10).moveDown(0.3);
  }
  doc.moveDown(0.5);
  line('Final hash', record.audit.at(-1)?.hash ?? 'none');
  line(
    'Chain',
    verifyTrail(record)
      ? 'verified: every entry links to the one before and hashes to what it says, and the last one to the agreement as stated here'
      : 'NOT verified: an entry, or the agreement it vouches for, was changed after it was written',
  );
  doc.end();
  await ended;
  return Buffer.concat(chunks);
}
