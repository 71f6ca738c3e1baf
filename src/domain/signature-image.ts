import { createRequire } from 'node:module';
import { inflateSync } from 'node:zlib';
import type { PNG } from 'pngjs';

/**
 * A signature image is decoded and drawn again before anything keeps or shows it: what is stored
 * is always a PNG this module wrote (8-bit RGBA, not interlaced), so no PDF library or browser ever
 * parses the bytes a signer sent. The decode is bounded before it starts: the image's declared size
 * is read from its header and refused past `SIGNATURE_MAX_PIXELS`, and the PNG's compressed data is
 * inflated with a ceiling of what that size needs, so a small file cannot expand into a large one.
 */

/** The most pixels a signature image may have: 2000 × 1000, twice a high-density signature pad. */
const SIGNATURE_MAX_PIXELS = 2_000_000;
/** The longest side, in pixels. */
const SIGNATURE_MAX_SIDE = 4000;
/** The largest PNG this module writes; a redrawn image past it is refused. */
const REDRAWN_MAX_BYTES = 1024 * 1024;

/** Why an image was refused: the message a person reads after "signature ". */
export class SignatureImageError extends Error {}

// pngjs and jpeg-js are CommonJS, loaded with the first signature: a portal that never signs never holds them.
const require = createRequire(import.meta.url);
let codecs: { png: typeof import('pngjs'); jpeg: typeof import('jpeg-js') } | undefined;
const loadCodecs = () =>
  (codecs ??= {
    png: require('pngjs') as typeof import('pngjs'),
    jpeg: require('jpeg-js') as typeof import('jpeg-js'),
  });

/**
 * `bytes` (a PNG or a JPEG) decoded within the budget and written again as a PNG; throws
 * `SignatureImageError` naming what is wrong. Synchronous and bounded: at most
 * `SIGNATURE_MAX_PIXELS` × 4 bytes of pixels are ever held.
 */
export function redrawSignature(type: 'png' | 'jpeg', bytes: Buffer): Buffer {
  const { png, jpeg } = loadCodecs();
  let width: number;
  let height: number;
  let pixels: Buffer;
  try {
    if (type === 'png') {
      boundPng(bytes);
      const image = png.PNG.sync.read(bytes);
      ({ width, height } = image);
      pixels = image.data;
    } else {
      const image = jpeg.decode(bytes, {
        useTArray: true,
        formatAsRGBA: true,
        maxResolutionInMP: SIGNATURE_MAX_PIXELS / 1_000_000,
        maxMemoryUsageInMB: 64,
      });
      ({ width, height } = image);
      pixels = Buffer.from(image.data.buffer, image.data.byteOffset, image.data.byteLength);
    }
  } catch (error) {
    if (error instanceof SignatureImageError) throw error;
    throw new SignatureImageError(`is not a readable ${type.toUpperCase()} image (${reasonOf(error)})`);
  }
  checkSize(width, height);
  // Both decoders hand over 8-bit RGBA, written straight from their buffer: no second copy of the pixels.
  const redrawn = png.PNG.sync.write({ width, height, data: pixels } as PNG, {
    colorType: 6,
    inputColorType: 6,
    bitDepth: 8,
  });
  if (redrawn.length > REDRAWN_MAX_BYTES)
    throw new SignatureImageError('holds too much detail: redrawn as a PNG it is over 1 MiB');
  return redrawn;
}

/** Refuses a PNG whose header declares too many pixels, or whose compressed data expands past what they need. */
function boundPng(bytes: Buffer): void {
  // The signature (8 bytes), then IHDR: length (4), type (4), width (4), height (4), depth, colour, compression, filter, interlace.
  if (bytes.length < 33 || bytes.toString('latin1', 12, 16) !== 'IHDR')
    throw new SignatureImageError('is not a readable PNG image (no IHDR header)');
  const width = bytes.readUInt32BE(16);
  const height = bytes.readUInt32BE(20);
  checkSize(width, height);
  // The most a PNG of this size can inflate to: 16 bits × 4 channels a pixel, a filter byte a row of each of the 7 interlace passes.
  const ceiling = width * height * 8 + height * 7 + 64;
  const compressed: Buffer[] = [];
  for (let at = 8; at + 8 <= bytes.length; ) {
    const length = bytes.readUInt32BE(at);
    const kind = bytes.toString('latin1', at + 4, at + 8);
    if (at + 12 + length > bytes.length)
      throw new SignatureImageError(`is not a readable PNG image (its ${kind} chunk is cut short)`);
    if (kind === 'IDAT') compressed.push(bytes.subarray(at + 8, at + 8 + length));
    if (kind === 'IEND') break;
    at += 12 + length;
  }
  try {
    inflateSync(Buffer.concat(compressed), { maxOutputLength: ceiling });
  } catch (error) {
    if (error instanceof RangeError)
      throw new SignatureImageError('is not a readable PNG image (its data expands past what its size needs)');
    throw new SignatureImageError(`is not a readable PNG image (${reasonOf(error)})`);
  }
}

function checkSize(width: number, height: number): void {
  if (width === 0 || height === 0) throw new SignatureImageError('is an image without pixels');
  if (width > SIGNATURE_MAX_SIDE || height > SIGNATURE_MAX_SIDE || width * height > SIGNATURE_MAX_PIXELS) {
    throw new SignatureImageError(
      `is ${width} × ${height} pixels; at most ${SIGNATURE_MAX_SIDE} on a side and ${SIGNATURE_MAX_PIXELS.toLocaleString('en')} in all are accepted`,
    );
  }
}

const reasonOf = (error: unknown) => (error instanceof Error ? error.message : String(error)).slice(0, 200);
