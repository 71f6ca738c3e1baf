import type { LinkSigner } from './download-links.js';

/**
 * Signing tokens: `<payload>.<signature>`, the payload base64url JSON of `[accountId, agreementId,
 * signerId, linkId, expires]` (unix seconds), the signature the base64url HMAC-SHA256, under
 * `signingKeys[0]`, of the tag `customer-portal/signing/v1` and the payload, so any instance with the
 * keys checks it. Nothing of a token is stored: the link id is kept on the signer (a new link
 * replaces it), and a mail that carries a link keeps the id and expiry it is minted from.
 */
const TOKEN_TAG = 'customer-portal/signing/v1';

export interface TokenClaims {
  accountId: string;
  agreementId: string;
  signerId: string;
  linkId: string;
  expires: number;
}

export function createSigningTokens(keys: LinkSigner) {
  return {
    mint(claims: TokenClaims): string {
      const payload = Buffer.from(
        JSON.stringify([claims.accountId, claims.agreementId, claims.signerId, claims.linkId, claims.expires]),
      ).toString('base64url');
      return `${payload}.${keys.signText(`${TOKEN_TAG}.${payload}`)}`;
    },

    /** The claims of a genuine token, or `null` for anything else (malformed, altered, another key's). */
    read(token: string): TokenClaims | null {
      const dot = token.lastIndexOf('.');
      if (dot <= 0 || token.length > 2048) return null;
      const payload = token.slice(0, dot);
      if (!keys.verifyText(`${TOKEN_TAG}.${payload}`, token.slice(dot + 1))) return null;
      try {
        const [accountId, agreementId, signerId, linkId, expires] = JSON.parse(
          Buffer.from(payload, 'base64url').toString('utf8'),
        ) as unknown[];
        if (
          ![accountId, agreementId, signerId, linkId].every((part) => typeof part === 'string') ||
          !Number.isSafeInteger(expires)
        )
          return null;
        return { accountId, agreementId, signerId, linkId, expires } as TokenClaims;
      } catch {
        return null;
      }
    },
  };
}

export type SigningTokens = ReturnType<typeof createSigningTokens>;

/** The signing page's address for a token: `<API root>/sign#<token>` (the fragment never reaches a server log). */
export const signingPageLink = (baseUrl: string, token: string) => `${baseUrl}/sign#${token}`;
