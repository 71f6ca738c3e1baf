import type { IncomingMessage } from 'node:http';
import type { BusboyFileStream } from '@fastify/busboy';
import { PortalError } from '../errors.js';
import type { AgreementForm, DocumentSink, StoredDocument } from '../domain/agreements.js';
import {
  type FieldInput,
  MAX_DOCUMENTS,
  MAX_DOCUMENT_BYTES,
  MAX_FIELDS,
  MAX_SIGNERS,
  displayName,
  expiresAtInput,
  fieldInput,
  localeInput,
  parseInput,
  signatureInput,
  signerInput,
  signingOrderInput,
  type SignerInput,
} from '../domain/inputs.js';
import { SIGNATURE_MAX_LENGTH } from '../domain/signature-data.js';
import { MultipartReading, partName } from './multipart.js';

/** A JSON part of one signer, or of all five, is small; anything bigger is not a signer list. */
const MAX_SIGNERS_PART = 64 * 1024;
/** A hundred fields are some 10 KiB of JSON. */
const MAX_FIELDS_PART = 64 * 1024;

const TEXT_PARTS = new Set([
  'name',
  'signerName',
  'signerSignatureData',
  'signers',
  'signingOrder',
  'expiresAt',
  'locale',
  'fields',
]);
const DOCUMENT_PART = /^documents(?:\[\d{0,9}\]|\.items)?$/;
const PART_LIST =
  'name, signerName, signerSignatureData, signers, documents, signingOrder, expiresAt, locale and fields';

const tooLarge = () => new PortalError('DOCUMENTS_TOO_LARGE', MAX_DOCUMENT_BYTES);
const endedEarly = () => new PortalError('MULTIPART_MALFORMED');
const invalid = (where: string, problem: string) => new PortalError('INPUT_INVALID', where, problem);

/** Collects and checks the text parts as they arrive, so a bad one stops the upload before more bytes are stored. */
function createTextParts() {
  const seen = new Set<string>();
  const values: Record<string, string> = {};
  const signers: SignerInput[] = [];
  let signerParts = 0;
  let signerArray = false;
  let fields: FieldInput[] | undefined;

  /** The `fields` part: a JSON array of at most 100 fields, each checked on its own (the indexes once the form is whole). */
  function addFields(value: string, truncated: boolean): void {
    if (truncated || value.length > MAX_FIELDS_PART) throw invalid('fields', 'the part must be at most 64 KiB.');
    let parsed: unknown;
    try {
      parsed = JSON.parse(value);
    } catch {
      throw invalid('fields', 'is not valid JSON.');
    }
    if (!Array.isArray(parsed)) throw invalid('fields', 'must be a JSON array of fields.');
    if (parsed.length > MAX_FIELDS) throw invalid('fields', `must hold at most ${MAX_FIELDS} fields.`);
    fields = parsed.map((item, index) => parseInput(fieldInput, item, `fields[${index}]`));
  }

  /** Each field's signer and document must be among the form's. */
  function checkFieldIndexes(documentCount: number): void {
    for (const [index, field] of (fields ?? []).entries()) {
      if (field.signer >= signers.length) {
        throw invalid(
          `fields[${index}].signer`,
          `is ${field.signer}, but the form has ${signers.length} signer${signers.length === 1 ? '' : 's'} (indexes from 0).`,
        );
      }
      if (field.document >= documentCount) {
        throw invalid(
          `fields[${index}].document`,
          `is ${field.document}, but the form has ${documentCount} document${documentCount === 1 ? '' : 's'} (indexes from 0).`,
        );
      }
    }
  }

  function addSigners(value: string): void {
    if (value.length > MAX_SIGNERS_PART) throw invalid('signers', 'a part must be at most 64 KiB.');
    let parsed: unknown;
    try {
      parsed = JSON.parse(value);
    } catch {
      throw invalid('signers', `part ${signerParts + 1} is not valid JSON.`);
    }
    const isArray = Array.isArray(parsed);
    if (signerArray || (isArray && signerParts > 0)) {
      throw invalid('signers', 'send one part per signer or one part holding an array of signers, not both.');
    }
    signerArray = isArray;
    signerParts++;
    for (const item of isArray ? (parsed as unknown[]) : [parsed]) {
      if (signers.length === MAX_SIGNERS) throw new PortalError('SIGNERS_LIMIT', MAX_SIGNERS);
      const subject = `signers[${signers.length}]`;
      if (typeof item !== 'object' || item === null || Array.isArray(item))
        throw invalid(subject, 'must be a JSON object.');
      signers.push(parseInput(signerInput, item, subject));
    }
  }

  return {
    add(name: string, value: string, truncated: boolean): void {
      if (name === 'signers') return addSigners(value);
      if (seen.has(name)) throw invalid(name, 'was given more than once.');
      seen.add(name);
      if (name === 'fields') {
        addFields(value, truncated);
      } else if (name === 'signerSignatureData') {
        if (truncated) throw invalid('signerSignatureData', 'the image must be at most 1 MiB');
        values[name] = parseInput(signatureInput, value, name);
      } else if (name === 'signingOrder') {
        values[name] = parseInput(signingOrderInput, value, name);
      } else if (name === 'expiresAt') {
        values[name] = parseInput(expiresAtInput, value, name);
      } else if (name === 'locale') {
        values[name] = parseInput(localeInput, value, name);
      } else {
        values[name] = parseInput(displayName, value, name);
      }
    },

    /** The whole form once the body ended, or a 400 naming the first part missing. */
    complete(documents: StoredDocument[]): AgreementForm {
      for (const name of ['name', 'signerName', 'signerSignatureData']) {
        if (values[name] === undefined) throw new PortalError('INPUT_REQUIRED', name);
      }
      if (signers.length === 0) throw invalid('signers', 'at least one signer is required.');
      if (documents.length === 0) throw invalid('documents', 'at least one document is required.');
      checkFieldIndexes(documents.length);
      return {
        name: values.name!,
        signerName: values.signerName!,
        signerSignatureData: values.signerSignatureData!,
        signers,
        documents,
        ...(values.signingOrder === undefined
          ? {}
          : { signingOrder: values.signingOrder as 'parallel' | 'sequential' }),
        ...(values.expiresAt === undefined ? {} : { expiresAt: values.expiresAt }),
        ...(values.locale === undefined ? {} : { locale: values.locale }),
        ...(fields === undefined || fields.length === 0 ? {} : { fields }),
      };
    },
  };
}

/** Why a file part cannot be a document of this form, or `null` when it can be the next one. */
function documentPartProblem(
  name: string | undefined,
  filename: string | undefined,
  count: number,
): PortalError | null {
  if (name === undefined || !DOCUMENT_PART.test(name))
    return new PortalError('MULTIPART_UNKNOWN_PART', partName(name), PART_LIST);
  if (count === MAX_DOCUMENTS) return new PortalError('DOCUMENTS_LIMIT', MAX_DOCUMENTS);
  if (filename === undefined) return invalid(`documents[${count}]`, 'must be a file part with a filename.');
  return null;
}

/**
 * Reads a `POST /agreements` body as it arrives: the headers first (415, 413, the boundary), then
 * each part the moment it ends. Text parts are checked at once; each document streams into
 * `documents` with backpressure reaching back to the socket. Resolves once every document is
 * stored and the form is complete.
 *
 * On any failure (a bad part, a limit, a malformed or truncated body, the client going away, the
 * store failing) it stops reading, destroys every document stream it handed over (so each store
 * settles), then rejects: a `PortalError` for the client's mistakes, the store's own error
 * otherwise (see `MultipartReading`).
 */
export function readAgreementForm(req: IncomingMessage, documents: DocumentSink): Promise<AgreementForm> {
  const text = createTextParts();
  const parts: { stream: BusboyFileStream; stored: Promise<StoredDocument> }[] = [];
  const reading = new MultipartReading<AgreementForm>(
    req,
    'POST /agreements',
    {
      isPartAFile: (name) => !TEXT_PARTS.has(name ?? ''),
      limits: { fieldSize: SIGNATURE_MAX_LENGTH, fileSize: MAX_DOCUMENT_BYTES },
    },
    (cause) => {
      for (const part of parts) part.stream.destroy(cause);
      // Each store settles once its stream is destroyed; what they wrote the caller's discard removes.
      return Promise.allSettled(parts.map((part) => part.stored));
    },
  );
  const { parser, fail } = reading;

  parser.on('field', (name: string, value: string, _nameTruncated: boolean, valueTruncated: boolean) => {
    if (reading.failure !== undefined) return;
    try {
      text.add(name, value, valueTruncated);
    } catch (error) {
      fail(error);
    }
  });

  parser.on('file', (name: string | undefined, stream: BusboyFileStream, filename: string | undefined) => {
    // A file stream nobody reads stalls the parser; one nobody listens to crashes on a truncated body.
    stream.on('error', () => fail(endedEarly()));
    if (reading.failure !== undefined) return void stream.resume();
    const problem = documentPartProblem(name, filename, parts.length);
    if (problem !== null) {
      stream.resume();
      return fail(problem);
    }
    // busboy truncates silently at `fileSize`; its 'limit' event is the sign, and comes before the end.
    stream.once('limit', () => fail(tooLarge()));
    const stored = documents.store(filename!, stream);
    stored.catch(fail);
    parts.push({ stream, stored });
  });

  parser.on('finish', () => {
    if (reading.failure !== undefined) return;
    Promise.all(parts.map((part) => part.stored))
      .then((stored) => reading.failure === undefined && reading.succeed(text.complete(stored)))
      .catch(fail);
  });

  reading.start();
  return reading.result;
}
