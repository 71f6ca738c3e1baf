import { createHash } from 'node:crypto';
import type { AgreementDocument, AgreementRecord } from '../records.js';
import { atom } from '../shared/time.js';
import { Flow, loadLibpdf } from './pdf-layout.js';
import type { SealLevel, Sealer } from './sealing.js';
import { drawableSignature } from './signature-data.js';

/** Whether a document's bytes are a PDF: they start with `%PDF-` (DESIGN §12). */
export const isPdf = (head: Buffer) => head.subarray(0, 5).toString('latin1') === '%PDF-';

/** The file name a completed copy is served and attached under: `lease.pdf` → `lease-signed.pdf`. */
export const signedName = (documentName: string) => `${documentName.replace(/\.pdf$/i, '')}-signed.pdf`;

/** The sealing key failed (a key store down, a KMS refusing): the copy is tried again, unlike a PDF that cannot be read. */
export class SealError extends Error {
  constructor(cause: unknown) {
    super(`the sealing key failed: ${cause instanceof Error ? cause.message : String(cause)}`, { cause });
  }
}

export interface CompletedCopy {
  bytes: Buffer;
  /** SHA-256 (hex) of `bytes`: the document's `signedFileHash`. */
  hash: string;
  /** The seal's PAdES level, or `null` when the portal has no sealing key. */
  level: SealLevel | null;
  /** Why the seal has no timestamp though an authority is set; `null` otherwise. */
  degraded: string | null;
}

/**
 * The completed copy of one PDF document of a signed agreement: a signature page appended by an
 * incremental update (the original's bytes stay the copy's prefix, so the original's `fileHash`
 * still checks against them), then, with a sealing key, a PAdES seal over the whole file in a
 * second incremental update. Rejects for a PDF the library cannot read or update; the caller
 * reports that document's copy as failed.
 */
export async function completedCopy(
  original: Buffer,
  record: AgreementRecord,
  document: AgreementDocument,
  sealer: Sealer | null,
  now: Date,
): Promise<CompletedCopy> {
  if (!isPdf(original)) throw new Error(`${document.documentName} is not a PDF`);
  const lib = await loadLibpdf();
  const pdf = await lib.PDF.load(new Uint8Array(original));
  const flow = new Flow(pdf, lib);
  flow.text('Signatures', { size: 18, bold: true });
  flow.gap(6);
  flow.line('Agreement', `${record.name} (${record.id})`);
  flow.line('Document', document.documentName);
  flow.line('SHA-256 of the document as sent', document.fileHash);
  flow.line('Sent by', record.signerName);
  for (const signer of record.signers) {
    flow.heading(`${signer.firstName} ${signer.lastName}`);
    flow.line('E-mail', signer.email);
    flow.line('Signed at', signer.signedAt ?? 'not signed');
    const identified = record.audit.findLast((entry) => entry.action === 'identified' && entry.signerId === signer.id);
    if (identified?.method !== undefined)
      flow.line('Identified', `${identified.method === 'email-code' ? 'by a code mailed to them' : 'by an access code'}, at ${identified.at}`);
    const image = drawableSignature(signer.signature);
    if (image !== null) flow.image(image, 220, 70);
  }
  flow.gap(8);
  flow.text(`Completed ${atom(now)}. The certificate of completion holds the audit trail.`, { size: 8 });
  const stamped = await pdf.save({ incremental: true });
  if (!Buffer.from(stamped.buffer, stamped.byteOffset, original.length).equals(original)) {
    throw new Error(`${document.documentName} could not be updated incrementally: its original bytes would not be kept`);
  }
  let sealed: Awaited<ReturnType<Sealer['seal']>> | null = null;
  try {
    sealed = sealer === null ? null : await sealer.seal(stamped, `Signed by every signer of ${record.name}`, now);
  } catch (error) {
    throw new SealError(error);
  }
  const bytes = sealed?.bytes ?? Buffer.from(stamped);
  return { bytes, hash: createHash('sha256').update(bytes).digest('hex'), level: sealed?.level ?? null, degraded: sealed?.degraded ?? null };
}
