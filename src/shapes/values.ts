/**
 * The value shapes the API's inputs and answers share, as valibot schemas: ids, times, hashes,
 * names, media types, signature images, rate limits, filters, and the limits of an agreement.
 * The inputs (`domain/inputs.ts`) check with them, the answers (`answers.ts`) are made of them.
 */
import * as v from 'valibot';
import { idPattern, type IdPrefix } from '../shared/ids.js';
import { hasControlCharacter } from '../shared/text.js';

/** An id of its kind (`wbh_…`, `agr_…`). */
export const id = (prefix: IdPrefix) => v.pipe(v.string(), v.regex(idPattern(prefix)));

/** ATOM, UTC, second precision (`time.ts`): a narrower form of RFC 3339 `date-time`. */
export const atomDateTime = v.pipe(
  v.string(),
  v.regex(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\+00:00$/),
  v.metadata({ format: 'date-time', examples: ['2026-11-21T09:05:07+00:00'] }),
);
export const sha256Hex = v.pipe(v.string(), v.regex(/^[0-9a-f]{64}$/), v.description('SHA-256, lower-case hex'));
export const count = v.pipe(v.number(), v.integer(), v.minValue(0));

/** A time as ATOM, or `null`; `description` says what it is. */
export const nullableTime = (description: string) => v.nullable(v.pipe(atomDateTime, v.description(description)));

/** RFC 9110 §5.6.2 token: one or more tchar. */
const TOKEN = "[!#$%&'*+.^_`|~0-9A-Za-z-]+";
/**
 * RFC 9110 §5.6.4 quoted-string, printable ASCII only: no control character (HTAB, CR, LF and NUL
 * included) and no obs-text, so nothing Node would refuse in a header (U+2028 and U+2029 among them).
 */
const QUOTED = String.raw`"(?:[ !#-\[\]-~]|\\[ -~])*"`;
/** OWS, spaces only: a tab is a control character, refused in every input. */
const OWS = ' *';
const MEDIA_TYPE = new RegExp(`^${TOKEN}/${TOKEN}(?:${OWS};${OWS}${TOKEN}=(?:${TOKEN}|${QUOTED}))*$`);

/** Whether `text` is a media type `mediaType` accepts. */
export const isMediaType = (text: string): boolean => text.length <= 255 && MEDIA_TYPE.test(text);

/**
 * A media type as RFC 9110 §8.3.1 writes one: `type "/" subtype *( OWS ";" OWS parameter )`, token
 * characters only, a parameter's value a token or a quoted string. Whatever passes can be sent as a
 * `Content-Type` header as it is: the attachment's downloads depend on it.
 */
export const mediaType = v.pipe(
  v.string('must be a string'),
  v.maxLength(255, 'must be at most 255 characters'),
  v.regex(MEDIA_TYPE, 'must be a media type such as "application/pdf"'),
);

/** Refuses NUL and every other control character (see `CONTROL_CHARACTER`). */
export const noControlCharacters = () =>
  v.check((text: string) => !hasControlCharacter(text), 'must not contain control characters');

/** How a signer proves who they are: a code mailed to them, or a code the host gave them by another channel. */
export type IdentificationMethod = 'email-code' | 'access-code';
export const IDENTIFICATION_METHODS: readonly IdentificationMethod[] = ['email-code', 'access-code'];

/** What personal data is replaced with when it is erased. */
export const ERASED = '[erased]';

/** The limits of one agreement (spec "Limits"): signers, documents, and the documents' bytes in total. */
export const MAX_SIGNERS = 5;
/** The longest reason a signer may give for declining. */
export const MAX_DECLINE_REASON = 1000;
export const MAX_DOCUMENTS = 5;
export const MAX_DOCUMENT_BYTES = 5 * 1024 * 1024;

/** 1–255 characters (code points), not only white space. */
export const displayName = v.pipe(
  v.string('must be a string'),
  v.check((text) => text.trim() !== '', 'must not be empty'),
  v.check((text) => [...text].length <= 255, 'must be at most 255 characters'),
  noControlCharacters(),
  // The checks above for the OpenAPI document: JSON Schema counts code points too, and \S is "not only white space".
  v.metadata({
    minLength: 1,
    maxLength: 255,
    pattern: '^[^\\u0000-\\u001f\\u007f-\\u009f]*\\S[^\\u0000-\\u001f\\u007f-\\u009f]*$',
  }),
);

/** The largest signature image accepted, in decoded bytes. */
const SIGNATURE_MAX_BYTES = 1024 * 1024;

/** A signature image's data-URL prefix, its type captured. */
export const SIGNATURE_PREFIX = /^data:image\/(png|jpeg);base64,/i;
const ANY_DATA_URL = /^data:([^;,]*)/i;
/** The longest data-URL a valid signature can be: the longest prefix plus base64 of the largest image. */
export const SIGNATURE_MAX_LENGTH = 'data:image/jpeg;base64,'.length + 4 * Math.ceil(SIGNATURE_MAX_BYTES / 3);

export type ImageType = 'png' | 'jpeg';

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
export function signatureProblem(value: string): string | null {
  const prefix = SIGNATURE_PREFIX.exec(value);
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

/** A regular-expression source matching `text` in any case, for patterns that cannot carry an `i` flag. */
function caseless(text: string): string {
  return text.replace(/[a-z]/g, (letter) => `[${letter}${letter.toUpperCase()}]`);
}

/** The bounds of a webhook's `rateLimit`, calls a second. */
const RATE_LIMIT = { min: 1, max: 10_000 } as const;

/** Calls a second a webhook's receiver is sent at most (`rules/rate-limit.ts`); the API's answers show it too. */
export const rateLimit = v.pipe(
  v.number('must be a number of calls a second'),
  v.integer('must be a whole number of calls a second'),
  v.minValue(RATE_LIMIT.min, `must be ${RATE_LIMIT.min} or more`),
  v.maxValue(RATE_LIMIT.max, `must be at most ${RATE_LIMIT.max}`),
  v.description(
    `At most this many of its calls start in any one-second window, across instances (${RATE_LIMIT.min} … ${RATE_LIMIT.max}); \`null\` or absent: no limit.`,
  ),
);

/**
 * A webhook's filter over its events' `data`: keys are dotted paths into the data (`customer.tier`,
 * `items.0.sku`) or the logical operators `$and`, `$or` (arrays of filters) and `$not` (a filter);
 * a path's value is what it must equal, an object of value operators (`{"$gte": 100}`, all of
 * which must hold), or a filter nested under that path. Every clause of an object must hold. The
 * rules: `rules/event-filter.ts`.
 */
export type EventFilter = { [key: string]: unknown };

/** A webhook's filter (src/rules/event-filter.ts); its grammar and limits are checked by `checkFilter`, not by this schema. */
export const filterObject = v.custom<EventFilter>(
  (value) => value !== null && typeof value === 'object' && !Array.isArray(value),
  'must be an object of clauses, such as {"customer.tier": "gold"}',
);
export const eventFilter = v.pipe(
  // Not v.record: it drops keys such as "constructor", which are paths a filter may name.
  filterObject,
  v.description(
    "Which events of its type the webhook gets: keys are dotted paths into the event's `data` (`customer.tier`, `items.0.sku`) or `$and`/`$or` (arrays of filters) and `$not` (a filter); a path's value is what it must equal, an object of value operators (`$eq $neq $gt $gte $lt $lte $in $nin $startsWith $endsWith $exist`), or a filter nested under that path. Every clause must hold. At most 50 clauses, 8 levels, 8,192 characters.",
  ),
  v.metadata({
    examples: [
      { 'customer.tier': 'gold', amount: { $gte: 100 }, $or: [{ country: { $in: ['FR', 'DE'] } }, { vip: true }] },
    ],
  }),
);
