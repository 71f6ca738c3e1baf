import type { IncomingHttpHeaders, IncomingMessage } from 'node:http';
import { Busboy, type BusboyConfig, type BusboyHeaders, type BusboyInstance } from '@fastify/busboy';
import { PortalError } from '../errors.js';
import { MAX_DOCUMENT_BYTES } from '../domain/inputs.js';

/**
 * The largest body a valid form can have: the documents, the largest signature, and room for the
 * short parts and the multipart framing. A `Content-Length` above it is refused before reading.
 */
export const MAX_FORM_BYTES = MAX_DOCUMENT_BYTES + 1.5 * 1024 * 1024;

/** A value a message quotes: as JSON, cut to its first 100 characters. */
const quoted = (value: string) => JSON.stringify(value.length > 100 ? value.slice(0, 100) + '…' : value);

/** A part's name as a refusal names it: quoted, or "without a name" when its Content-Disposition has none. */
export const partName = (name: string | undefined) => (name === undefined ? 'without a name' : quoted(name));

/**
 * What the headers alone decide, before a byte of the body is read: 415, 413, or a 400 for the
 * boundary. Every multipart route asks it.
 */
function checkHeaders(headers: IncomingHttpHeaders, route: string): void {
  const type = headers['content-type'] ?? '';
  if (!/^multipart\/form-data\s*(;|$)/i.test(type)) {
    throw new PortalError(
      'FORM_CONTENT_TYPE',
      route,
      type === '' ? 'a body without Content-Type' : quoted(type.split(';')[0]!.trim()),
    );
  }
  const encoding = headers['content-encoding'];
  if (encoding !== undefined && encoding.trim().toLowerCase() !== 'identity') {
    throw new PortalError('CONTENT_ENCODING_UNSUPPORTED', quoted(encoding));
  }
  const length = Number(headers['content-length']);
  if (length > MAX_FORM_BYTES) throw new PortalError('FORM_TOO_LARGE', MAX_FORM_BYTES, MAX_DOCUMENT_BYTES, length);
  const boundary = /;\s*boundary=(?:"([^"]*)"|([^;\s]*))/i.exec(type);
  const value = boundary?.[1] ?? boundary?.[2] ?? '';
  if (value.length < 1 || value.length > 70) {
    throw new PortalError('MULTIPART_BOUNDARY_INVALID');
  }
}

/**
 * One multipart body being read: the headers checked, busboy over the request, the body counted
 * when it is chunked, the client going away noticed. The first failure wins: reading stops,
 * `release` ends what the reader handed over (each file stream it gave a store), and once that
 * settles the result rejects. The body may then be partly unread; the dispatcher answers with
 * `Connection: close`.
 *
 * The reader attaches its own 'field' and 'file' listeners to `parser`, then calls `start`.
 */
export class MultipartReading<T> {
  readonly parser: BusboyInstance;
  readonly result: Promise<T>;
  /** The first failure, once there is one: events after it are ignored. */
  failure: unknown;
  private resolveResult!: (value: T) => void;
  private rejectResult!: (error: unknown) => void;
  private settled = false;
  private bodyBytes = 0;

  constructor(
    private readonly req: IncomingMessage,
    route: string,
    config: Omit<BusboyConfig, 'headers'>,
    private readonly release: (cause: Error) => Promise<unknown> | void,
  ) {
    checkHeaders(req.headers, route);
    try {
      this.parser = Busboy({ ...config, headers: req.headers as BusboyHeaders });
    } catch {
      throw new PortalError('MULTIPART_BOUNDARY_UNREADABLE');
    }
    this.result = new Promise<T>((resolve, reject) => {
      this.resolveResult = resolve;
      this.rejectResult = reject;
    });
    this.parser.on('error', () => this.fail(new PortalError('MULTIPART_MALFORMED')));
  }

  start(): void {
    // With a Content-Length (checked above), the HTTP parser already stops the body at that size;
    // only a chunked body needs counting, and a second 'data' listener costs on every chunk.
    if (this.req.headers['content-length'] === undefined) this.req.on('data', this.countBody);
    this.req.on('error', this.onRequestGone);
    this.req.on('close', this.onRequestClose);
    this.req.pipe(this.parser);
  }

  succeed(value: T): void {
    if (this.failure !== undefined || this.settled) return;
    this.detach();
    this.resolveResult(value);
  }

  readonly fail = (error: unknown): void => {
    if (this.failure !== undefined || this.settled) return;
    this.failure = error;
    this.detach();
    this.req.pause();
    const released = this.release(error instanceof Error ? error : new Error(String(error)));
    this.parser.destroy();
    if (released === undefined) return this.rejectResult(error);
    released.catch(() => {}).finally(() => this.rejectResult(error));
  };

  private readonly countBody = (chunk: Buffer): void => {
    this.bodyBytes += chunk.length;
    if (this.bodyBytes > MAX_FORM_BYTES)
      this.fail(new PortalError('FORM_TOO_LARGE', MAX_FORM_BYTES, MAX_DOCUMENT_BYTES));
  };

  private readonly onRequestGone = (): void => this.fail(new PortalError('REQUEST_ABORTED'));

  private readonly onRequestClose = (): void => {
    if (!this.req.complete) this.onRequestGone();
  };

  private detach(): void {
    this.settled = true;
    this.req.off('data', this.countBody);
    this.req.off('error', this.onRequestGone);
    this.req.off('close', this.onRequestClose);
    this.req.unpipe(this.parser);
  }
}
