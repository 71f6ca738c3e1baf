import type { ServerResponse } from 'node:http';

export const JSON_TYPE = 'application/json; charset=utf-8';

/** A JSON answer a route hands back; the dispatcher writes it. */
export interface Reply {
  status: number;
  body?: unknown;
  /** The body already serialized, when the route keeps it as JSON text; used instead of `body`. */
  json?: string;
  headers?: Record<string, string>;
}

/**
 * Headers as `writeHead` takes them fastest: a flat `[name, value, name, value, …]` list. Given
 * such a list and no header set before on `res`, node:http writes it as it is; a header map or
 * `setHeader` would first copy every header into the response's own table.
 */
export type HeaderList = (string | number)[];

/** The headers the contract puts on every API response (§4), for a request with this id. */
export function contractHeaders(requestId: string): HeaderList {
  return ['X-Request-Id', requestId, 'X-Content-Type-Options', 'nosniff', 'Cache-Control', 'no-store'];
}

/**
 * Writes `payload` (JSON text; `undefined` for no body, as a 204 has) in one `writeHead` + `end`,
 * with the contract's headers for `requestId`, or none of them when a route already set them on
 * `res` (`requestId` null), then the content headers and `headers` (a `Cache-Control` among them
 * replaces the contract's).
 */
export function writeJson(
  res: ServerResponse,
  status: number,
  payload: string | undefined,
  requestId: string | null,
  headers?: Readonly<Record<string, string>>,
): void {
  const body = payload !== undefined && status !== 204;
  const head = requestId === null ? [] : contractHeaders(requestId);
  if (body) head.push('Content-Type', JSON_TYPE, 'Content-Length', Buffer.byteLength(payload));
  if (headers !== undefined) {
    for (const name in headers) {
      // A route's own Cache-Control takes the contract's place (public keys may be kept a while).
      const at = name === 'Cache-Control' ? head.indexOf('Cache-Control') : -1;
      if (at >= 0) head[at + 1] = headers[name]!;
      else head.push(name, headers[name]!);
    }
  }
  res.writeHead(status, head);
  if (body) res.end(payload);
  else res.end();
}

/** The error body every failure gets, `{"message": …}` as JSON text. */
export const errorJson = (message: string) => JSON.stringify({ message });
