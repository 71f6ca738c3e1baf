import { createHash } from 'node:crypto';
import { type Readable, Transform } from 'node:stream';
import { buffer } from 'node:stream/consumers';
import type * as v from 'valibot';
import { PortalError } from '../errors.js';
import { isId, newId } from '../shared/ids.js';
import { silentLogger, type Logger } from '../shared/logger.js';
import type { BlobStore, Storage } from '../ports.js';
import type * as answers from '../shapes/answers.js';
import {
  withoutImages,
  type Agreement,
  type AgreementEventData,
  type AgreementRecord,
  type AgreementSignerRecord,
  type DownloadLink,
  type SigningOrder,
} from '../records.js';
import { createAgreementChanges } from './agreement-changes.js';
import { type ClientInfo, NO_CLIENT, newPersonalKey, senderSignatureHash } from './audit-trail.js';
import {
  accountActor,
  correctSigner as correctStep,
  created,
  erasePersonalData as eraseStep,
  erasedData,
  isPastExpiry,
  sign as signStep,
  voidAgreement as voidStep,
} from './signing-rules.js';
import type { DownloadService } from './downloads.js';
import { signatureInput } from './signature-data.js';
import { atom } from '../shared/time.js';
import { safeDocumentName } from './document-name.js';
import {
  type FieldInput,
  MAX_DOCUMENT_BYTES,
  type SignerInput,
  checkAccountId,
  agreementIdOf,
  parseInput,
  signerCorrectionInput,
  voidInput,
} from './inputs.js';
import { certificateKey } from './certificates.js';
import { isPdf } from './completed-copy.js';
import { PdfBusy, PdfError, type PdfWork, createPdfWork } from './pdf-work.js';
import { newEvent } from './events.js';
import {
  createIdempotency,
  fingerprintOf,
  type IdempotentCreate,
  type IdempotentOutcome,
  type KeyClaim,
} from './idempotency.js';
import type { AgreementField, IdempotencyCompletion } from '../records.js';
import { documentOf, identificationOf } from '../records.js';

/**
 * What an agreement event carries, and what a list of agreements holds: the agreement without its
 * signature images (each up to 1 MiB), hashes kept; receivers fetch the images with
 * `GET /agreements/{agreementId}` when they need them.
 */
export const eventData: (agreement: Agreement | AgreementEventData) => AgreementEventData = withoutImages;

/** How many agreements a page holds when the caller does not say, and at most. */
const AGREEMENTS_PAGE = { default: 50, max: 100 };

/** What `agreements.list` takes: how many (1–100, default 50), and the `nextCursor` of the page before. */
export interface AgreementListInput {
  limit?: number;
  cursor?: string | null;
}

/** One page of agreements, newest first; `nextCursor` asks for the next page, `null` after the last. */
export interface AgreementPage {
  data: AgreementEventData[];
  nextCursor: string | null;
}

/** A document already written to the blob store under `id`, with what was measured on the way in. */
export interface StoredDocument {
  id: string;
  documentName: string;
  fileSize: number;
  fileHash: string;
}

/** Where a form reader puts each document's bytes as they arrive. */
export interface DocumentSink {
  /**
   * Streams `body` into the blob store under a new `agd_` id, hashing and counting on the way, with
   * backpressure reaching back to `body`. Resolves what was measured once the bytes are durably
   * stored; rejects when `body` errors, the store fails, or the documents of the form pass 5 MiB in
   * total (`DOCUMENTS_TOO_LARGE`). Whatever it stored, the agreement service removes on failure.
   */
  store(filename: string, body: Readable): Promise<StoredDocument>;
}

/**
 * Reads a form, putting its documents into `documents` as they arrive; resolves the complete form,
 * or rejects once every document stream it handed over has ended or been destroyed.
 */
export type FormReader = (documents: DocumentSink) => Promise<AgreementForm>;

/** A complete, validated `POST /agreements` form whose documents are durably stored. */
export interface AgreementForm {
  name: string;
  signerName: string;
  signerSignatureData: string;
  signers: SignerInput[];
  documents: StoredDocument[];
  /** `parallel` when the form leaves it out. */
  signingOrder?: SigningOrder;
  /** A date-time in the future, or none: the agreement never expires. */
  expiresAt?: string;
  /** The signers' language (BCP 47, canonical); English when the form leaves it out. */
  locale?: string;
  /** Where each signer's values are stamped, indexes checked against the form (pages not yet). */
  fields?: FieldInput[];
}

/** The answer of `POST /verify` (DESIGN §12). */
export interface Verification extends v.InferOutput<typeof answers.verification> {}

export interface SignInput {
  /** The signer's signature image as a data-URL (PNG, JPEG or WebP, at most 1 MiB). */
  signature: string;
}

/** Public shape: exactly the fields of the spec's Agreement, in its order. */
function agreementShape(record: AgreementRecord): Agreement {
  return {
    id: record.id,
    name: record.name,
    status: record.status,
    signerName: record.signerName,
    signerSignature: record.signerSignature,
    signerSignatureHash: record.signerSignatureHash,
    signers: record.signers.map(({ signingLinkId: _link, identity: _identity, ...signer }) => ({
      ...signer,
      identification: identificationOf({ ...signer, signingLinkId: _link, identity: _identity }),
    })),
    documents: record.documents.map(documentOf),
    createdAt: record.createdAt,
    signingOrder: record.signingOrder,
    expiresAt: record.expiresAt,
    closedAt: record.closedAt,
    closedReason: record.closedReason,
  };
}

export interface AgreementServiceDeps {
  storage: Storage;
  blobs: BlobStore;
  clock: () => Date;
  /** Called after events were stored, so a delivery worker can start on them at once. */
  notify?: () => void;
  logger?: Logger;
  /** Signs download links to the documents. */
  downloads: DownloadService;
  /** A reminder round every this many ms after creation (`agreements.reminderIntervalMs`); off when undefined. */
  reminderIntervalMs?: number;
  /** Told of each agreement a step signed or closed. */
  closed?: (record: AgreementRecord) => void;
  /** Told of each agreement whose personal data was erased, to replace what was made from it (the certificate). */
  erased?: (record: AgreementRecord) => Promise<void>;
  /** With a notifier: told once a step queued mail to signers (`agreement-completed`), to send it. */
  mail?: { queued: (record: AgreementRecord) => void };
  /** Told once a step signed an agreement: its completed copies are owed. */
  copies?: { owed: (record: AgreementRecord) => void };
  /** Counts the pages of the documents fields are placed on (a PDF worker of its own when left out). */
  pdf?: Pick<PdfWork, 'pageCount' | 'inspectSeal'>;
}

/** The rules for agreements: the record a form makes, the hashes, signing; routes and `portal.agreements` call these. */
export function createAgreementService(deps: AgreementServiceDeps) {
  const { storage, blobs, clock } = deps;
  const logger = deps.logger ?? silentLogger;
  const idempotency = createIdempotency({ storage, clock, logger });
  const pdf = deps.pdf ?? createPdfWork(undefined);
  const apply = createAgreementChanges({
    storage,
    notify: () => notify(),
    closed: deps.closed,
    mail: deps.mail,
    copies: deps.copies,
  });

  function notify(): void {
    try {
      deps.notify?.();
    } catch (error) {
      // The events are stored; a worker that missed this nudge finds them on its next tick.
      logger.warn({ err: String(error) }, 'agreement events stored, but notifying the worker failed');
    }
  }

  /**
   * The documents of one form: stored as they arrive, the 5 MiB total counted across them, and all
   * removed again by `discard` (once every store in progress has settled). With `keep: false` the
   * bytes are only measured and hashed, never stored: a replay needs the fingerprint, not the bytes.
   */
  function documentSink(options: { keep: boolean } = { keep: true }) {
    const stored: { id: string; done: Promise<unknown> }[] = [];
    let total = 0;
    return {
      store(filename: string, body: Readable): Promise<StoredDocument> {
        const id = options.keep ? newId('agd') : '';
        const hash = createHash('sha256');
        let size = 0;
        // A stream pipe, not an async generator: this runs once per chunk of every upload, and
        // pipe's backpressure costs no promise per chunk (hot path).
        const meter = new Transform({
          transform(chunk: Buffer, _encoding, callback) {
            size += chunk.length;
            total += chunk.length;
            if (total > MAX_DOCUMENT_BYTES) return callback(new PortalError('DOCUMENTS_TOO_LARGE', MAX_DOCUMENT_BYTES));
            hash.update(chunk);
            callback(null, chunk);
          },
        });
        // The store sees an error through its own read (a destroyed body makes `put` reject), but it
        // may not listen yet (a file store opens its temp file first): unheard, 'error' would crash.
        meter.on('error', () => {});
        body.on('error', (error) => meter.destroy(error));
        body.pipe(meter);
        const measured = () => ({
          id,
          documentName: safeDocumentName(filename),
          fileSize: size,
          fileHash: hash.digest('hex'),
        });
        if (!options.keep) return drained(meter).then(measured);
        const done = blobs.put(id, meter).then(measured);
        stored.push({ id, done });
        return done;
      },

      /** Removes every document stored; what cannot be removed now, the orphan sweep removes later. */
      async discard(): Promise<void> {
        await Promise.allSettled(stored.map((document) => document.done));
        const results = await Promise.allSettled(stored.map((document) => blobs.delete(document.id)));
        for (const result of results) {
          if (result.status === 'rejected')
            logger.warn({ err: String(result.reason) }, 'could not remove an agreement document');
        }
      },
    };
  }

  /**
   * The form's fields by document, each checked to lie on a page its document has: each document a
   * field names is read back and its pages counted in the PDF worker. A `400` names the field or the
   * document: a page past the last, a document that is not a PDF, or one no PDF reader can open.
   */
  async function fieldsOf(form: AgreementForm, signerIds: readonly string[]): Promise<AgreementField[][]> {
    const placed = form.documents.map((): AgreementField[] => []);
    const pages = new Map<number, number>();
    for (const [index, field] of (form.fields ?? []).entries()) {
      let count = pages.get(field.document);
      if (count === undefined) {
        count = await pageCountOf(field.document, form.documents[field.document]!, index);
        pages.set(field.document, count);
      }
      if (field.page > count) {
        throw new PortalError(
          'INPUT_INVALID',
          `fields[${index}].page`,
          `is ${field.page}, but documents[${field.document}] has ${count} page${count === 1 ? '' : 's'}.`,
        );
      }
      const { page, x, y, width, height, type } = field;
      placed[field.document]!.push({ signerId: signerIds[field.signer]!, page, x, y, width, height, type });
    }
    return placed;
  }

  async function pageCountOf(position: number, document: StoredDocument, fieldIndex: number): Promise<number> {
    const stream = await blobs.get(document.id);
    if (stream === null) throw new Error(`the bytes of ${document.id} are missing from the blob store`);
    const bytes = await buffer(stream);
    if (!isPdf(bytes)) {
      throw new PortalError(
        'INPUT_INVALID',
        `fields[${fieldIndex}].document`,
        `documents[${position}] is not a PDF (its bytes do not start with %PDF-); fields go on PDF documents only.`,
      );
    }
    try {
      return await pdf.pageCount(bytes);
    } catch (error) {
      if (error instanceof PdfBusy) throw new PortalError('PDF_BUSY');
      if (!(error instanceof PdfError)) throw error;
      throw new PortalError(
        'INPUT_INVALID',
        `documents[${position}]`,
        `is not a PDF that can be read (${error.message}), so no field can be placed on it.`,
      );
    }
  }

  /**
   * Reads the form and records the agreement with its `agreement-created` event; given `complete`,
   * the insert also completes an idempotency claim with what `complete` makes of the agreement.
   * Whatever fails, every document stored is removed before this rejects.
   */
  async function createFrom(
    accountId: string,
    readForm: FormReader,
    complete?: (agreement: Agreement, form: AgreementForm) => IdempotencyCompletion,
    client: ClientInfo = NO_CLIENT,
  ): Promise<Agreement> {
    const documents = documentSink();
    let form: AgreementForm;
    try {
      form = await readForm(documents);
    } catch (error) {
      await documents.discard();
      throw error;
    }
    const now = clock();
    const createdAt = atom(now);
    if (form.expiresAt !== undefined && Date.parse(form.expiresAt) <= now.getTime()) {
      await documents.discard();
      throw new PortalError('INPUT_INVALID', 'expiresAt', 'must be in the future.');
    }
    const signerIds = form.signers.map(() => newId('ags'));
    let fields: AgreementField[][];
    try {
      fields = await fieldsOf(form, signerIds);
    } catch (error) {
      await documents.discard();
      throw error;
    }
    const unaudited: AgreementRecord = {
      auditHead: null,
      id: newId('agr'),
      accountId,
      name: form.name,
      status: 'sent',
      signerName: form.signerName,
      signerSignature: form.signerSignatureData,
      signerSignatureHash: senderSignatureHash(form.signerSignatureData, createdAt),
      signers: form.signers.map(
        (signer, index): AgreementSignerRecord => ({
          id: signerIds[index]!,
          firstName: signer.firstName,
          lastName: signer.lastName,
          email: signer.email,
          shouldIdentify: signer.shouldIdentify,
          signature: null,
          signatureHash: null,
          signedAt: null,
          viewedAt: null,
          declinedAt: null,
          declineReason: null,
          signingLinkId: null,
          identity: null,
        }),
      ),
      documents: form.documents.map((document, index) => ({
        ...document,
        signedFileHash: null,
        signedFileKey: null,
        fields: fields[index]!,
      })),
      createdAt,
      signingOrder: form.signingOrder ?? 'parallel',
      // Read to the second, as every date-time the API answers.
      expiresAt: form.expiresAt === undefined ? null : atom(new Date(form.expiresAt)),
      closedAt: null,
      closedReason: null,
      audit: [],
      nextReminderAt:
        deps.reminderIntervalMs === undefined ? null : atom(new Date(now.getTime() + deps.reminderIntervalMs)),
      mail: [],
      completion: null,
      personalKey: newPersonalKey(),
      ...(form.locale === undefined ? {} : { locale: form.locale }),
    };
    const record = created(unaudited, now, client);
    const agreement = agreementShape(record);
    try {
      const events = [newEvent(accountId, 'agreement-created', eventData(agreement), now, record.id)];
      await storage.insertAgreement(record, events, complete?.(agreement, form));
    } catch (error) {
      await documents.discard();
      throw error;
    }
    notify();
    return agreement;
  }

  /** The agreement and one of its documents: 400 for a malformed id, 404 for either not in this account. */
  async function documentOfAccount(accountId: string, agreementId: string, documentId: string) {
    checkAccountId(accountId);
    agreementIdOf({ agreementId, documentId });
    const agreement = await storage.getAgreement(accountId, agreementId);
    if (agreement === null) throw new PortalError('AGREEMENT_NOT_FOUND', agreementId);
    const document = agreement.documents.find((candidate) => candidate.id === documentId);
    if (document === undefined) throw new PortalError('DOCUMENT_NOT_FOUND', documentId, agreementId);
    return { agreement, document };
  }

  return {
    /**
     * Creates an agreement from the form `readForm` reads, its documents streamed into the blob
     * store as they arrive, and records it with its `agreement-created` event. When the form fails
     * (a bad part, a limit, the client gone, the store failing) or the record cannot be stored,
     * every document stored is removed before this rejects.
     */
    async create(accountId: string, readForm: FormReader, client: ClientInfo = NO_CLIENT): Promise<Agreement> {
      checkAccountId(accountId);
      return createFrom(accountId, readForm, undefined, client);
    },

    /**
     * `create` under an `Idempotency-Key`. The key is claimed before the form is read, so that a
     * duplicate sent meanwhile gets a 409 at once; the form's fingerprint (its fields and each
     * document's SHA-256, not the multipart framing) is known once it is read, and is kept with
     * `request.answer` of the agreement in the insert. A retry of a completed request has its
     * documents hashed but not stored, and gets the first answer again (a 422 when the form differs).
     * The key of a request that failed is free again.
     */
    async createIdempotent(
      accountId: string,
      readForm: FormReader,
      request: IdempotentCreate<Agreement>,
      client: ClientInfo = NO_CLIENT,
    ): Promise<IdempotentOutcome> {
      checkAccountId(accountId);
      const start = await idempotency.begin(accountId, request.key, null);
      if (start.completed !== undefined) {
        const form = await readForm(documentSink({ keep: false }));
        return idempotency.replay(start.completed, formFingerprint(form));
      }
      const claim: KeyClaim = start.claim;
      let answer: IdempotentOutcome['answer'] | undefined;
      try {
        await createFrom(
          accountId,
          readForm,
          (agreement, form) => {
            answer = request.answer(agreement);
            return idempotency.completion(claim, formFingerprint(form), answer);
          },
          client,
        );
      } catch (error) {
        await idempotency.release(claim);
        throw error;
      }
      return { answer: answer!, replayed: false };
    },

    /** The agreement, or `null` when absent or of another account (a malformed id names none). */
    async get(accountId: string, id: string): Promise<Agreement | null> {
      checkAccountId(accountId);
      // An id not of our shape (a control character in it, say) names nothing: it never reaches the store.
      if (!isId('agr', id)) return null;
      const record = await storage.getAgreement(accountId, id);
      if (record === null) return null;
      const now = clock();
      if (!isPastExpiry(record, now)) return agreementShape(record);
      // Past its expiresAt and not yet closed by a tick: this read closes it (agreement-expired,
      // once, whichever reaches it first), and shows it closed.
      return agreementShape(
        await apply(accountId, id, now, (current) => ({ agreement: current, events: [] }), { reading: true }),
      );
    },

    /**
     * A page of the account's agreements, newest first, without signature images (as events carry
     * them). The cursor is the last agreement of the page before (opaque to callers): a page
     * starts right after it, so agreements created meanwhile never shift one page into the next.
     */
    async list(accountId: string, input: AgreementListInput = {}): Promise<AgreementPage> {
      checkAccountId(accountId);
      if (typeof input !== 'object' || input === null)
        throw new PortalError('INPUT_INVALID', 'list', 'give { limit?, cursor? }.');
      const limit = input.limit ?? AGREEMENTS_PAGE.default;
      if (!Number.isInteger(limit) || limit < 1 || limit > AGREEMENTS_PAGE.max) {
        throw new PortalError('INPUT_INVALID', 'limit', `must be a whole number from 1 to ${AGREEMENTS_PAGE.max}.`);
      }
      const cursor = input.cursor ?? undefined;
      const notACursor = () =>
        new PortalError(
          'INPUT_INVALID',
          'cursor',
          'is not one this list gave for this account; pass nextCursor as it came.',
        );
      if (cursor !== undefined && !isId('agr', cursor)) throw notACursor();
      // One more than asked: whether it comes back says if there is a next page.
      const summaries = await storage.listAgreements(accountId, { limit: limit + 1, after: cursor });
      if (summaries === null) throw notACursor();
      const data = summaries.slice(0, limit).map(eventData);
      return { data, nextCursor: summaries.length > limit ? data.at(-1)!.id : null };
    },

    /**
     * A link to one of the agreement's documents that serves for five minutes without
     * Authorization, under `baseUrl` (default: the `publicUrl` option). 400 for a malformed id, 404
     * for an agreement not in this account or a document that is not one of its.
     */
    async documentDownloadLink(
      accountId: string,
      agreementId: string,
      documentId: string,
      baseUrl?: string,
    ): Promise<DownloadLink> {
      await documentOfAccount(accountId, agreementId, documentId);
      const target = { kind: 'document', accountId, agreementId, id: documentId } as const;
      return deps.downloads.link(target, baseUrl, 'agreements.documentDownloadLink');
    },

    /**
     * A link to a document's completed copy (its signatures stamped in, sealed), served like the
     * document's own link. 409 until the agreement is signed and the copy made, and for a document
     * that is not a PDF (it has none).
     */
    async signedCopyLink(
      accountId: string,
      agreementId: string,
      documentId: string,
      baseUrl?: string,
    ): Promise<DownloadLink> {
      const { agreement, document } = await documentOfAccount(accountId, agreementId, documentId);
      if (agreement.status !== 'signed')
        throw new PortalError('SIGNED_COPY_NOT_READY', documentId, 'the agreement is not signed');
      if (document.signedFileKey === null) {
        const why =
          agreement.completion === null
            ? 'it is not a PDF, or the PDF could not be read'
            : 'it is being made; try again in a moment';
        throw new PortalError('SIGNED_COPY_NOT_READY', documentId, why);
      }
      return deps.downloads.link(
        { kind: 'signed', accountId, agreementId, id: documentId },
        baseUrl,
        'agreements.signedCopyLink',
      );
    },

    /**
     * What a PDF is (`POST /verify`): `intact` when its bytes are, to the byte, a completed copy this
     * account issued (its SHA-256 is a document's `signedFileHash`), naming the agreement and
     * document; `sealed`, `level` and `signedAt` from the PDF's own seal, checked against the bytes it
     * covers (`seal-check.ts`, in the PDF worker). A PDF no reader can open is not sealed; one that
     * is not a copy this account issued is read strictly, and is not sealed if it opens only repaired.
     */
    async verify(accountId: string, pdfBytes: Buffer): Promise<Verification> {
      checkAccountId(accountId);
      if (!isPdf(pdfBytes)) throw new PortalError('VERIFY_NOT_PDF');
      const hash = createHash('sha256').update(pdfBytes).digest('hex');
      const found = await storage.findSignedCopy(accountId, hash);
      const seal = await pdf.inspectSeal(pdfBytes, { repair: found !== null }).catch((error: unknown) => {
        if (error instanceof PdfBusy) throw new PortalError('PDF_BUSY');
        if (error instanceof PdfError) return { sealed: false, level: null, signedAt: null };
        throw error;
      });
      return {
        sealed: seal.sealed,
        intact: found !== null,
        level: seal.level,
        signedAt: seal.signedAt,
        agreementId: found?.agreementId ?? null,
        documentId: found?.documentId ?? null,
      };
    },

    /**
     * Removes an agreement (`DELETE /agreements/{agreementId}`): its record with its signers,
     * documents and trail first, then its bytes (each document, its completed copy, the
     * certificate). A crash between the two leaves bytes no record names, which the orphan sweep
     * removes; never a record whose bytes are gone. `false` when absent.
     */
    async delete(accountId: string, agreementId: string): Promise<boolean> {
      checkAccountId(accountId);
      agreementIdOf({ agreementId });
      const record = await storage.getAgreement(accountId, agreementId);
      if (record === null || !(await storage.deleteAgreement(accountId, agreementId))) return false;
      const keys = [
        ...record.documents.flatMap((document) =>
          document.signedFileKey === null ? [document.id] : [document.id, document.signedFileKey],
        ),
        certificateKey(agreementId),
      ];
      const results = await Promise.allSettled(keys.map((key) => blobs.delete(key)));
      for (const result of results) {
        if (result.status === 'rejected')
          logger.warn(
            { agreementId, err: String(result.reason) },
            'agreement removed; a blob of it is left to the orphan sweep',
          );
      }
      return true;
    },

    /**
     * The sender voids an open agreement (`POST /agreements/{agreementId}/void`): closed as
     * `voided`, every signing link revoked, `agreement-voided`, the reason in the trail, and with a
     * notifier each signer who had a link told. 409 once signed or closed.
     */
    async voidAgreement(
      accountId: string,
      agreementId: string,
      input: unknown,
      client: ClientInfo = NO_CLIENT,
    ): Promise<Agreement> {
      checkAccountId(accountId);
      agreementIdOf({ agreementId });
      const { reason } = parseInput(voidInput, input, 'the body');
      const now = clock();
      const mailing = deps.mail !== undefined;
      const updated = await apply(accountId, agreementId, now, (current) =>
        voidStep(current, reason, now, accountActor(accountId), client, mailing),
      );
      return agreementShape(updated);
    },

    /**
     * The sender corrects a signer's name or e-mail (`PATCH /agreements/{agreementId}/signers/{signerId}`)
     * while the agreement is open and the signer has not signed: their link is revoked and the
     * trail records which fields changed. 409 otherwise.
     */
    async correctSigner(
      accountId: string,
      agreementId: string,
      signerId: string,
      input: unknown,
      client: ClientInfo = NO_CLIENT,
    ): Promise<Agreement> {
      checkAccountId(accountId);
      agreementIdOf({ agreementId, signerId });
      const correction = parseInput(signerCorrectionInput, input, 'the body');
      const now = clock();
      const updated = await apply(accountId, agreementId, now, (current) =>
        correctStep(current, signerId, correction, now, accountActor(accountId), client),
      );
      return agreementShape(updated);
    },

    /**
     * Erases the signers' personal data from a signed or closed agreement
     * (`POST /agreements/{agreementId}/erase-personal-data`): names, e-mails, decline reasons, and
     * the trail's IPs, user agents and details become `"[erased]"` in the agreement, its stored
     * events and kept answers, in one atomic step; then the certificate is made again from it. The
     * trail keeps every hash and still verifies, ending with an `erased` entry. 409 while open.
     * Calling it again redoes what follows the step (a crash may have cut it) and changes nothing else.
     */
    async erasePersonalData(
      accountId: string,
      agreementId: string,
      client: ClientInfo = NO_CLIENT,
    ): Promise<Agreement> {
      checkAccountId(accountId);
      agreementIdOf({ agreementId });
      const now = clock();
      const erased = await storage.eraseAgreement(
        accountId,
        agreementId,
        (current) => eraseStep(current, now, accountActor(accountId), client),
        (data) => erasedData(data, agreementId),
      );
      if (erased === null) throw new PortalError('AGREEMENT_NOT_FOUND', agreementId);
      await deps.erased?.(erased);
      return agreementShape(erased);
    },

    /**
     * Records one signer's signature. The last signature makes the agreement `signed` and stores
     * `agreement-signed` in the same atomic update. 404 for an unknown agreement or signer, 409 for
     * a signer who already signed, 400 for a signature that is not an acceptable image.
     */
    async sign(
      accountId: string,
      agreementId: string,
      signerId: string,
      input: SignInput,
      client: ClientInfo = NO_CLIENT,
    ): Promise<Agreement> {
      checkAccountId(accountId);
      if (typeof input !== 'object' || input === null)
        throw new PortalError('INPUT_INVALID', 'sign', 'give { signature } as a data-URL.');
      const signature = parseInput(signatureInput, input.signature, 'sign.signature');
      agreementIdOf({ agreementId, signerId });
      const now = clock();
      const updated = await apply(accountId, agreementId, now, (current) =>
        signStep(current, signerId, signature, now, accountActor(accountId), client),
      );
      return agreementShape(updated);
    },
  };
}

/** What a form asks for, whatever its multipart framing: the fingerprint a retry must match. */
function formFingerprint(form: AgreementForm): string {
  return fingerprintOf('POST /agreements', {
    name: form.name,
    signerName: form.signerName,
    signerSignatureData: form.signerSignatureData,
    signers: form.signers.map(({ firstName, lastName, email, shouldIdentify }) => ({
      firstName,
      lastName,
      email,
      shouldIdentify,
    })),
    documents: form.documents.map(({ documentName, fileSize, fileHash }) => ({ documentName, fileSize, fileHash })),
    signingOrder: form.signingOrder ?? 'parallel',
    expiresAt: form.expiresAt ?? null,
    ...(form.locale === undefined ? {} : { locale: form.locale }),
  });
}

/** Resolves once `stream` has been read to its end, its bytes dropped; rejects with its error. */
function drained(stream: Readable): Promise<void> {
  return new Promise((resolve, reject) => {
    stream.on('end', resolve);
    stream.on('error', reject);
    stream.resume();
  });
}

export type AgreementService = ReturnType<typeof createAgreementService>;
/** What `portal.agreements` offers a host application. */
export type AgreementApi = Pick<
  AgreementService,
  | 'get'
  | 'list'
  | 'sign'
  | 'documentDownloadLink'
  | 'signedCopyLink'
  | 'verify'
  | 'voidAgreement'
  | 'correctSigner'
  | 'delete'
  | 'erasePersonalData'
>;
