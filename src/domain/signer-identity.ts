import { randomBytes, scrypt, timingSafeEqual } from 'node:crypto';
import { promisify } from 'node:util';
import { PortalError } from '../errors.js';
import type { AgreementRecord, AgreementSignerRecord, IdentificationMethod, SignerIdentityRecord } from '../records.js';
import { identificationOf, isOpen } from '../records.js';
import { atom } from '../shared/time.js';
import type { LinkSigner } from './download-links.js';
import { queueMail } from './signer-mail-queue.js';
import { type ClientInfo, type Step, audited } from './audit-trail.js';

/**
 * Signer identification: the rules (pure functions of a stored agreement, applied inside one
 * `updateAgreement` like the signing rules) and the two secrets they check.
 *
 * - The e-mail code is never stored: it is six digits derived, under the first signing key, from
 *   the agreement, the signer and the code's id (`emailCode`); the store keeps the id and when it
 *   stops working. Rotating the first key voids the codes outstanding (a signer requests another).
 * - The access code is kept as an scrypt hash with its own salt (`hashAccessCode`).
 * - Both are compared in constant time, inside the atomic step that counts the try, so concurrent
 *   guesses are counted one by one: the fifth wrong code revokes the link, whatever arrives at once.
 */

/** How long an e-mail code works. */
export const CODE_TTL_MS = 10 * 60_000;
/** E-mail codes one signer may be sent in any rolling hour. */
const MAX_SENDS_PER_HOUR = 5;
/** Wrong codes one link takes: the last revokes it. */
export const MAX_WRONG_CODES = 5;

const HOUR_MS = 3_600_000;
const CODE_TAG = 'customer-portal/identify/v1';
// scrypt's interactive cost (N = 2^14, r = 8): about 16 MiB and tens of milliseconds per check.
const SCRYPT_COST = { N: 16_384, r: 8, p: 1 };
const SCRYPT_LENGTH = 32;
const scryptAsync = promisify(scrypt) as (
  password: string,
  salt: Buffer,
  keylen: number,
  options: typeof SCRYPT_COST,
) => Promise<Buffer>;

/** `scrypt$<salt>$<hash>` (base64url) of an access code: what is stored instead of it. */
export async function hashAccessCode(code: string): Promise<string> {
  const salt = randomBytes(16);
  const hash = await scryptAsync(code.normalize('NFC'), salt, SCRYPT_LENGTH, SCRYPT_COST);
  return `scrypt$${salt.toString('base64url')}$${hash.toString('base64url')}`;
}

/** The hash `presented` would have under the salt of `stored`; compared with it inside the step (`accessCodeMatches`). */
export async function accessCodeDigest(presented: string, stored: string): Promise<Buffer> {
  const [, salt = ''] = stored.split('$');
  return scryptAsync(presented.normalize('NFC'), Buffer.from(salt, 'base64url'), SCRYPT_LENGTH, SCRYPT_COST);
}

function accessCodeMatches(digest: Buffer | null, stored: string | null): boolean {
  if (digest === null || stored === null) return false;
  const expected = Buffer.from(stored.split('$')[2] ?? '', 'base64url');
  return expected.length === digest.length && timingSafeEqual(expected, digest);
}

/** The six digits of e-mail code `codeId` of a signer: an HMAC under the first signing key, never stored. */
export function emailCode(
  keys: LinkSigner,
  record: Pick<AgreementRecord, 'accountId' | 'id'>,
  signerId: string,
  codeId: string,
): string {
  const mac = Buffer.from(
    keys.signText(`${CODE_TAG}.${JSON.stringify([record.accountId, record.id, signerId, codeId])}`),
    'base64url',
  );
  return String(mac.readUInt32BE(0) % 1_000_000).padStart(6, '0');
}

function emailCodeMatches(
  keys: LinkSigner,
  record: AgreementRecord,
  signerId: string,
  codeId: string,
  presented: string,
): boolean {
  const expected = Buffer.from(emailCode(keys, record, signerId, codeId));
  // Compared at the code's length whatever was sent: only its digits, spaces and dashes dropped.
  const given = Buffer.alloc(expected.length);
  const digits = presented.replace(/[\s-]/g, '');
  given.write(digits.slice(0, expected.length));
  return timingSafeEqual(expected, given) && digits.length === expected.length;
}

/** The identification of the signer's current link, or `null` (none needed, none begun). */
export function currentIdentity(signer: AgreementSignerRecord): SignerIdentityRecord | null {
  return signer.identity !== null && signer.identity.linkId === signer.signingLinkId ? signer.identity : null;
}

/** Whether the signer must still identify before seeing documents, signing or declining. */
export function mustIdentify(signer: AgreementSignerRecord): boolean {
  const identification = identificationOf(signer);
  return identification.required && !identification.verified;
}

/** The methods the signer may use now: the link's access code when it has one, else a mailed code when mail can be sent. */
function methodsOf(signer: AgreementSignerRecord, mailing: boolean): IdentificationMethod[] {
  if ((currentIdentity(signer)?.accessCode ?? null) !== null) return ['access-code'];
  return mailing ? ['email-code'] : [];
}

/** What the signing view says of identification (`DESIGN.md` §12). */
export type SigningIdentification =
  | { required: false }
  | { required: true; verified: false; methods: IdentificationMethod[] }
  | { required: true; verified: true; method: IdentificationMethod; at: string };

export function signingIdentification(signer: AgreementSignerRecord, mailing: boolean): SigningIdentification {
  const identification = identificationOf(signer);
  if (!identification.required) return { required: false };
  if (identification.verified)
    return { required: true, verified: true, method: identification.method!, at: identification.at! };
  return { required: true, verified: false, methods: methodsOf(signer, mailing) };
}

/**
 * The signer's identification for a new link `linkId`: no tries, no code, not verified; the
 * access code's hash when given (or `carry`: a reminder's fresh link keeps the host's code); the
 * sends of the last hour kept (they are counted per signer). `null` when none is needed or kept.
 */
export function identityForLink(
  signer: AgreementSignerRecord,
  linkId: string,
  accessCode: string | null,
  now: Date,
): SignerIdentityRecord | null {
  const sends = (signer.identity?.sends ?? []).filter((at) => Date.parse(at) > now.getTime() - HOUR_MS);
  if (!signer.shouldIdentify && accessCode === null && sends.length === 0) return null;
  return { linkId, accessCode, tries: 0, locked: false, code: null, verified: null, sends };
}

/** A step on one signer's identification: the record with `identity` replaced. */
function withIdentity(
  record: AgreementRecord,
  signerId: string,
  identity: SignerIdentityRecord,
  extra: Partial<AgreementSignerRecord> = {},
): AgreementRecord {
  return {
    ...record,
    signers: record.signers.map((one) => (one.id === signerId ? { ...one, ...extra, identity } : one)),
  };
}

function signerOf(record: AgreementRecord, signerId: string, linkId: string): AgreementSignerRecord {
  const signer = record.signers.find((one) => one.id === signerId)!;
  // The link may have been replaced or revoked since the token was read.
  if (signer.signingLinkId !== linkId) {
    throw signer.identity?.linkId === linkId && signer.identity.locked
      ? new PortalError('IDENTIFICATION_LOCKED', MAX_WRONG_CODES)
      : new PortalError('SIGNING_LINK_REPLACED');
  }
  return signer;
}

/**
 * A new e-mail code for the signer (`codeId`), mailed by the notifier: 409 when they need none, are
 * identified already, or may not use one; 429 past five sends in an hour. Voids the code before.
 */
export function requestEmailCode(
  record: AgreementRecord,
  signerId: string,
  linkId: string,
  codeId: string,
  now: Date,
  mailing: boolean,
  client: ClientInfo,
): Step {
  const signer = signerOf(record, signerId, linkId);
  if (signer.signedAt !== null) throw new PortalError('SIGNER_ALREADY_SIGNED', signerId, record.id);
  if (!isOpen(record)) throw new PortalError('AGREEMENT_CLOSED', record.id, record.closedReason ?? 'signed');
  const identification = identificationOf(signer);
  if (!identification.required) throw new PortalError('IDENTIFICATION_NOT_REQUIRED');
  if (identification.verified) throw new PortalError('IDENTIFICATION_ALREADY_VERIFIED');
  if (!mailing) throw new PortalError('EMAIL_CODE_UNAVAILABLE', 'no notifier is configured');
  if (!methodsOf(signer, mailing).includes('email-code'))
    throw new PortalError('EMAIL_CODE_UNAVAILABLE', 'this link is opened with the access code the sender gave you');
  const identity = currentIdentity(signer) ?? identityForLink(signer, linkId, null, now)!;
  const sends = identity.sends.filter((at) => Date.parse(at) > now.getTime() - HOUR_MS);
  if (sends.length >= MAX_SENDS_PER_HOUR) {
    const retryAfter = Math.max(1, Math.ceil((Date.parse(sends[0]!) + HOUR_MS - now.getTime()) / 1000));
    throw new PortalError('EMAIL_CODE_SENDS_LIMIT', MAX_SENDS_PER_HOUR, retryAfter);
  }
  const next = {
    ...identity,
    code: { id: codeId, expiresAt: atom(new Date(now.getTime() + CODE_TTL_MS)) },
    sends: [...sends, atom(now)],
  };
  let agreement = audited(withIdentity(record, signerId, next), now, 'identification-code-sent', {
    actor: signerId,
    signerId,
    client,
    withDocuments: false,
  });
  agreement = queueMail(agreement, { kind: 'identification-code', signerId, codeId }, now);
  return { agreement, events: [] };
}

/** What a code given to `identify` turned out to be. */
export type IdentifyOutcome =
  | { kind: 'identified'; method: IdentificationMethod }
  | { kind: 'wrong'; triesLeft: number }
  | { kind: 'locked' };

/**
 * Checks `presented` against the link's e-mail code and access code (`accessDigest`: its scrypt
 * under the stored salt, made before the step), both in constant time. A match verifies the link
 * (`identified`, the e-mail code spent); a wrong code costs a try (`identification-failed`), the
 * fifth revokes the link (`identification-locked`). An expired code, or none outstanding, costs
 * nothing and is refused by throwing (403), as is a signer who needs no identification (409).
 */
export function identify(
  record: AgreementRecord,
  signerId: string,
  linkId: string,
  presented: { code: string; accessDigest: Buffer | null },
  keys: LinkSigner,
  now: Date,
  client: ClientInfo,
  outcome: (result: IdentifyOutcome) => void,
): Step {
  const signer = signerOf(record, signerId, linkId);
  if (!identificationOf(signer).required) throw new PortalError('IDENTIFICATION_NOT_REQUIRED');
  const identity = currentIdentity(signer) ?? identityForLink(signer, linkId, null, now)!;
  const code = identity.code;
  const codeLive = code !== null && now.getTime() < Date.parse(code.expiresAt);
  // Both compared whatever the other gave, so the time taken says nothing of which matched.
  const byEmail = code !== null && emailCodeMatches(keys, record, signerId, code.id, presented.code);
  const byAccess = accessCodeMatches(presented.accessDigest, identity.accessCode);
  const triesLeft = MAX_WRONG_CODES - identity.tries;
  if (byAccess || (byEmail && codeLive)) {
    const method: IdentificationMethod = byAccess ? 'access-code' : 'email-code';
    const verified = { ...identity, code: byEmail ? null : identity.code, verified: { method, at: atom(now) } };
    outcome({ kind: 'identified', method });
    const agreement = audited(withIdentity(record, signerId, verified), now, 'identified', {
      actor: signerId,
      signerId,
      client,
      withDocuments: false,
      method,
    });
    return { agreement, events: [] };
  }
  if (identity.accessCode === null) {
    if (code === null) throw new PortalError('IDENTIFICATION_NO_CODE');
    if (!codeLive) throw new PortalError('IDENTIFICATION_CODE_EXPIRED', triesLeft);
  }
  const tries = identity.tries + 1;
  let agreement = audited(withIdentity(record, signerId, { ...identity, tries }), now, 'identification-failed', {
    actor: signerId,
    signerId,
    client,
    withDocuments: false,
  });
  if (tries < MAX_WRONG_CODES) {
    outcome({ kind: 'wrong', triesLeft: MAX_WRONG_CODES - tries });
    return { agreement, events: [] };
  }
  // The fifth: the link no longer works; the host may issue a new one.
  const locked = { ...identity, tries, locked: true, code: null };
  agreement = audited(
    withIdentity(agreement, signerId, locked, { signingLinkId: null }),
    now,
    'identification-locked',
    {
      actor: 'system',
      signerId,
      withDocuments: false,
    },
  );
  outcome({ kind: 'locked' });
  return { agreement, events: [] };
}
