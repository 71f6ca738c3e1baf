import type { IncomingHttpHeaders, IncomingMessage } from 'node:http';
import { Busboy, type BusboyFileStream, type BusboyHeaders, type BusboyInstance } from '@fastify/busboy';
import { PortalError } from '../errors.js';
import type { AgreementForm, DocumentSink, StoredDocument } from '../domain/agreements.js';
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

/**
 * What the headers alone decide, before a byte of the body is read: 415, 413, or a 400 for the
 * boundary. Every multipart route asks it.
 */
export function checkHeaders(headers: IncomingHttpHeaders, route = 'POST /agreements'): void {
  const type = headers['content-type'] ?? '';
  if (!/^multipart\/form-data\s*(;|$)/i.test(type)) {
    throw new PortalError('FORM_CONTENT_TYPE', route, type === '' ? 'a body without Content-Type' : quoted(type.split(';')[0]!.trim()));
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

/** Busboy over the request's headers: text parts buffered up to the largest valid signature, every other part a file. */
function openParser(headers: IncomingHttpHeaders): BusboyInstance {
  try {
    return Busboy({
      headers: headers as BusboyHeaders,
      isPartAFile: (name) => !TEXT_PARTS.has(name ?? ''),
      limits: { fieldSize: SIGNATURE_MAX_LENGTH, fileSize: MAX_DOCUMENT_BYTES },
    });
  } catch {
    throw new PortalError('MULTIPART_BOUNDARY_UNREADABLE');
  }
}

/** Why a file part cannot be a document of this form, or `null` when it can be the next one. */
function documentPartProblem(name: string, filename: string | undefined, count: number): PortalError | null {
  if (!DOCUMENT_PART.test(name)) return new PortalError('MULTIPART_UNKNOWN_PART', quoted(name), PART_LIST);
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
 * otherwise. The body may then be partly unread; the dispatcher answers with `Connection: close`.
 */
export function readAgreementForm(req: IncomingMessage, documents: DocumentSink): Promise<AgreementForm> {
  checkHeaders(req.headers);
  return new FormReading(req, openParser(req.headers), documents).result;
}

/** One form being read: the parser's events in, the form (or the first failure) out. */
class FormReading {
  readonly result: Promise<AgreementForm>;
  private resolve!: (form: AgreementForm) => void;
  private reject!: (error: unknown) => void;
  private readonly text = createTextParts();
  private readonly parts: { stream: BusboyFileStream; stored: Promise<StoredDocument> }[] = [];
  private bodyBytes = 0;
  private failure: unknown;
  private settled = false;

  constructor(
    private readonly req: IncomingMessage,
    private readonly busboy: BusboyInstance,
    private readonly documents: DocumentSink,
  ) {
    this.result = new Promise<AgreementForm>((resolve, reject) => {
      this.resolve = resolve;
      this.reject = reject;
    });
    busboy.on('field', this.onField);
    busboy.on('file', this.onFile);
    busboy.on('error', () => this.fail(endedEarly()));
    busboy.on('finish', this.onFinish);
    // With a Content-Length (checked above), the HTTP parser already stops the body at that size;
    // only a chunked body needs counting, and a second 'data' listener costs on every chunk.
    if (req.headers['content-length'] === undefined) req.on('data', this.countBody);
    req.on('error', this.onRequestGone);
    req.on('close', this.onRequestClose);
    req.pipe(busboy);
  }

  private readonly onField = (name: string, value: string, _nameTruncated: boolean, valueTruncated: boolean): void => {
    if (this.failure !== undefined) return;
    try {
      this.text.add(name, value, valueTruncated);
    } catch (error) {
      this.fail(error);
    }
  };

  private readonly onFile = (name: string, stream: BusboyFileStream, filename: string | undefined): void => {
    // A file stream nobody reads stalls the parser; one nobody listens to crashes on a truncated body.
    stream.on('error', () => this.fail(endedEarly()));
    if (this.failure !== undefined) return void stream.resume();
    const problem = documentPartProblem(name, filename, this.parts.length);
    if (problem !== null) {
      stream.resume();
      return this.fail(problem);
    }
    // busboy truncates silently at `fileSize`; its 'limit' event is the sign, and comes before the end.
    stream.once('limit', () => this.fail(tooLarge()));
    const stored = this.documents.store(filename!, stream);
    stored.catch((error) => this.fail(error));
    this.parts.push({ stream, stored });
  };

  private readonly onFinish = (): void => {
    if (this.failure !== undefined) return;
    Promise.all(this.parts.map((part) => part.stored))
      .then((stored) => {
        if (this.failure !== undefined) return;
        const form = this.text.complete(stored);
        this.detach();
        this.resolve(form);
      })
      .catch((error) => this.fail(error));
  };

  private readonly countBody = (chunk: Buffer): void => {
    this.bodyBytes += chunk.length;
    if (this.bodyBytes > MAX_FORM_BYTES) this.fail(bodyTooLarge());
  };

  private readonly onRequestGone = (): void => this.fail(new PortalError('REQUEST_ABORTED'));

  private readonly onRequestClose = (): void => {
    if (!this.req.complete) this.onRequestGone();
  };

  /** The first failure wins: stop reading, end every document stream, reject. */
  private fail(error: unknown): void {
    if (this.failure !== undefined || this.settled) return;
    this.failure = error;
    this.detach();
    this.req.pause();
    const cause = error instanceof Error ? error : new Error(String(error));
    for (const part of this.parts) part.stream.destroy(cause);
    this.busboy.destroy();
    this.reject(error);
  }

  private detach(): void {
    this.settled = true;
    this.req.off('data', this.countBody);
    this.req.off('error', this.onRequestGone);
    this.req.off('close', this.onRequestClose);
    this.req.unpipe(this.busboy);
  }
}
