import { createHash } from 'node:crypto';
import { PortalError } from '../errors.js';
import { newId } from '../shared/ids.js';
import { silentLogger, type Logger } from '../shared/logger.js';
import type { BlobStore, Storage } from '../ports.js';
import type { Agreement, AgreementRecord, AgreementSigner, EventRecord } from '../records.js';
import { signatureDataUrl } from './signature-data.js';
import { atom } from '../shared/time.js';
import { type SignerInput, accountId as accountIdSchema, parseInput } from './inputs.js';
import { newEvent } from './events.js';

/** A document already written to the blob store under `id`, with what was measured on the way in. */
export interface StoredDocument {
  id: string;
  documentName: string;
  fileSize: number;
  fileHash: string;
}

/** A complete, validated `POST /agreements` form whose documents are durably stored. */
export interface AgreementForm {
  name: string;
  signerName: string;
  signerSignatureData: string;
  signers: SignerInput[];
  documents: StoredDocument[];
}

export interface SignInput {
  /** The signer's signature image as a data-URL (PNG, JPEG or WebP, at most 1 MiB). */
  signature: string;
}

export const sha256Hex = (text: string) => createHash('sha256').update(text).digest('hex');

/** Public shape: exactly the fields of the spec's Agreement, in its order. */
function toAgreement(record: AgreementRecord): Agreement {
  return {
    id: record.id,
    name: record.name,
    status: record.status,
    signerName: record.signerName,
    signerSignature: record.signerSignature,
    signerSignatureHash: record.signerSignatureHash,
    signers: record.signers.map((signer) => ({ ...signer })),
    documents: record.documents.map((document) => ({ ...document })),
    createdAt: record.createdAt,
  };
}

export interface AgreementServiceDeps {
  storage: Storage;
  blobs: BlobStore;
  clock: () => Date;
  /** Called after events were stored, so a delivery worker can start on them at once. */
  notify?: () => void;
  logger?: Logger;
}

/** The rules for agreements: the record a form makes, the hashes, signing; routes and `portal.agreements` call these. */
export function createAgreementService(deps: AgreementServiceDeps) {
  const { storage, blobs, clock } = deps;
  const logger = deps.logger ?? silentLogger;

  function notify(): void {
    try {
      deps.notify?.();
    } catch (error) {
      // The events are stored; a worker that missed this nudge finds them on its next tick.
      logger.warn({ err: String(error) }, 'agreement events stored, but notifying the worker failed');
    }
  }

  /** Removes the documents' bytes; what cannot be removed now, the orphan sweep removes later. */
  async function discardDocuments(documents: readonly { id: string }[]): Promise<void> {
    const results = await Promise.allSettled(documents.map((document) => blobs.delete(document.id)));
    for (const result of results) {
      if (result.status === 'rejected') logger.warn({ err: String(result.reason) }, 'could not remove an agreement document');
    }
  }

  return {
    /**
     * Records an agreement from a form whose documents are already durably stored, together with
     * its `agreement-created` event. When the record cannot be stored, the documents are removed.
     */
    async create(accountId: string, form: AgreementForm): Promise<Agreement> {
      const now = clock();
      const createdAt = atom(now);
      const record: AgreementRecord = {
        id: newId('agr'),
        accountId,
        name: form.name,
        status: 'sent',
        signerName: form.signerName,
        signerSignature: form.signerSignatureData,
        signerSignatureHash: sha256Hex(form.signerSignatureData + '\n' + createdAt),
        signers: form.signers.map(
          (signer): AgreementSigner => ({
            id: newId('ags'),
            firstName: signer.firstName,
            lastName: signer.lastName,
            email: signer.email,
            shouldIdentify: signer.shouldIdentify,
            signature: null,
            signatureHash: null,
            signedAt: null,
          }),
        ),
        documents: form.documents.map((document) => ({ ...document })),
        createdAt,
      };
      const agreement = toAgreement(record);
      try {
        await storage.insertAgreement(record, [newEvent(accountId, 'agreement-created', agreement, now)]);
      } catch (error) {
        await discardDocuments(form.documents);
        throw error;
      }
      notify();
      return agreement;
    },

    /** The agreement, or `null` when absent or of another account. */
    async get(accountId: string, id: string): Promise<Agreement | null> {
      const record = await storage.getAgreement(accountId, id);
      return record && toAgreement(record);
    },

    /**
     * Records one signer's signature. The last signature makes the agreement `signed` and stores
     * `agreement-signed` in the same atomic update. 404 for an unknown agreement or signer, 409 for
     * a signer who already signed, 400 for a signature that is not an acceptable image.
     */
    async sign(accountId: string, agreementId: string, signerId: string, input: SignInput): Promise<Agreement> {
      parseInput(accountIdSchema, accountId, 'accountId');
      if (typeof input !== 'object' || input === null) throw new PortalError('INPUT_INVALID', 'sign', 'give { signature } as a data-URL.');
      const signature = parseInput(signatureDataUrl, input.signature, 'signature');
      const now = clock();
      let events: EventRecord[] = [];
      const updated = await storage.updateAgreement(accountId, agreementId, (current) => {
        const signer = current.signers.find((candidate) => candidate.id === signerId);
        if (signer === undefined) throw new PortalError('SIGNER_NOT_FOUND', signerId, agreementId);
        if (signer.signedAt !== null) throw new PortalError('SIGNER_ALREADY_SIGNED', signerId, agreementId);
        const signers = current.signers.map((candidate) =>
          candidate.id === signerId
            ? { ...candidate, signature, signatureHash: sha256Hex(signature), signedAt: atom(now) }
            : candidate,
        );
        const allSigned = signers.every((candidate) => candidate.signedAt !== null);
        const agreement: AgreementRecord = { ...current, signers, status: allSigned ? 'signed' : current.status };
        events = allSigned ? [newEvent(accountId, 'agreement-signed', toAgreement(agreement), now)] : [];
        return { agreement, events };
      });
      if (updated === null) throw new PortalError('AGREEMENT_NOT_FOUND', agreementId);
      if (events.length > 0) notify();
      return toAgreement(updated);
    },
  };
}

export type AgreementService = ReturnType<typeof createAgreementService>;
/** What `portal.agreements` offers a host application. */
export type AgreementApi = Pick<AgreementService, 'get' | 'sign'>;
