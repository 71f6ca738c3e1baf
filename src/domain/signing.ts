import { PortalError } from '../errors.js';
import type { Storage } from '../ports.js';
import type { AgreementEventData, AgreementRecord, AgreementSigner, AuditEntry } from '../records.js';
import { withoutImages } from '../records.js';
import { isId, newId } from '../shared/ids.js';
import { atom } from '../shared/time.js';
import { createAgreementChanges } from './agreement-changes.js';
import { verifyTrail } from './audit-trail.js';
import type { Certificates } from './certificates.js';
import type { LinkSigner } from './download-links.js';
import type { DownloadService } from './downloads.js';
import { SIGNING_LINK_SECONDS, checkAccountId, declineInput, parseInput, signingLinkInput, signingSignatureInput } from './inputs.js';
import { type ClientInfo, decline, isOpen, isPastExpiry, issueLink, sign, view } from './signing-rules.js';

/**
 * Signing links and the signer's side of an agreement.
 *
 * A signing token is `<payload>.<signature>`: the payload is base64url JSON of
 * `[accountId, agreementId, signerId, linkId, expires]` (unix seconds), the signature the base64url
 * HMAC-SHA256 under `signingKeys[0]` of the tag `customer-portal/signing/v1` and the payload, so any
 * instance with the keys checks it. The link id is stored on the signer: a new link replaces it,
 * and a token naming an older one is refused. The token travels in the link's fragment (never in a
 * server log) and comes back as `Authorization: Bearer <token>`.
 */

const TOKEN_TAG = 'customer-portal/signing/v1';

interface TokenClaims {
  accountId: string;
  agreementId: string;
  signerId: string;
  linkId: string;
  expires: number;
}

/** Another signer of the agreement, as a signer sees them: who, and whether they signed or declined; nothing to reach them by. */
type CoSigner = Pick<AgreementSigner, 'id' | 'firstName' | 'lastName' | 'signedAt' | 'declinedAt'>;

/** What a signer sees: the agreement (without signature images), themselves (with their own), and a link to each document. */
export interface SigningView {
  /** The agreement; in `signers`, the signer whole and each other signer as a `CoSigner`. */
  agreement: Omit<AgreementEventData, 'signers'> & { signers: (AgreementEventData['signers'][number] | CoSigner)[] };
  /** The signer, with their own signature image once they signed. */
  signer: AgreementSigner;
  documents: { id: string; documentName: string; fileSize: number; fileHash: string; link: string }[];
}

export interface SigningServiceDeps {
  storage: Storage;
  clock: () => Date;
  signer: LinkSigner;
  downloads: DownloadService;
  notify: () => void;
  /** Where certificates are kept; made as each agreement closes. */
  certificates: Certificates;
}

export function createSigningService(deps: SigningServiceDeps) {
  const { storage, clock, signer: keys, downloads } = deps;
  const apply = createAgreementChanges({ storage, notify: deps.notify, closed: deps.certificates.prepare });

  function mint(claims: TokenClaims): string {
    const payload = Buffer.from(JSON.stringify([claims.accountId, claims.agreementId, claims.signerId, claims.linkId, claims.expires])).toString('base64url');
    return `${payload}.${keys.signText(`${TOKEN_TAG}.${payload}`)}`;
  }

  /** The claims of a genuine token, or `null` for anything else (malformed, altered, another key's). */
  function read(token: string): TokenClaims | null {
    const dot = token.lastIndexOf('.');
    if (dot <= 0 || token.length > 2048) return null;
    const payload = token.slice(0, dot);
    if (!keys.verifyText(`${TOKEN_TAG}.${payload}`, token.slice(dot + 1))) return null;
    try {
      const [accountId, agreementId, signerId, linkId, expires] = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as unknown[];
      if (![accountId, agreementId, signerId, linkId].every((part) => typeof part === 'string') || !Number.isSafeInteger(expires)) return null;
      return { accountId, agreementId, signerId, linkId, expires } as TokenClaims;
    } catch {
      return null;
    }
  }

  /**
   * The agreement and signer a presented token stands for: 401 unless it is genuine and the
   * signer's newest link, 410 once expired.
   */
  async function redeem(token: string | null): Promise<{ claims: TokenClaims; record: AgreementRecord }> {
    const claims = token === null ? null : read(token);
    if (claims === null) throw new PortalError('SIGNING_TOKEN_INVALID');
    if (clock().getTime() >= claims.expires * 1000) throw new PortalError('SIGNING_LINK_EXPIRED', atom(new Date(claims.expires * 1000)));
    const record = await storage.getAgreement(claims.accountId, claims.agreementId);
    const signer = record?.signers.find((candidate) => candidate.id === claims.signerId);
    if (record == null || signer === undefined) throw new PortalError('SIGNING_TOKEN_INVALID');
    if (signer.signingLinkId !== claims.linkId) throw new PortalError('SIGNING_LINK_REPLACED');
    return { claims, record };
  }

  function viewOf(record: AgreementRecord, signerId: string, baseUrl: string): SigningView {
    // The signer's own signature image is theirs to see; the agreement's images are left out.
    const { signingLinkId: _link, ...signer } = record.signers.find((candidate) => candidate.id === signerId)!;
    const agreement = withoutImages(record);
    return {
      agreement: {
        ...agreement,
        signers: agreement.signers.map((one) =>
          one.id === signerId ? one : { id: one.id, firstName: one.firstName, lastName: one.lastName, signedAt: one.signedAt, declinedAt: one.declinedAt },
        ),
      },
      signer,
      documents: record.documents.map((document) => ({
        ...document,
        link: downloads.link({ kind: 'document', accountId: record.accountId, agreementId: record.id, id: document.id }, baseUrl, 'signing').link,
      })),
    };
  }

  function checkIds(agreementId: string, signerId: string): void {
    if (!isId('agr', agreementId)) throw new PortalError('ID_MALFORMED', 'agreementId', 'an agreement', 'agr');
    if (!isId('ags', signerId)) throw new PortalError('ID_MALFORMED', 'signerId', 'a signer', 'ags');
  }

  return {
    /**
     * A new signing link for one signer (72 h unless `expiresInSeconds` says otherwise, 60 s to 30
     * days): `<baseUrl>/sign#<token>`. Every older link of the signer stops working. 409 once the
     * signer signed or declined, or the agreement closed.
     */
    async issueLink(accountId: string, agreementId: string, signerId: string, input: unknown, baseUrl: string, client: ClientInfo) {
      checkAccountId(accountId);
      checkIds(agreementId, signerId);
      // No body is no options; a body of null is not an object.
      const { expiresInSeconds = SIGNING_LINK_SECONDS.default } = parseInput(signingLinkInput, input === undefined ? {} : input, 'signingLink');
      const now = clock();
      const linkId = newId('sgl');
      await apply(accountId, agreementId, now, (current) => issueLink(current, signerId, linkId, now, accountId, client));
      const expires = Math.floor(now.getTime() / 1000) + expiresInSeconds;
      const token = mint({ accountId, agreementId, signerId, linkId, expires });
      return { link: `${baseUrl}/sign#${token}`, expiresAt: atom(new Date(expires * 1000)) };
    },

    /**
     * What the signer sees; the first time also records `viewedAt` (and `agreement-viewed`), unless
     * `markViewed` is false (a `HEAD`, which shows nothing to anyone).
     */
    async view(token: string | null, baseUrl: string, client: ClientInfo, markViewed = true): Promise<SigningView> {
      const { claims, record } = await redeem(token);
      const now = clock();
      let current = record;
      const firstView = markViewed && record.signers.find((candidate) => candidate.id === claims.signerId)!.viewedAt === null;
      if (firstView || isPastExpiry(record, now)) {
        // The expiry may close it on the way: the signer reads it as it now is.
        const step = (latest: AgreementRecord) => view(latest, claims.signerId, now, client) ?? { agreement: latest, events: [] };
        current = await apply(claims.accountId, claims.agreementId, now, step, { reading: true });
      }
      return viewOf(current, claims.signerId, baseUrl);
    },

    /** Signs as the token's signer, with the signature data-URL `input.signature`. */
    async sign(token: string | null, input: unknown, baseUrl: string, client: ClientInfo): Promise<SigningView> {
      const { claims } = await redeem(token);
      const { signature } = parseInput(signingSignatureInput, input, 'sign');
      const now = clock();
      const updated = await apply(claims.accountId, claims.agreementId, now, (current) =>
        sign(current, claims.signerId, signature, now, claims.signerId, client),
      );
      return viewOf(updated, claims.signerId, baseUrl);
    },

    /** Declines as the token's signer, with an optional reason: the agreement closes. */
    async decline(token: string | null, input: unknown, baseUrl: string, client: ClientInfo): Promise<SigningView> {
      const { claims } = await redeem(token);
      const { reason = null } = parseInput(declineInput, input === undefined ? {} : input, 'decline');
      const now = clock();
      const updated = await apply(claims.accountId, claims.agreementId, now, (current) => decline(current, claims.signerId, reason, now, client));
      return viewOf(updated, claims.signerId, baseUrl);
    },

    /** The certificate of completion (a PDF) of an agreement that is signed or closed; 409 while it is open. */
    async certificate(accountId: string, agreementId: string): Promise<{ pdf: Buffer; agreementId: string }> {
      checkAccountId(accountId);
      if (!isId('agr', agreementId)) throw new PortalError('ID_MALFORMED', 'agreementId', 'an agreement', 'agr');
      const record = await storage.getAgreement(accountId, agreementId);
      if (record === null) throw new PortalError('AGREEMENT_NOT_FOUND', agreementId);
      if (isOpen(record)) throw new PortalError('AGREEMENT_STILL_OPEN', record.id);
      return { pdf: await deps.certificates.get(record), agreementId };
    },

    /** The agreement's audit trail, oldest first, and whether its hash chain is intact. */
    async audit(accountId: string, agreementId: string): Promise<{ data: AuditEntry[]; verified: boolean }> {
      checkAccountId(accountId);
      if (!isId('agr', agreementId)) throw new PortalError('ID_MALFORMED', 'agreementId', 'an agreement', 'agr');
      const record = await storage.getAgreement(accountId, agreementId);
      if (record === null) throw new PortalError('AGREEMENT_NOT_FOUND', agreementId);
      return { data: record.audit, verified: verifyTrail(record) };
    },
  };
}

export type SigningService = ReturnType<typeof createSigningService>;
