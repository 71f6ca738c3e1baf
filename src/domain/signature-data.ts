import * as v from 'valibot';
import { SignatureImageError, redrawSignature } from './signature-image.js';

/** The largest signature image accepted, in decoded bytes. */
const SIGNATURE_MAX_BYTES = 1024 * 1024;

const PREFIX = /^data:image\/(png|jpeg);base64,/i;
const ANY_DATA_URL = /^data:([^;,]*)/i;
/** The longest data-URL a valid signature can be: the longest prefix plus base64 of the largest image. */
export const SIGNATURE_MAX_LENGTH = 'data:image/jpeg;base64,'.length + 4 * Math.ceil(SIGNATURE_MAX_BYTES / 3);

type ImageType = 'png' | 'jpeg';

const MAGIC: Record<ImageType, (bytes: Buffer) => boolean> = {
  png: (bytes) => bytes.subarray(0, 8).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])),
  jpeg: (bytes) => bytes.length >= 3 && bytes[0] === 0xff && bytes[1] === 0xd8 && bytes[2] === 0xff,
};

/**
 * Why `value` is not an acceptable signature image, or `null` when it is: a `data:` URL of a PNG
 * or JPEG image in canonical base64 whose bytes start as that type's do, at most 1 MiB. SVG is
 * refused by name: it is a document that can carry scripts, not an image of a signature. WebP is
 * refused too: no decoder in the install can read it, and an image is only kept once redrawn.
 */
function signatureProblem(value: string): string | null {
  const prefix = PREFIX.exec(value);
  if (prefix === null) {
    const type = ANY_DATA_URL.exec(value)?.[1]?.toLowerCase();
    if (type?.startsWith('image/svg')) return 'SVG images are refused; send a PNG or JPEG image';
    if (type === 'image/webp') return 'WebP images are refused; send a PNG or JPEG image';
    return 'must be a data-URL of a PNG or JPEG image (data:image/png;base64,…)';
  }
  const type = prefix[1]!.toLowerCase() as ImageType;
  const payload = value.slice(prefix[0].length);
  if (payload.length === 0) return 'holds no image data';
  if (payload.length > 4 * Math.ceil(SIGNATURE_MAX_BYTES / 3)) return 'the image must be at most 1 MiB';
  const bytes = Buffer.from(payload, 'base64');
  // Node's decoder skips what it cannot read; re-encoding shows whether the text was strict, padded base64.
  if (bytes.toString('base64') !== payload) return 'is not valid base64 (standard alphabet, padded, no whitespace)';
  if (bytes.length > SIGNATURE_MAX_BYTES) return 'the image must be at most 1 MiB';
  if (!MAGIC[type](bytes)) return `the data is not a ${type.toUpperCase()} image`;
  return null;
}

/** A signature image as a data-URL; see `signatureProblem`. */
export const signatureDataUrl = v.pipe(
  v.string('must be a string'),
  v.rawCheck<string>(({ dataset, addIssue }) => {
    if (!dataset.typed) return;
    const problem = signatureProblem(dataset.value);
    if (problem !== null) addIssue({ message: problem });
  }),
  // What JSON Schema can say of the check above (the OpenAPI document); the prefix is case-insensitive.
  v.metadata({
    pattern: `^${caseless('data:image/')}(${caseless('png')}|${caseless('jpeg')});${caseless('base64')},[A-Za-z0-9+/]+={0,2}$`,
    maxLength: SIGNATURE_MAX_LENGTH,
    description:
      'A PNG or JPEG image of at most 1 MiB and 2,000,000 pixels (4,000 on a side) as a data-URL in canonical base64; SVG and WebP are refused. It is kept redrawn as a PNG.',
  }),
);

/**
 * A signature image as a signer or sender gives it: checked as `signatureDataUrl`, then decoded
 * within a pixel budget and redrawn (`redrawSignature`); the output is the data-URL of the redrawn
 * PNG, the only form that is stored, hashed or drawn.
 */
export const signatureInput = v.pipe(
  signatureDataUrl,
  v.rawTransform<string, string>(({ dataset, addIssue, NEVER }) => {
    const prefix = PREFIX.exec(dataset.value)!;
    const bytes = Buffer.from(dataset.value.slice(prefix[0].length), 'base64');
    try {
      return `data:image/png;base64,${redrawSignature(prefix[1]!.toLowerCase() as ImageType, bytes).toString('base64')}`;
    } catch (error) {
      if (!(error instanceof SignatureImageError)) throw error;
      addIssue({ message: error.message });
      return NEVER;
    }
  }),
);

/**
 * A stored signature image (`data:` URL) redrawn for drawing, or `null` when it cannot be: what a
 * PDF library is handed. Images stored before redrawing existed pass through here as any other.
 */
export function drawableSignature(dataUrl: string | null): Buffer | null {
  const prefix = dataUrl === null ? null : PREFIX.exec(dataUrl);
  if (prefix == null || signatureProblem(dataUrl!) !== null) return null;
  try {
    return redrawSignature(
      prefix[1]!.toLowerCase() as ImageType,
      Buffer.from(dataUrl!.slice(prefix[0].length), 'base64'),
    );
  } catch (error) {
    if (error instanceof SignatureImageError) return null;
    throw error;
  }
}

/** A regular-expression source matching `text` in any case, for patterns that cannot carry an `i` flag. */
function caseless(text: string): string {
  return text.replace(/[a-z]/g, (letter) => `[${letter}${letter.toUpperCase()}]`);
}
