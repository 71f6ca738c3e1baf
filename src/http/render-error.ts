import { type ErrorArgs, type ErrorCode, PortalError, answerOf, describeError } from '../errors.js';
import type { Logger } from '../shared/logger.js';
import { type Reply, errorJson } from './reply.js';

/** An error as the client gets it: status, `{"message": …}` as JSON text, and the headers its code carries. */
export interface RenderedError {
  status: number;
  body: string;
  headers: Readonly<Record<string, string>>;
}

const INTERNAL = new PortalError('INTERNAL');

/**
 * The one place an error becomes an answer. A catalogue error is answered with its status, message
 * and headers; a 5xx of the backend's (503) is logged as a warning with its cause, for the operator.
 * Anything else, a catalogue fault of ours included, is logged with the request id and answered as
 * a plain 500 that shows nothing of it.
 */
export function renderError(error: unknown, logger: Logger, requestId: string): RenderedError {
  if (error instanceof PortalError && error.expose) {
    if (error.status >= 500) logger.warn({ requestId, err: describeError(error.cause ?? error) }, error.message);
    return { status: error.status, body: errorJson(error.message), headers: error.headers };
  }
  logger.error({ requestId, err: describeError(error) }, 'unexpected error');
  return { status: 500, body: errorJson(INTERNAL.message), headers: INTERNAL.headers };
}

/**
 * A refusal as common as a 404 on a read route, answered as a `Reply` instead of thrown: the same
 * catalogue answer `renderError` gives the `PortalError`, without building one. Hot path: an
 * exception thrown through the async route captures a stack and rejects two promises, which made a
 * 404 cost more server CPU than a found webhook (`npm run bench:scenario -- 404`; the figures in
 * docs/performance.md, "Figures behind the code": refusals returned, not thrown).
 * Only for exposed client errors; everything else is thrown.
 */
export function refusal<C extends ErrorCode>(code: C, ...args: ErrorArgs<C>): Reply {
  const { status, message, headers } = answerOf(code, ...args);
  return { status, json: errorJson(message), headers };
}
