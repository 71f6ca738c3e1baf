/**
 * The answer to one HTTP/1.1 request, read from the bytes a connection delivers (RFC 9112): the
 * status line and header fields, then the body's framing, which says where the answer ends and so
 * whether the connection can carry the next request. A webhook call keeps the status and headers
 * and drops the body, so the body is only counted.
 */

/** Status line and header fields together, at most (Node's own default limit). */
export const MAX_HEAD_BYTES = 16 * 1024;
/** A chunk-size line, extensions included, at most. */
const MAX_CHUNK_LINE_BYTES = 1024;

const STATUS_LINE = /^HTTP\/1\.([01]) (\d{3})(?: [^\r\n]*)?$/;
/** A field name (an RFC 9110 token). */
export const HTTP_TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
const CHUNK_SIZE = /^([0-9A-Fa-f]{1,12})[ \t]*(?:;.*)?$/;

export type Headers = Record<string, string | string[]>;

/** What `push` found: more bytes needed, the answer complete (maybe with bytes past it), or an error. */
export type Progress =
  | { state: 'more' }
  | { state: 'done'; reusable: boolean }
  | { state: 'error'; message: string };

type Stage =
  | { name: 'head'; text: string }
  | { name: 'length'; left: number }
  | { name: 'chunk-size'; line: string }
  | { name: 'chunk-data'; left: number }
  | { name: 'chunk-end'; seen: number }
  | { name: 'trailers'; text: string }
  | { name: 'until-close' }
  | { name: 'done' };

const MORE: Progress = { state: 'more' };

/** The reader of one answer; `push` each chunk the socket delivers, `end` when it closes. */
export class ResponseParser {
  statusCode: number | null = null;
  headers: Headers = {};
  /** Body bytes seen so far (after any chunked framing is removed). */
  bodyBytes = 0;
  private stage: Stage = { name: 'head', text: '' };
  private keepAlive = false;

  push(chunk: Buffer): Progress {
    let at = 0;
    while (at < chunk.length) {
      const stage = this.stage;
      switch (stage.name) {
        case 'head': {
          const next = this.fieldBlock(stage, chunk, at, 'headers');
          if (typeof next !== 'number') return next;
          at = next;
          const failed = this.readHead(stage.text);
          if (failed !== null) return failed;
          break;
        }
        case 'length':
          at = this.count(stage, chunk, at);
          if (stage.left === 0) return this.finish(at < chunk.length);
          break;
        case 'chunk-size': {
          const newline = chunk.indexOf(10, at);
          stage.line += chunk.toString('latin1', at, newline === -1 ? chunk.length : newline + 1);
          if (stage.line.length > MAX_CHUNK_LINE_BYTES) return error('a chunk-size line of the response is too long');
          if (newline === -1) return MORE;
          at = newline + 1;
          if (!stage.line.endsWith('\r\n')) return error('a chunk-size line of the response does not end in CRLF');
          const size = CHUNK_SIZE.exec(stage.line.slice(0, -2));
          if (size === null) return error('a chunk size of the response is not a hexadecimal number');
          const left = parseInt(size[1]!, 16);
          // The trailers start with the CRLF that ended this line, so their end is an empty line as a head's is.
          this.stage = left === 0 ? { name: 'trailers', text: '\r\n' } : { name: 'chunk-data', left };
          break;
        }
        case 'chunk-data':
          at = this.count(stage, chunk, at);
          if (stage.left === 0) this.stage = { name: 'chunk-end', seen: 0 };
          break;
        case 'chunk-end': {
          if (chunk[at] !== (stage.seen === 0 ? 13 : 10)) return error('a chunk of the response does not end in CRLF');
          at++;
          if (++stage.seen === 2) this.stage = { name: 'chunk-size', line: '' };
          break;
        }
        case 'trailers': {
          // Trailer fields are dropped; the answer ends at the empty line after them.
          const next = this.fieldBlock(stage, chunk, at, 'trailers');
          if (typeof next !== 'number') return next;
          return this.finish(next < chunk.length);
        }
        case 'until-close':
          this.bodyBytes += chunk.length - at;
          return MORE;
        case 'done':
          // Bytes after a complete answer, unasked for: the connection is not trusted again.
          return { state: 'done', reusable: false };
      }
    }
    return this.stage.name === 'done' ? { state: 'done', reusable: this.keepAlive } : MORE;
  }

  /** The connection closed: complete when the body runs to the close, an error anywhere else. */
  end(): Exclude<Progress, { state: 'more' }> {
    if (this.stage.name === 'until-close' || this.stage.name === 'done') return this.finish(false);
    return error(this.statusCode === null ? 'the connection closed before a response' : 'the connection closed in the middle of the response body');
  }

  /** Whether any byte of an answer has come. */
  get started(): boolean {
    return this.statusCode !== null || (this.stage.name === 'head' && this.stage.text.length > 0);
  }

  /**
   * Appends `chunk` from `at` to a block of fields (a head, trailers) up to the empty line that ends
   * it; the offset in `chunk` after that line, with `stage.text` cut before it. MORE while it has not
   * come; an error once the block is over MAX_HEAD_BYTES.
   */
  private fieldBlock(stage: { text: string }, chunk: Buffer, at: number, what: string): number | Progress {
    // latin1 maps each byte to one character: offsets in the text are offsets in the bytes.
    const before = stage.text.length;
    stage.text += chunk.toString('latin1', at);
    const end = stage.text.indexOf('\r\n\r\n', Math.max(0, before - 3));
    if ((end === -1 ? stage.text.length : end + 4) > MAX_HEAD_BYTES) return error(`the response ${what} are over 16 KiB`);
    if (end === -1) return MORE;
    stage.text = stage.text.slice(0, end);
    return at + end + 4 - before;
  }

  /** Counts the body bytes of `chunk` from `at`, up to the `left` of the stage; the offset after them. */
  private count(stage: { left: number }, chunk: Buffer, at: number): number {
    const taken = Math.min(stage.left, chunk.length - at);
    stage.left -= taken;
    this.bodyBytes += taken;
    return at + taken;
  }

  private finish(extra: boolean): { state: 'done'; reusable: boolean } {
    this.stage = { name: 'done' };
    return { state: 'done', reusable: this.keepAlive && !extra };
  }

  /** Reads the status line and fields, and decides the body's framing (RFC 9112 §6.3). */
  private readHead(head: string): Progress | null {
    const lines = head.split('\r\n');
    const status = STATUS_LINE.exec(lines[0]!);
    if (status === null) return error('the response does not start with an HTTP/1.x status line');
    const code = Number(status[2]);
    const headers: Headers = {};
    for (let i = 1; i < lines.length; i++) {
      const line = lines[i]!;
      const colon = line.indexOf(':');
      const name = colon === -1 ? '' : line.slice(0, colon);
      if (!HTTP_TOKEN.test(name)) return error('a response header line is malformed');
      const key = name.toLowerCase();
      const value = line.slice(colon + 1).trim();
      const held = headers[key];
      if (held === undefined) headers[key] = key === 'set-cookie' ? [value] : value;
      else if (Array.isArray(held)) held.push(value);
      else if (key === 'content-length') {
        if (held !== value) return error('the response has two different Content-Length headers');
      } else headers[key] = `${held}, ${value}`;
    }
    // An interim answer (100 Continue, 103 Early Hints) is dropped: the final one follows.
    if (code >= 100 && code < 200) {
      if (code === 101) return error('the receiver switched protocols');
      this.stage = { name: 'head', text: '' };
      return null;
    }
    this.statusCode = code;
    this.headers = headers;
    const connection = typeof headers.connection === 'string' ? headers.connection.toLowerCase() : '';
    this.keepAlive = status[1] === '1' ? !/(?:^|,)\s*close\s*(?:,|$)/.test(connection) : /(?:^|,)\s*keep-alive\s*(?:,|$)/.test(connection);
    const encoding = headers['transfer-encoding'];
    const length = headers['content-length'];
    if (code === 204 || code === 304) this.stage = { name: 'done' };
    else if (typeof encoding === 'string') {
      if (/(?:^|,)\s*chunked\s*$/i.test(encoding)) this.stage = { name: 'chunk-size', line: '' };
      else this.stage = { name: 'until-close' };
      // Both framings given: the length is ignored, and the connection not reused (§6.3, item 3).
      if (length !== undefined) this.keepAlive = false;
    } else if (typeof length === 'string') {
      if (!/^\d{1,15}$/.test(length)) return error('the response Content-Length is not a number');
      const left = Number(length);
      this.stage = left === 0 ? { name: 'done' } : { name: 'length', left };
    } else this.stage = { name: 'until-close' };
    if (this.stage.name === 'until-close') this.keepAlive = false;
    return null;
  }
}

const error = (message: string) => ({ state: 'error', message }) as const;
