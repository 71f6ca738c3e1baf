import type { IncomingMessage, ServerResponse } from 'node:http';
import type { RenderedError } from './render-error.js';
import { JSON_TYPE } from './reply.js';

/** How much of an unwanted body is read and thrown away after an early answer, and for how long at most. */
const LINGER_BYTES = 8 * 1024 * 1024;
const LINGER_MS = 5000;

/**
 * Sends an error while the client may still be sending its body. `Connection: close`, since the
 * rest of the body will not be parsed; and the connection closes only once the client has sent
 * everything (or after a few seconds, or megabytes, of discarded bytes): closing a socket with
 * unread bytes resets it, and a reset can destroy the answer before the client has read it.
 * For a request whose body is not yet complete; otherwise the usual error path applies.
 */
export function answerEarly(req: IncomingMessage, res: ServerResponse, error: RenderedError): void {
  res.writeHead(error.status, {
    ...error.headers,
    'Content-Type': JSON_TYPE,
    'Content-Length': String(Buffer.byteLength(error.body)),
    Connection: 'close',
  });
  res.write(error.body);
  let discarded = 0;
  const done = () => {
    clearTimeout(timer);
    req.off('data', discard);
    req.off('end', done);
    req.off('close', done);
    res.end();
  };
  const discard = (chunk: Buffer) => {
    discarded += chunk.length;
    if (discarded > LINGER_BYTES) done();
  };
  const timer = setTimeout(done, LINGER_MS);
  timer.unref();
  req.on('data', discard);
  req.once('end', done);
  req.once('close', done);
  req.resume();
}
