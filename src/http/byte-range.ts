import type { ByteRange } from '../ports.js';

/** What a `Range` header asks of a representation of `size` bytes (RFC 9110 §14). */
export type RangeRequest = { kind: 'full' } | { kind: 'partial'; range: ByteRange } | { kind: 'unsatisfiable' };

const FULL: RangeRequest = { kind: 'full' };
const UNSATISFIABLE: RangeRequest = { kind: 'unsatisfiable' };
const SINGLE = /^bytes[ \t]*=[ \t]*([0-9]*)[ \t]*-[ \t]*([0-9]*)[ \t]*$/i;

/**
 * Reads a `Range` header against a representation of `size` bytes. One range (`bytes=0-99`,
 * `bytes=100-`, `bytes=-500`) gives `partial`, its end clamped to the last byte. A range that
 * starts past the end, or a zero-length suffix, is `unsatisfiable`. Everything else is `full`:
 * no header, another unit, a malformed header (which RFC 9110 says to ignore), and several
 * ranges, which would need a `multipart/byteranges` body that download clients do not ask for.
 */
export function parseRange(header: string | undefined, size: number): RangeRequest {
  if (header === undefined) return FULL;
  const match = SINGLE.exec(header);
  if (match === null) return FULL;
  const [, first = '', last = ''] = match;
  if (first === '' && last === '') return FULL;

  if (first === '') {
    const suffix = Number(last);
    if (suffix === 0 || size === 0) return UNSATISFIABLE;
    return { kind: 'partial', range: { start: Math.max(0, size - suffix), end: size - 1 } };
  }
  const start = Number(first);
  const end = last === '' ? Infinity : Number(last);
  if (end < start) return FULL;
  if (start >= size) return UNSATISFIABLE;
  return { kind: 'partial', range: { start, end: Math.min(end, size - 1) } };
}
