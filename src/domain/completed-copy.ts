import { createHash } from 'node:crypto';
import type { PDF } from '@libpdf/core';
import type { AgreementDocumentRecord, AgreementField, AgreementRecord } from '../records.js';
import { atom } from '../shared/time.js';
import { anchoredFields, initialsOf, placeField, stampFields } from './pdf-fields.js';
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
 * What the completed copy of one document shows, taken from the signed agreement: plain data, so
 * that the copy can be made in a worker thread. Signatures are still the stored data URLs: they are
 * decoded where the copy is made, not where the agreement is read.
 */
export interface CopyPlan {
  agreement: { id: string; name: string; senderName: string };
  document: { name: string; fileHash: string };
  signers: {
    id: string;
    name: string;
    email: string;
    signedAt: string | null;
    identified: string | null;
    signature: string | null;
  }[];
  /** The fields the `fields` part placed on this document. */
  fields: AgreementField[];
  completedAt: string;
}

export function copyPlan(record: AgreementRecord, document: AgreementDocumentRecord, now: Date): CopyPlan {
  return {
    agreement: { id: record.id, name: record.name, senderName: record.signerName },
    document: { name: document.documentName, fileHash: document.fileHash },
    signers: record.signers.map((signer) => {
      const identified = record.audit.findLast(
        (entry) => entry.action === 'identified' && entry.signerId === signer.id,
      );
      return {
        id: signer.id,
        name: `${signer.firstName} ${signer.lastName}`,
        email: signer.email,
        signedAt: signer.signedAt,
        identified:
          identified?.method === undefined
            ? null
            : `${identified.method === 'email-code' ? 'by a code mailed to them' : 'by an access code'}, at ${identified.at}`,
        signature: signer.signature,
      };
    }),
    fields: document.fields,
    completedAt: atom(now),
  };
}

/**
 * The completed copy of one PDF document of a signed agreement, in an incremental update (the
 * original's bytes stay the copy's prefix, so the original's `fileHash` still checks against them):
 * each signer's values stamped into their fields, those of the `fields` part and those its text
 * anchors stand for, or, when it has none, a signature page appended. Then, with a sealing key, a
 * PAdES seal over the whole file in a second incremental update. Rejects for a PDF the library
 * cannot read or update; the caller reports that document's copy as failed.
 */
export async function completedCopy(original: Buffer, plan: CopyPlan, sealer: Sealer | null): Promise<CompletedCopy> {
  if (!isPdf(original)) throw new Error(`${plan.document.name} is not a PDF`);
  const lib = await loadLibpdf();
  const pdf = await lib.PDF.load(new Uint8Array(original));
  const placed = plan.fields.map((field) => placeField(pdf, field));
  // Anchors stand in for a fields part (DESIGN §12): a document with fields is not searched for them,
  // which spares reading the text of every page.
  const anchored =
    placed.length > 0
      ? { fields: [], anchors: [] }
      : anchoredFields(
          pdf,
          plan.signers.map((signer) => signer.id),
        );
  const fields = [...placed, ...anchored.fields];
  if (fields.length === 0 && anchored.anchors.length === 0) {
    signaturePage(pdf, lib, plan);
  } else {
    const values = new Map(
      plan.signers.map((signer) => [
        signer.id,
        {
          name: signer.name,
          date: signer.signedAt === null ? '' : new Date(signer.signedAt).toISOString().slice(0, 10),
          initials: initialsOf(signer.name),
          png: drawableSignature(signer.signature),
        },
      ]),
    );
    stampFields(pdf, lib, fields, anchored.anchors, values);
  }
  const stamped = await pdf.save({ incremental: true });
  if (!Buffer.from(stamped.buffer, stamped.byteOffset, original.length).equals(original)) {
    throw new Error(`${plan.document.name} could not be updated incrementally: its original bytes would not be kept`);
  }
  let sealed: Awaited<ReturnType<Sealer['seal']>> | null = null;
  try {
    sealed =
      sealer === null
        ? null
        : await sealer.seal(stamped, `Signed by every signer of ${plan.agreement.name}`, new Date(plan.completedAt));
  } catch (error) {
    throw new SealError(error);
  }
  const bytes = sealed?.bytes ?? Buffer.from(stamped);
  return {
    bytes,
    hash: createHash('sha256').update(bytes).digest('hex'),
    level: sealed?.level ?? null,
    degraded: sealed?.degraded ?? null,
  };
}

/** The page appended to a PDF with no field: who signed, when, how identified, and each signature. */
function signaturePage(pdf: PDF, lib: typeof import('@libpdf/core'), plan: CopyPlan): void {
  const flow = new Flow(pdf, lib);
  flow.text('Signatures', { size: 18, bold: true });
  flow.gap(6);
  flow.line('Agreement', `${plan.agreement.name} (${plan.agreement.id})`);
  flow.line('Document', plan.document.name);
  flow.line('SHA-256 of the document as sent', plan.document.fileHash);
  flow.line('Sent by', plan.agreement.senderName);
  for (const signer of plan.signers) {
    flow.heading(signer.name);
    flow.line('E-mail', signer.email);
    flow.line('Signed at', signer.signedAt ?? 'not signed');
    if (signer.identified !== null) flow.line('Identified', signer.identified);
    const image = drawableSignature(signer.signature);
    if (image !== null) flow.image(image, 220, 70);
  }
  flow.gap(8);
  flow.text(`Completed ${plan.completedAt}. The certificate of completion holds the audit trail.`, { size: 8 });
}
