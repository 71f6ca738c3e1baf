import type { ServerResponse } from 'node:http';

export const JSON_TYPE = 'application/json; charset=utf-8';

/** A JSON answer a route hands back; the dispatcher writes it. */
export interface Reply {
  status: number;
  body?: unknown;
  headers?: Record<string, string>;
}

/** Writes `body` as JSON (no body for 204) in one `writeHead` + `end`. Hot path: change with care. */
export function sendJson(res: ServerResponse, status: number, body: unknown, headers?: Record<string, string>): void {
  if (status === 204 || body === undefined) {
    if (headers !== undefined) res.writeHead(status, headers);
    else res.writeHead(status);
    res.end();
    return;
  }
  const payload = JSON.stringify(body);
  res.setHeader('Content-Type', JSON_TYPE);
  res.setHeader('Content-Length', Buffer.byteLength(payload));
  if (headers !== undefined) res.writeHead(status, headers);
  else res.writeHead(status);
  res.end(payload);
}

/** The error body every failure gets. */
export function sendError(res: ServerResponse, status: number, message: string, headers?: Record<string, string>): void {
  sendJson(res, status, { message }, headers);
}
