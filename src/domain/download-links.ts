import { type KeyObject, createHmac, createSecretKey, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Logger } from '../shared/logger.js';

/**
 * Signed download links: stateless grants that any instance holding one of the keys can check.
 *
 * A link is `<API root>/downloads/<id>?account=…[&ticket=…&message=…|&agreement=…]&expires=…&signature=…`:
 * the id is an attachment's (`tca_`, under its ticket and message), a file's (`fsf_`) or an agreement
 * document's (`agd_`, under its agreement); `expires` is unix seconds and `signature` the base64url
 * HMAC-SHA256, under `signingKeys[0]`, of every other part (see `grantMessage`). Nothing is stored:
 * the link carries all it grants.
 */

/** What a link grants: one attachment, file or agreement document of one account, until `expires` (unix seconds, exclusive). */
export type DownloadGrant =
  | { kind: 'attachment'; accountId: string; ticketId: string; messageId: string; id: string; expires: number }
  | { kind: 'file'; accountId: string; id: string; expires: number }
  | { kind: 'document'; accountId: string; agreementId: string; id: string; expires: number }
  /** A document's completed copy: the document's id, `copy=signed` in the link. */
  | { kind: 'signed'; accountId: string; agreementId: string; id: string; expires: number };

/** The route's path under the API root; `:id` is the one path parameter. */
export const DOWNLOAD_ROUTE = '/downloads/:id';

/** The kind of download an id's prefix names. */
const KIND_OF_PREFIX: Record<string, DownloadGrant['kind']> = { tca: 'attachment', fsf: 'file', agd: 'document' };

/** 32 characters: 192 bits as base64, 128 as hex; below that a key is too easy to guess offline. */
const MIN_SIGNING_KEY_LENGTH = 32;

/**
 * The `signingKeys` option, checked: a non-empty array of strings of at least 32 characters. Without
 * it one random key is made, and a warning logged: its links die with the process and other
 * instances reject them.
 */
export function resolveSigningKeys(keys: readonly string[] | undefined, logger: Logger): string[] {
  if (keys === undefined) {
    logger.warn(
      {},
      'signingKeys is not set: download links and signing links are signed with a random key made at start; both stop working on restart, and other instances reject them',
    );
    return [randomBytes(32).toString('base64url')];
  }
  if (!Array.isArray(keys) || keys.length === 0) {
    throw new TypeError('signingKeys must be a non-empty array of strings (omit it to use a random key)');
  }
  keys.forEach((key, index) => {
    if (typeof key !== 'string' || key.length < MIN_SIGNING_KEY_LENGTH) {
      throw new TypeError(
        `signingKeys[${index}] must be a string of at least ${MIN_SIGNING_KEY_LENGTH} characters (e.g. \`openssl rand -base64 32\`)`,
      );
    }
  });
  return [...keys];
}

/**
 * The exact bytes signed. A JSON array keeps the parts apart whatever they hold (an account id is
 * any string), and the leading tag keeps these signatures from meaning anything elsewhere; each kind
 * has its own, so a link of one kind never verifies as another.
 */
function grantMessage(grant: DownloadGrant): string {
  switch (grant.kind) {
    case 'attachment':
      return JSON.stringify([
        'customer-portal/download/v1',
        grant.accountId,
        grant.ticketId,
        grant.messageId,
        grant.id,
        grant.expires,
      ]);
    case 'file':
      return JSON.stringify(['customer-portal/download/v1/file', grant.accountId, grant.id, grant.expires]);
    case 'document':
      return JSON.stringify([
        'customer-portal/download/v1/document',
        grant.accountId,
        grant.agreementId,
        grant.id,
        grant.expires,
      ]);
    case 'signed':
      return JSON.stringify([
        'customer-portal/download/v1/signed',
        grant.accountId,
        grant.agreementId,
        grant.id,
        grant.expires,
      ]);
  }
}

export interface LinkSigner {
  /** The base64url signature of `grant` under the first key. */
  sign(grant: DownloadGrant): string;
  /** Whether `signature` is the signature of `grant` under any of the keys; compared in constant time. */
  verify(grant: DownloadGrant, signature: string): boolean;
  /** The same for any message (a signing token's): its caller tags it, so that no two kinds of grant share one. */
  signText(message: string): string;
  verifyText(message: string, signature: string): boolean;
}

export function createLinkSigner(keys: readonly string[]): LinkSigner {
  const secrets: KeyObject[] = keys.map((key) => createSecretKey(Buffer.from(key, 'utf8')));
  const signWith = (secret: KeyObject, message: string) =>
    createHmac('sha256', secret).update(message).digest('base64url');
  const signText = (message: string) => signWith(secrets[0]!, message);
  function verifyText(message: string, signature: string): boolean {
    const presented = Buffer.from(signature, 'utf8');
    let valid = false;
    // Every key is tried, matched or not, so the time taken says nothing about which key matched.
    for (const secret of secrets) {
      const expected = Buffer.from(signWith(secret, message), 'utf8');
      // The length of a signature is public (always 43); comparing the string, not the decoded
      // bytes, also refuses other spellings of the same bytes.
      if (expected.length === presented.length && timingSafeEqual(expected, presented)) valid = true;
    }
    return valid;
  }
  return {
    sign: (grant) => signText(grantMessage(grant)),
    verify: (grant, signature) => verifyText(grantMessage(grant), signature),
    signText,
    verifyText,
  };
}

/** The absolute link for `grant` under the API root `baseUrl`. */
export function downloadLinkUrl(baseUrl: string, grant: DownloadGrant, signature: string): string {
  const query = new URLSearchParams({ account: grant.accountId });
  if (grant.kind === 'attachment') {
    query.set('ticket', grant.ticketId);
    query.set('message', grant.messageId);
  } else if (grant.kind === 'document' || grant.kind === 'signed') {
    query.set('agreement', grant.agreementId);
    if (grant.kind === 'signed') query.set('copy', 'signed');
  }
  query.set('expires', String(grant.expires));
  query.set('signature', signature);
  return `${baseUrl}${DOWNLOAD_ROUTE.replace(':id', encodeURIComponent(grant.id))}?${query}`;
}

/** Canonical decimal only: one grant has one spelling. */
export const UNIX_SECONDS = /^[1-9][0-9]{0,11}$/;

/**
 * The grant and signature a request to the download route presents, or `null` when a part is
 * missing, repeated, malformed or not of its kind (a `ticket` on a file's link, say). Ids are only
 * checked for being strings here: the signature decides whether they are genuine.
 */
export function readDownloadRequest(
  params: Record<string, string | undefined>,
  query: Record<string, string | string[] | undefined>,
): { grant: DownloadGrant; signature: string } | null {
  const { account, ticket, message, agreement, expires, signature, copy } = query;
  const id = params.id;
  const present = (part: unknown): part is string => typeof part === 'string' && part !== '';
  if (!present(id) || !present(account) || !present(expires) || !present(signature) || !UNIX_SECONDS.test(expires))
    return null;
  const kind = KIND_OF_PREFIX[id.slice(0, 3)];
  const base = { accountId: account, id, expires: Number(expires) };
  switch (kind) {
    case 'attachment':
      if (!present(ticket) || !present(message) || agreement !== undefined || copy !== undefined) return null;
      return { grant: { kind, ...base, ticketId: ticket, messageId: message }, signature };
    case 'file':
      if (ticket !== undefined || message !== undefined || agreement !== undefined || copy !== undefined) return null;
      return { grant: { kind, ...base }, signature };
    case 'document':
      if (
        !present(agreement) ||
        ticket !== undefined ||
        message !== undefined ||
        (copy !== undefined && copy !== 'signed')
      )
        return null;
      return { grant: { kind: copy === 'signed' ? 'signed' : 'document', ...base, agreementId: agreement }, signature };
    default:
      return null;
  }
}
