import * as v from 'valibot';

/** The largest signature image accepted, in decoded bytes. */
const SIGNATURE_MAX_BYTES = 1024 * 1024;

const PREFIX = /^data:image\/(png|jpeg|webp);base64,/i;
const ANY_DATA_URL = /^data:([^;,]*)/i;
/** The longest data-URL a valid signature can be: the longest prefix plus base64 of the largest image. */
export const SIGNATURE_MAX_LENGTH = 'data:image/jpeg;base64,'.length + 4 * Math.ceil(SIGNATURE_MAX_BYTES / 3);

type ImageType = 'png' | 'jpeg' | 'webp';

const MAGIC: Record<ImageType, (bytes: Buffer) => boolean> = {
  png: (bytes) => bytes.subarray(0, 8).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])),
  jpeg: (bytes) => bytes.length >= 3 && bytes[0] === 0xff && bytes[1] === 0xd8 && bytes[2] === 0xff,
  webp: (bytes) => bytes.length >= 12 && bytes.toString('latin1', 0, 4) === 'RIFF' && bytes.toString('latin1', 8, 12) === 'WEBP',
};

/**
 * Why `value` is not an acceptable signature image, or `null` when it is: a `data:` URL of a PNG,
 * JPEG or WebP image in canonical base64 whose bytes start as that type's do, at most 1 MiB.
 * SVG is refused by name: it is a document that can carry scripts, not an image of a signature.
 */
function signatureProblem(value: string): string | null {
  const prefix = PREFIX.exec(value);
  if (prefix === null) {
    const type = ANY_DATA_URL.exec(value)?.[1]?.toLowerCase();
    if (type?.startsWith('image/svg')) return 'SVG images are refused; send a PNG, JPEG or WebP image';
    return 'must be a data-URL of a PNG, JPEG or WebP image (data:image/png;base64,…)';
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
    pattern: `^${caseless('data:image/')}(${caseless('png')}|${caseless('jpeg')}|${caseless('webp')});${caseless('base64')},[A-Za-z0-9+/]+={0,2}$`,
    maxLength: SIGNATURE_MAX_LENGTH,
    description: 'A PNG, JPEG or WebP image of at most 1 MiB as a data-URL in canonical base64; SVG is refused.',
  }),
);

/** A regular-expression source matching `text` in any case, for patterns that cannot carry an `i` flag. */
function caseless(text: string): string {
  return text.replace(/[a-z]/g, (letter) => `[${letter}${letter.toUpperCase()}]`);
}
