import { type KeyObject, createHmac, createSecretKey, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Logger } from '../shared/logger.js';

/**
 * Signed download links: stateless grants that any instance holding one of the keys can check.
 *
 * A link is `<API root>/downloads/<attachmentId>?account=…&ticket=…&message=…&expires=…&signature=…`,
 * where `expires` is unix seconds and `signature` the base64url HMAC-SHA256, under `signingKeys[0]`,
 * of every other part (see `grantMessage`). Nothing is stored: the link carries all it grants.
 */

/** What a link grants: one attachment of one account, under that message and ticket, until `expires`. */
export interface DownloadGrant {
  accountId: string;
  ticketId: string;
  messageId: string;
  attachmentId: string;
  /** Unix seconds: the link serves while the clock is before this second, and not from it on. */
  expires: number;
}

/** The route's path under the API root; `:attachmentId` is the one path parameter. */
export const DOWNLOAD_ROUTE = '/downloads/:attachmentId';
/** The query parameters a link carries. */
export const DOWNLOAD_QUERY = ['account', 'ticket', 'message', 'expires', 'signature'] as const;

/** 32 characters: 192 bits as base64, 128 as hex; below that a key is too easy to guess offline. */
export const MIN_SIGNING_KEY_LENGTH = 32;

/**
 * The `signingKeys` option, checked: a non-empty array of strings of at least 32 characters. Without
 * it one random key is made, and a warning logged: its links die with the process and other
 * instances reject them.
 */
export function resolveSigningKeys(keys: readonly string[] | undefined, logger: Logger): string[] {
  if (keys === undefined) {
    logger.warn(
      {},
      'signingKeys is not set: download links are signed with a random key made at start; they stop working on restart and other instances reject them',
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
 * any string), and the leading tag keeps these signatures from meaning anything elsewhere.
 */
function grantMessage(grant: DownloadGrant): string {
  return JSON.stringify(['customer-portal/download/v1', grant.accountId, grant.ticketId, grant.messageId, grant.attachmentId, grant.expires]);
}

export interface LinkSigner {
  /** The base64url signature of `grant` under the first key. */
  sign(grant: DownloadGrant): string;
  /** Whether `signature` is the signature of `grant` under any of the keys; compared in constant time. */
  verify(grant: DownloadGrant, signature: string): boolean;
}

export function createLinkSigner(keys: readonly string[]): LinkSigner {
  const secrets: KeyObject[] = keys.map((key) => createSecretKey(Buffer.from(key, 'utf8')));
  const signWith = (secret: KeyObject, grant: DownloadGrant) =>
    createHmac('sha256', secret).update(grantMessage(grant)).digest('base64url');
  return {
    sign: (grant) => signWith(secrets[0]!, grant),
    verify(grant, signature) {
      const presented = Buffer.from(signature, 'utf8');
      let valid = false;
      // Every key is tried, matched or not, so the time taken says nothing about which key matched.
      for (const secret of secrets) {
        const expected = Buffer.from(signWith(secret, grant), 'utf8');
        // The length of a signature is public (always 43); comparing the string, not the decoded
        // bytes, also refuses other spellings of the same bytes.
        if (expected.length === presented.length && timingSafeEqual(expected, presented)) valid = true;
      }
      return valid;
    },
  };
}

/** The absolute link for `grant` under the API root `baseUrl`. */
export function downloadLinkUrl(baseUrl: string, grant: DownloadGrant, signature: string): string {
  const query = new URLSearchParams({
    account: grant.accountId,
    ticket: grant.ticketId,
    message: grant.messageId,
    expires: String(grant.expires),
    signature,
  });
  return `${baseUrl}${DOWNLOAD_ROUTE.replace(':attachmentId', encodeURIComponent(grant.attachmentId))}?${query}`;
}

/** Canonical decimal only: one grant has one spelling. */
export const UNIX_SECONDS = /^[1-9][0-9]{0,11}$/;

/**
 * The grant and signature a request to the download route presents, or `null` when a part is
 * missing, repeated or malformed. Ids are only checked for being strings here: the signature
 * decides whether they are genuine.
 */
export function readDownloadRequest(
  params: Record<string, string | undefined>,
  query: Record<string, string | string[] | undefined>,
): { grant: DownloadGrant; signature: string } | null {
  const { account, ticket, message, expires, signature } = query;
  const attachmentId = params.attachmentId;
  const parts = [attachmentId, account, ticket, message, expires, signature];
  if (!parts.every((part): part is string => typeof part === 'string' && part !== '')) return null;
  if (!UNIX_SECONDS.test(expires as string)) return null;
  return {
    grant: {
      accountId: account as string,
      ticketId: ticket as string,
      messageId: message as string,
      attachmentId: attachmentId as string,
      expires: Number(expires),
    },
    signature: signature as string,
  };
}
