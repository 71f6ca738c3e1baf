import { errorBody } from './http/reply.js';

/**
 * The one error the HTTP layer renders as `{"message": …}` with its status. Services throw it for
 * a caller's mistake, so the programmatic API reports the same status and sentence the route would.
 */
export class HttpError extends Error {
  override readonly name = 'HttpError';

  readonly status: number;
  readonly headers: Readonly<Record<string, string>>;

  constructor(status: number, message: string, headers: Readonly<Record<string, string>> = {}) {
    // An HttpError is an answer, not a fault: its stack is never shown, and capturing one is the
    // costliest part of a 401 or 404 (hot path: change with care).
    const limit = Error.stackTraceLimit;
    Error.stackTraceLimit = 0;
    super(message);
    Error.stackTraceLimit = limit;
    this.status = status;
    this.headers = headers;
  }

  #body: string | undefined;

  /** The answer's body, `{"message": …}` as JSON text; made once, as a shared instance (a 401) answers many requests. */
  get body(): string {
    return (this.#body ??= errorBody(this.message));
  }
}

export const badRequest = (message: string) => new HttpError(400, message);
export const notFound = (message: string) => new HttpError(404, message);

/**
 * Thrown by an adapter when its backend cannot be reached for now: a database refusing
 * connections, restarting, or dropping the connection under a statement. Answered 503 with
 * `Retry-After`; `cause` holds the driver's error, which the handler logs.
 */
export class StorageUnavailableError extends HttpError {
  constructor(message: string, options: { cause?: unknown; retryAfterSeconds?: number } = {}) {
    super(503, message, { 'retry-after': String(options.retryAfterSeconds ?? 1) });
    if (options.cause !== undefined) this.cause = options.cause;
  }
}
