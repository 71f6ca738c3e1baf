import { createHash, randomBytes } from 'node:crypto';

/** Record id prefixes: the first seven come from the API spec, the last six are ours. */
export const ID_PREFIXES = [
  'wbh',
  'agr',
  'ags',
  'agd',
  'fsf',
  'fsd',
  'fss',
  'tck',
  'tcm',
  'tca',
  'evt',
  'whd',
  'sgl',
  'sgc',
  'sgm',
] as const;
export type IdPrefix = (typeof ID_PREFIXES)[number];

const ALPHABET = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
/** 22 base-62 characters carry 22 × log2(62) ≈ 131 random bits. */
const ID_LENGTH = 22;
/** Bytes at or above 248 (= 4 × 62) are rejected so every character is equally likely. */
const UNBIASED_LIMIT = 248;

let pool = Buffer.alloc(0);
let poolOffset = 0;

function nextRandomByte(): number {
  if (poolOffset >= pool.length) {
    // One syscall per 4 KiB instead of one per id: ids are made on the write path.
    pool = randomBytes(4096);
    poolOffset = 0;
  }
  return pool[poolOffset++]!;
}

/** A new id such as `wbh_3ZkQ8…`: the prefix, an underscore and 22 random base-62 characters. */
export function newId(prefix: IdPrefix): string {
  let id = prefix + '_';
  while (id.length < prefix.length + 1 + ID_LENGTH) {
    const byte = nextRandomByte();
    if (byte < UNBIASED_LIMIT) id += ALPHABET[byte % 62];
  }
  return id;
}

/**
 * The id of the delivery a publish makes of event `eventId` for webhook `webhookId`: `whd_` and the
 * first 22 hexadecimal digits (88 bits) of the SHA-256 of both, so that the pair always names the
 * same delivery. A store that lost a delivery not yet tried makes it again from its event under the
 * id it had: the SQL adapter after a crash of the database server, in SQL (`deliveryIdSql` of
 * adapters/sql/outbox/rebuild.ts computes the same). As hard to guess as the event's id.
 */
export function deliveryIdOf(eventId: string, webhookId: string): string {
  return `whd_${createHash('sha256').update(`${eventId}\n${webhookId}`).digest('hex').slice(0, ID_LENGTH)}`;
}

/**
 * A blob store's key: a record id of any prefix (a document, file or attachment id, or `agc_<x>`
 * for a certificate). Nothing else becomes a path or an object name; an object not named like one
 * is none of the portal's.
 */
export const BLOB_KEY = /^[a-z]{3}_[0-9A-Za-z]{1,64}$/;

/** The shape of an id with this prefix: the prefix, `_`, then 1–64 base-62 characters. */
export const idPattern = (prefix: IdPrefix) => new RegExp(`^${prefix}_[0-9A-Za-z]{1,64}$`);

const SHAPES = new Map<IdPrefix, RegExp>(ID_PREFIXES.map((prefix) => [prefix, idPattern(prefix)]));

/**
 * Whether `value` has the shape of an id with this prefix. Ids made elsewhere (a host's own ticket
 * ids, say) are accepted when they keep the shape: the prefix, then 1–64 base-62 characters.
 */
export function isId(prefix: IdPrefix, value: unknown): value is string {
  return typeof value === 'string' && SHAPES.get(prefix)!.test(value);
}
