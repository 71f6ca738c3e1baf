import { createHash } from 'node:crypto';
import type { IncomingHttpHeaders, IncomingMessage } from 'node:http';
import { Transform } from 'node:stream';
import { Busboy, type BusboyFileStream, type BusboyHeaders, type BusboyInstance } from '@fastify/busboy';
import { safeDocumentName } from '../domain/document-name.js';
import { PortalError } from '../errors.js';
import { newId } from '../shared/ids.js';
import type { BlobStore } from '../ports.js';
import type { AgreementForm, StoredDocument } from '../domain/agreements.js';
import {
  MAX_DOCUMENTS,
  MAX_DOCUMENT_BYTES,
  MAX_SIGNERS,
  displayName,
  parseInput,
  signatureDataUrl,
  signerInput,
  type SignerInput,
} from '../domain/inputs.js';
import { SIGNATURE_MAX_LENGTH } from '../domain/signature-data.js';

/** A JSON part of one signer, or of all five, is small; anything bigger is not a signer list. */
const MAX_SIGNERS_PART = 64 * 1024;
/**
 * The largest body a valid form can have: the documents, the largest signature, and room for the
 * short parts and the multipart framing. A `Content-Length` above it is refused before reading.
 */
export const MAX_FORM_BYTES = MAX_DOCUMENT_BYTES + 1.5 * 1024 * 1024;

const TEXT_PARTS = new Set(['name', 'signerName', 'signerSignatureData', 'signers']);
const DOCUMENT_PART = /^documents(?:\[\d{0,9}\]|\.items)?$/;
const PART_LIST = 'name, signerName, signerSignatureData, signers and documents';

const tooLarge = () => new PortalError('DOCUMENTS_TOO_LARGE', MAX_DOCUMENT_BYTES);
const bodyTooLarge = (length?: number) => new PortalError('FORM_TOO_LARGE', MAX_FORM_BYTES, MAX_DOCUMENT_BYTES, length);
const endedEarly = () => new PortalError('MULTIPART_MALFORMED');
const invalid = (where: string, problem: string) => new PortalError('INPUT_INVALID', where, problem);
const quoted = (name: string) => JSON.stringify(name.length > 100 ? name.slice(0, 100) + '…' : name);

/** What the headers alone decide, before a byte of the body is read: 415, 413, or a 400 for the boundary. */
function checkHeaders(headers: IncomingHttpHeaders): void {
  const type = headers['content-type'] ?? '';
  if (!/^multipart\/form-data\s*(;|$)/i.test(type)) {
    throw new PortalError('FORM_CONTENT_TYPE', 'POST /agreements', type === '' ? 'a body without Content-Type' : quoted(type.split(';')[0]!.trim()));
  }
  const encoding = headers['content-encoding'];
  if (encoding !== undefined && encoding.trim().toLowerCase() !== 'identity') {
    throw new PortalError('CONTENT_ENCODING_UNSUPPORTED', quoted(encoding));
  }
  const length = Number(headers['content-length']);
  if (length > MAX_FORM_BYTES) throw bodyTooLarge(length);
  const boundary = /;\s*boundary=(?:"([^"]*)"|([^;\s]*))/i.exec(type);
  const value = boundary?.[1] ?? boundary?.[2] ?? '';
  if (value.length < 1 || value.length > 70) {
    throw new PortalError('MULTIPART_BOUNDARY_INVALID');
  }
}

/** Collects and checks the text parts as they arrive, so a bad one stops the upload before more bytes are stored. */
function createTextParts() {
  const seen = new Set<string>();
  const values: Record<string, string> = {};
  const signers: SignerInput[] = [];
  let signerParts = 0;
  let signerArray = false;

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
      if (typeof item !== 'object' || item === null || Array.isArray(item)) throw invalid(subject, 'must be a JSON object.');
      signers.push(parseInput(signerInput, item, subject));
    }
  }

  return {
    add(name: string, value: string, truncated: boolean): void {
      if (name === 'signers') return addSigners(value);
      if (seen.has(name)) throw invalid(name, 'was given more than once.');
      seen.add(name);
      if (name === 'signerSignatureData') {
        if (truncated) throw invalid('signerSignatureData', 'the image must be at most 1 MiB');
        values[name] = parseInput(signatureDataUrl, value, name);
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
      return {
        name: values.name!,
        signerName: values.signerName!,
        signerSignatureData: values.signerSignatureData!,
        signers,
        documents,
      };
    },
  };
}

/**
 * Reads a `POST /agreements` body as it arrives. Text parts are checked the moment they end; each
 * document is hashed and streamed into `blobs` under a new `agd_` id, with backpressure reaching
 * back to the socket. Resolves once every document is durably stored and the form is complete.
 *
 * On any failure (a bad part, a limit, a malformed or truncated body, the client going away, the
 * blob store failing) it stops reading, removes every blob it wrote, then rejects: an `HttpError`
 * for the client's mistakes, the adapter's own error otherwise. The body may then be partly
 * unread; the caller answers with `Connection: close`.
 */
export async function readAgreementForm(req: IncomingMessage, blobs: BlobStore): Promise<AgreementForm> {
  checkHeaders(req.headers);
  let busboy: BusboyInstance;
  try {
    busboy = Busboy({
      headers: req.headers as BusboyHeaders,
      // Text parts are buffered up to the largest valid signature; every other part streams as a file.
      isPartAFile: (name) => !TEXT_PARTS.has(name ?? ''),
      limits: { fieldSize: SIGNATURE_MAX_LENGTH, fileSize: MAX_DOCUMENT_BYTES },
    });
  } catch {
    throw new PortalError('MULTIPART_BOUNDARY_UNREADABLE');
  }

  const text = createTextParts();
  const documents: { id: string; stream: BusboyFileStream; meter: Transform; stored: Promise<StoredDocument> }[] = [];
  let documentBytes = 0;
  let bodyBytes = 0;
  let failure: unknown;
  let settled = false;

  return new Promise<AgreementForm>((resolve, reject) => {
    function detach(): void {
      settled = true;
      req.off('data', countBody);
      req.off('error', onRequestGone);
      req.off('close', onRequestClose);
      req.unpipe(busboy);
    }

    function fail(error: unknown): void {
      if (failure !== undefined || settled) return;
      failure = error;
      detach();
      req.pause();
      const cause = error instanceof Error ? error : new Error(String(error));
      for (const document of documents) {
        document.stream.destroy(cause);
        document.meter.destroy(cause);
      }
      busboy.destroy();
      void (async () => {
        await Promise.allSettled(documents.map((document) => document.stored));
        await Promise.allSettled(documents.map((document) => blobs.delete(document.id)));
        reject(error);
      })();
    }

    function countBody(chunk: Buffer): void {
      bodyBytes += chunk.length;
      if (bodyBytes > MAX_FORM_BYTES) fail(bodyTooLarge());
    }
    function onRequestGone(): void {
      fail(new PortalError('REQUEST_ABORTED'));
    }
    function onRequestClose(): void {
      if (!req.complete) onRequestGone();
    }

    busboy.on('field', (name, value, _nameTruncated, valueTruncated) => {
      if (failure !== undefined) return;
      try {
        text.add(name, value, valueTruncated);
      } catch (error) {
        fail(error);
      }
    });

    busboy.on('file', (name, stream, filename) => {
      // A file stream nobody reads stalls the parser; one nobody listens to crashes on a truncated body.
      stream.on('error', () => {});
      if (failure !== undefined) return void stream.resume();
      const problem = !DOCUMENT_PART.test(name)
        ? new PortalError('MULTIPART_UNKNOWN_PART', quoted(name), PART_LIST)
        : documents.length === MAX_DOCUMENTS
          ? new PortalError('DOCUMENTS_LIMIT', MAX_DOCUMENTS)
          : filename === undefined
            ? invalid(`documents[${documents.length}]`, 'must be a file part with a filename.')
            : null;
      if (problem !== null) {
        stream.resume();
        return fail(problem);
      }
      const id = newId('agd');
      const hash = createHash('sha256');
      let size = 0;
      // busboy truncates silently at `fileSize`; its 'limit' event and `truncated` are the only signs.
      stream.once('limit', () => fail(tooLarge()));
      // Hashes and counts on the way to the store. A stream pipe, not an async generator: this runs
      // once per chunk of every upload, and pipe's backpressure costs no promise per chunk.
      const meter = new Transform({
        transform(chunk: Buffer, _encoding, callback) {
          size += chunk.length;
          documentBytes += chunk.length;
          if (documentBytes > MAX_DOCUMENT_BYTES) return callback(tooLarge());
          hash.update(chunk);
          callback(null, chunk);
        },
        flush(callback) {
          callback(stream.truncated ? tooLarge() : null);
        },
      });
      // The store sees an error through its own read (a destroyed body makes `put` reject), but it
      // may not listen yet (a file store opens its temp file first): unheard, 'error' would crash.
      meter.on('error', () => {});
      stream.on('error', (error) => meter.destroy(error instanceof PortalError || failure !== undefined ? error : endedEarly()));
      stream.pipe(meter);
      const stored = blobs
        .put(id, meter)
        .then(() => ({ id, documentName: safeDocumentName(filename), fileSize: size, fileHash: hash.digest('hex') }));
      stored.catch(fail);
      documents.push({ id, stream, meter, stored });
    });

    busboy.on('error', () => fail(endedEarly()));
    busboy.on('finish', () => {
      if (failure !== undefined) return;
      Promise.all(documents.map((document) => document.stored))
        .then((stored) => {
          if (failure !== undefined) return;
          const form = text.complete(stored);
          detach();
          resolve(form);
        })
        .catch(fail);
    });

    // With a Content-Length (checked above), the HTTP parser already stops the body at that size;
    // only a chunked body needs counting, and a second 'data' listener costs on every chunk.
    if (req.headers['content-length'] === undefined) req.on('data', countBody);
    req.on('error', onRequestGone);
    req.on('close', onRequestClose);
    req.pipe(busboy);
  });
}
