import type { Readable } from 'node:stream';

const unheard = () => {};

/**
 * Takes charge of a blob's body as `put` begins: a stream's `error` event gets a listener at once.
 * A store reads the body only after its own set-up (a temp file opened, a row started, the SDK
 * loaded); a stream that failed meanwhile (a client gone) would otherwise emit its error to nobody,
 * and Node ends the process on an unheard `error`. The read still fails with the error; the listener
 * only keeps it from being thrown at the event loop, then or later.
 */
export function takeBody<B extends Readable | AsyncIterable<Uint8Array>>(body: B): B {
  const stream = body as Partial<Readable>;
  if (typeof stream.on === 'function' && typeof stream.listenerCount === 'function') stream.on('error', unheard);
  return body;
}
