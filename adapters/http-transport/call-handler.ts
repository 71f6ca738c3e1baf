import type { Dispatcher } from 'undici';
import type { WebhookCallResult } from '../../src/ports.js';
import { errorMessage } from '../../src/errors.js';

/** At most this much of a response body is read, then dropped: a receiver's answer is never kept. */
export const MAX_RESPONSE_BYTES = 64 * 1024;
/** The most a response head (or its trailers) may take. */
export const MAX_HEAD_BYTES = 16 * 1024;
/** Interim (1xx) answers read before the final one; past this the call fails. */
const MAX_INTERIM_ANSWERS = 8;

const DECIDED = 'the call was decided';
const SWITCHED = 'invalid response: 101 Switching Protocols, a protocol switch the call did not ask for';

/** What the tenant reads for an error undici reports: the bound or the fault, in words. */
function describe(error: Error & { code?: string }, timeoutMs: number): string {
  switch (error.code) {
    case 'UND_ERR_HEADERS_OVERFLOW':
      return `invalid response: its head or trailers are over ${MAX_HEAD_BYTES / 1024} KiB`;
    case 'UND_ERR_CONNECT_TIMEOUT':
      return `timed out after ${timeoutMs} ms`;
    case 'UND_ERR_RES_CONTENT_LENGTH_MISMATCH':
      // Also what undici reports for two different Content-Length headers.
      return 'invalid response: its body does not match its Content-Length';
    case 'UND_ERR_SOCKET':
      // undici refuses a 100 Continue the request did not ask for, and bytes that answer no request.
      if (error.message === 'bad response')
        return 'invalid response: an answer that does not fit the request (an unrequested 100 Continue)';
      if (error.message === 'other side closed' || error.message === 'closed')
        return 'the receiver closed the connection before answering';
      if (error.message === 'bad upgrade') return SWITCHED;
      return error.message;
  }
  // A 101 without an Upgrade header trips an assertion in undici's parser: its text is no reason.
  if (error.name === 'AssertionError' || (error as { code?: string }).code === 'ERR_ASSERTION') {
    return /upgrade/i.test(error.message) ? SWITCHED : 'invalid response: an answer the HTTP client could not read';
  }
  if (error.name === 'HTTPParserError')
    return `invalid response: ${error.message.replace(/^Response does not match the HTTP\/1\.1 protocol \((.*)\)$/, '$1')}`;
  return errorMessage(error);
}

/** The deadline passed: a module function, so that a call's timer needs no closure of its own. */
function expire(handler: CallHandler): void {
  handler.fail(`timed out after ${handler.timeoutMs} ms`);
}

/**
 * One call's handler on undici's dispatch, and the promise's resolution: the first outcome decides
 * (the status, a bound broken, the deadline, an abort), later ones are ignored; a call decided before
 * its answer was whole is aborted, which closes its connection. One object a call, its methods on
 * the prototype: the worker's CPU a delivery counts it (`webhook fleet, 2 workers` in `npm run bench`).
 */
export class CallHandler implements Dispatcher.DispatchHandler {
  private controller: Dispatcher.DispatchController | undefined;
  private statusCode: number | null = null;
  private headers: WebhookCallResult['headers'] = {};
  private interim = 0;
  private bodyBytes = 0;
  private settled = false;
  /** The egress proxy failed: the call never left the portal (`WebhookCallResult.local`). */
  private local = false;
  /** undici has finished with the request (answered whole, or failed): nothing left to abort. */
  private completed = false;
  private readonly timer: NodeJS.Timeout;
  private readonly onAbort: (() => void) | undefined;

  constructor(
    private readonly resolve: (result: WebhookCallResult) => void,
    readonly timeoutMs: number,
    private readonly signal: AbortSignal | undefined,
  ) {
    this.timer = setTimeout(expire, timeoutMs, this);
    this.timer.unref();
    if (signal !== undefined) {
      this.onAbort = () => this.fail('aborted');
      signal.addEventListener('abort', this.onAbort, { once: true });
    }
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.controller = controller;
    // Decided while it waited for a connection (deadline, abort): it is not sent at all.
    if (this.settled) controller.abort(new Error(DECIDED));
  }

  onResponseStart(
    _controller: Dispatcher.DispatchController,
    status: number,
    headers: WebhookCallResult['headers'],
  ): void {
    if (status < 100 || status > 599)
      return this.refuse(`invalid response: ${status} is not an HTTP status code (100–599)`);
    if (status < 200) {
      if (++this.interim > MAX_INTERIM_ANSWERS)
        this.refuse(`invalid response: more than ${MAX_INTERIM_ANSWERS} interim (1xx) answers`);
      return;
    }
    this.statusCode = status;
    this.headers = headers;
  }

  onResponseData(_controller: Dispatcher.DispatchController, chunk: Buffer): void {
    this.bodyBytes += chunk.length;
    if (this.bodyBytes > MAX_RESPONSE_BYTES) this.answered();
  }

  onResponseEnd(): void {
    this.completed = true;
    this.answered();
  }

  onResponseError(_controller: Dispatcher.DispatchController, error: Error): void {
    this.completed = true;
    // The egress proxy itself failed (connector.ts `ProxyError`): the call never left the portal.
    const proxyFailure = error as { code?: string; local?: boolean };
    if (proxyFailure.code === 'ERR_WEBHOOK_PROXY' && proxyFailure.local === true) this.local = true;
    const message = describe(error, this.timeoutMs);
    // An answer that broke a bound or the protocol is no answer, whatever status it began with.
    if (message.startsWith('invalid response:')) this.refuse(message);
    else this.fail(message);
  }

  /** Fails the call, unless its status has arrived: that decides it, whatever happens to the rest of the body. */
  fail(error: string): void {
    if (this.statusCode === null) this.refuse(error);
    else this.answered();
  }

  private answered(): void {
    this.finish({ statusCode: this.statusCode, headers: this.headers, error: null });
  }

  private refuse(error: string): void {
    this.finish({ statusCode: null, headers: {}, error, ...(this.local ? { local: true } : {}) });
  }

  private finish(result: WebhookCallResult): void {
    if (this.settled) return;
    this.settled = true;
    clearTimeout(this.timer);
    if (this.onAbort !== undefined) this.signal!.removeEventListener('abort', this.onAbort);
    this.resolve(result);
    if (this.controller !== undefined && !this.completed) this.controller.abort(new Error(DECIDED));
  }
}
