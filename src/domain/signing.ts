import { PortalError } from '../errors.js';
import type { Storage } from '../ports.js';
import type {
  AgreementDocument,
  AgreementEventData,
  AgreementRecord,
  AgreementSigner,
  AuditEntry,
} from '../records.js';
import { documentOf, identificationOf, withoutImages } from '../records.js';
import { newId } from '../shared/ids.js';
import { atom } from '../shared/time.js';
import { createAgreementChanges } from './agreement-changes.js';
import { type ClientInfo, audited, sha256Hex, verifyTrail } from './audit-trail.js';
import { CERTIFICATE_LATER } from './certificate.js';
import { speechOf } from './locales/index.js';
import type { BrandingOf, ShownBranding } from './branding.js';
import type { Certificates } from './certificates.js';
import type { LinkSigner } from './download-links.js';
import type { DownloadService } from './downloads.js';
import {
  SIGNING_LINK_SECONDS,
  checkAccountId,
  agreementIdOf,
  declineInput,
  identifyInput,
  parseInput,
  signingLinkInput,
  signingSignatureInput,
} from './inputs.js';
import {
  CODE_TTL_MS,
  type IdentifyOutcome,
  MAX_WRONG_CODES,
  type SigningIdentification,
  accessCodeDigest,
  hashAccessCode,
  identify,
  mustIdentify,
  requestEmailCode,
  signingIdentification,
} from './signer-identity.js';
import type { SignerMail } from './signer-mail.js';
import { type SigningTokens, type TokenClaims, signingPageLink } from './signing-tokens.js';
import { accountActor, decline, isPastExpiry, issueLink, sign, view } from './signing-rules.js';
import { ERASED, isOpen } from '../records.js';

/**
 * Signing links and the signer's side of an agreement. The token (`signing-tokens.ts`) travels in
 * the link's fragment (never in a server log) and comes back as `Authorization: Bearer <token>`.
 * A signer who must identify (`shouldIdentify`, or a link with an access code) sees no document,
 * and may not sign or decline, until they have (`signer-identity.ts`).
 */

/** Another signer of the agreement, as a signer sees them: who, and whether they signed or declined; nothing to reach them by. */
type CoSigner = Pick<AgreementSigner, 'id' | 'firstName' | 'lastName' | 'signedAt' | 'declinedAt'>;

/** The consumer disclosure a signer is shown before signing (ESIGN §101(c)); the host may put its own. */
export interface Disclosure {
  version: string;
  text: string;
}

/** What a signer sees: the agreement (without signature images), themselves (with their own), and a link to each document. */
export interface SigningView {
  /** The agreement; in `signers`, the signer whole and each other signer as a `CoSigner`. */
  agreement: Omit<AgreementEventData, 'signers'> & { signers: (AgreementEventData['signers'][number] | CoSigner)[] };
  /** The signer, with their own signature image once they signed. */
  signer: AgreementSigner;
  /** Whether they must identify, and how; until they have, `documents` is empty. */
  identification: SigningIdentification;
  disclosure: Disclosure;
  /** Each document with a link to it, and to its completed copy once made (`null` before, and for a document that is not a PDF). */
  documents: (AgreementDocument & { link: string; signedLink: string | null })[];
  /** The language the page speaks (the agreement's `locale`, BCP 47; `en` when it has none). */
  locale: string;
  /** Who asks: the company's name, logo, colour and support address (option `branding`); `null` without one. */
  branding: ShownBranding | null;
}

export interface SigningServiceDeps {
  storage: Storage;
  clock: () => Date;
  signer: LinkSigner;
  tokens: SigningTokens;
  downloads: DownloadService;
  notify: () => void;
  /** Where certificates are kept; made as each agreement closes. */
  certificates: Certificates;
  /** Mail to signers: whether it can be sent, and the sender to wake once a step queued some. */
  mail: Pick<SignerMail, 'mailing' | 'kick'>;
  /** Told once a signature completed an agreement: its completed copies are owed. */
  copies?: { owed: (record: AgreementRecord) => void };
  /** The host's disclosure (`signing.disclosure`); `null`: the default of the agreement's language (`src/domain/locales/`). */
  disclosure: Disclosure | null;
  /** The account's branding, shown with the agreement. */
  brandingOf?: BrandingOf;
}

export function createSigningService(deps: SigningServiceDeps) {
  const { storage, clock, signer: keys, downloads, tokens, mail, disclosure } = deps;
  const apply = createAgreementChanges({
    storage,
    notify: deps.notify,
    closed: deps.certificates.prepare,
    mail: mail.mailing ? { queued: (record) => mail.kick(record.accountId, record.id) } : undefined,
    copies: deps.copies,
  });
  /** The disclosure an agreement's signers are shown: the host's, else the default in their language. */
  const disclosureOf = (record: AgreementRecord): Disclosure => disclosure ?? speechOf(record.locale).disclosure;
  /** Identification attempts in flight in this process, by link: one at a time, so a burst of guesses costs one scrypt at a time. */
  const identifying = new Map<string, Promise<unknown>>();

  /**
   * The agreement and signer a presented token stands for: 401 unless it is genuine and the
   * signer's newest link (or the link was revoked by wrong codes), 410 once expired.
   */
  async function redeem(token: string | null): Promise<{ claims: TokenClaims; record: AgreementRecord }> {
    const claims = token === null ? null : tokens.read(token);
    if (claims === null) throw new PortalError('SIGNING_TOKEN_INVALID');
    if (clock().getTime() >= claims.expires * 1000)
      throw new PortalError('SIGNING_LINK_EXPIRED', atom(new Date(claims.expires * 1000)));
    const record = await storage.getAgreement(claims.accountId, claims.agreementId);
    const signer = record?.signers.find((candidate) => candidate.id === claims.signerId);
    if (record == null || signer === undefined) throw new PortalError('SIGNING_TOKEN_INVALID');
    if (signer.signingLinkId !== claims.linkId) {
      if (signer.identity?.linkId === claims.linkId && signer.identity.locked)
        throw new PortalError('IDENTIFICATION_LOCKED', MAX_WRONG_CODES);
      throw new PortalError('SIGNING_LINK_REPLACED');
    }
    return { claims, record };
  }

  /** Refuses (403) a step of a signer who must identify first; checked inside the step, on the agreement as stored. */
  function identified(record: AgreementRecord, signerId: string): AgreementRecord {
    const signer = record.signers.find((candidate) => candidate.id === signerId);
    if (signer !== undefined && mustIdentify(signer)) throw new PortalError('IDENTIFICATION_REQUIRED');
    return record;
  }

  async function viewOf(record: AgreementRecord, signerId: string, baseUrl: string): Promise<SigningView> {
    // The signer's own signature image is theirs to see; the agreement's images are left out.
    const stored = record.signers.find((candidate) => candidate.id === signerId)!;
    const { signingLinkId: _link, identity: _identity, ...own } = stored;
    const agreement = withoutImages(record);
    const identification = signingIdentification(stored, mail.mailing);
    // Before identifying, whoever holds the link learns the agreement's name and sender, and nothing
    // of its documents or other signers.
    const shown = !mustIdentify(stored);
    return {
      agreement: {
        ...agreement,
        documents: shown ? agreement.documents : [],
        signers: agreement.signers
          .filter((one) => shown || one.id === signerId)
          .map((one) =>
            one.id === signerId
              ? one
              : {
                  id: one.id,
                  firstName: one.firstName,
                  lastName: one.lastName,
                  signedAt: one.signedAt,
                  declinedAt: one.declinedAt,
                },
          ),
      },
      signer: { ...own, identification: identificationOf(stored) },
      identification,
      disclosure: disclosureOf(record),
      documents: shown
        ? record.documents.map((document) => ({
            ...documentOf(document),
            link: downloads.link(
              { kind: 'document', accountId: record.accountId, agreementId: record.id, id: document.id },
              baseUrl,
              'signing',
            ).link,
            signedLink:
              document.signedFileKey === null
                ? null
                : downloads.link(
                    { kind: 'signed', accountId: record.accountId, agreementId: record.id, id: document.id },
                    baseUrl,
                    'signing',
                  ).link,
          }))
        : [],
      locale: record.locale ?? 'en',
      branding: (await deps.brandingOf?.(record.accountId)) ?? null,
    };
  }

  /** The step of a first view (`viewedAt`, `agreement-viewed`), once the signer may see the documents; else the agreement as it is. */
  function firstView(record: AgreementRecord, signerId: string, now: Date, client: ClientInfo) {
    const signer = record.signers.find((candidate) => candidate.id === signerId)!;
    return (!mustIdentify(signer) && view(record, signerId, now, client)) || { agreement: record, events: [] };
  }

  /** Runs `attempt` after the identification attempts of the same link in this process. */
  async function oneAtATime<T>(linkId: string, attempt: () => Promise<T>): Promise<T> {
    const before = identifying.get(linkId) ?? Promise.resolve();
    const turn = before.catch(() => undefined).then(attempt);
    const settled = turn.catch(() => undefined);
    identifying.set(linkId, settled);
    try {
      return await turn;
    } finally {
      if (identifying.get(linkId) === settled) identifying.delete(linkId);
    }
  }

  return {
    /**
     * A new signing link for one signer (72 h unless `expiresInSeconds` says otherwise, 60 s to 30
     * days): `<baseUrl>/sign#<token>`. Every older link of the signer stops working. With
     * `accessCode` the signer must give it before seeing anything (kept only as an scrypt hash);
     * with `send` the notifier mails the link. 409 once the signer signed or declined, or the
     * agreement closed.
     */
    async issueLink(
      accountId: string,
      agreementId: string,
      signerId: string,
      input: unknown,
      baseUrl: string,
      client: ClientInfo,
    ) {
      checkAccountId(accountId);
      agreementIdOf({ agreementId, signerId });
      // No body is no options; a body of null is not an object.
      const {
        expiresInSeconds = SIGNING_LINK_SECONDS.default,
        accessCode,
        send = false,
      } = parseInput(signingLinkInput, input === undefined ? {} : input, 'signingLink');
      if (send && !mail.mailing) throw new PortalError('NOTIFIER_MISSING');
      const hashed = accessCode === undefined ? null : await hashAccessCode(accessCode);
      const now = clock();
      const linkId = newId('sgl');
      const expires = Math.floor(now.getTime() / 1000) + expiresInSeconds;
      const options = { accessCode: hashed, send: send ? { baseUrl, expires } : null, mailing: mail.mailing };
      await apply(accountId, agreementId, now, (current) =>
        issueLink(current, signerId, linkId, now, accountActor(accountId), client, options),
      );
      const token = tokens.mint({ accountId, agreementId, signerId, linkId, expires });
      return { link: signingPageLink(baseUrl, token), expiresAt: atom(new Date(expires * 1000)) };
    },

    /**
     * What the signer sees; the first time they may see the documents also records `viewedAt`
     * (and `agreement-viewed`), unless `markViewed` is false (a `HEAD`, which shows nothing to anyone).
     */
    async view(token: string | null, baseUrl: string, client: ClientInfo, markViewed = true): Promise<SigningView> {
      const { claims, record } = await redeem(token);
      const now = clock();
      let current = record;
      const signer = record.signers.find((candidate) => candidate.id === claims.signerId)!;
      const opening = markViewed && signer.viewedAt === null && !mustIdentify(signer);
      if (opening || isPastExpiry(record, now)) {
        // The expiry may close it on the way: the signer reads it as it now is.
        const step = (latest: AgreementRecord) =>
          markViewed ? firstView(latest, claims.signerId, now, client) : { agreement: latest, events: [] };
        current = await apply(claims.accountId, claims.agreementId, now, step, { reading: true });
      }
      return viewOf(current, claims.signerId, baseUrl);
    },

    /** Mails the signer a new six-digit code (10 minutes), at most five an hour: the 202 says it is queued. */
    async requestEmailCode(token: string | null, client: ClientInfo): Promise<{ expiresAt: string }> {
      const { claims } = await redeem(token);
      const now = clock();
      const codeId = newId('sgc');
      await apply(claims.accountId, claims.agreementId, now, (current) =>
        requestEmailCode(current, claims.signerId, claims.linkId, codeId, now, mail.mailing, client),
      );
      return { expiresAt: atom(new Date(now.getTime() + CODE_TTL_MS)) };
    },

    /**
     * Checks the code the signer gives (the mailed one or the host's access code): the view with
     * the documents once it matches; 403 with the tries left when wrong or expired; the fifth wrong
     * code revokes the link (401).
     */
    async identify(token: string | null, input: unknown, baseUrl: string, client: ClientInfo): Promise<SigningView> {
      const { claims } = await redeem(token);
      const { code } = parseInput(identifyInput, input, 'identify');
      return oneAtATime(claims.linkId, async () => {
        // Read again in turn: an attempt before this one may have locked the link.
        const { record } = await redeem(token);
        const stored = record.signers.find((candidate) => candidate.id === claims.signerId)!.identity;
        const accessCode = stored?.linkId === claims.linkId ? stored.accessCode : null;
        const accessDigest = accessCode === null ? null : await accessCodeDigest(code, accessCode);
        const now = clock();
        let outcome: IdentifyOutcome | undefined;
        const updated = await apply(claims.accountId, claims.agreementId, now, (current) => {
          const step = identify(
            current,
            claims.signerId,
            claims.linkId,
            { code, accessDigest },
            keys,
            now,
            client,
            (result) => {
              outcome = result;
            },
          );
          return outcome?.kind === 'identified' ? firstView(step.agreement, claims.signerId, now, client) : step;
        });
        if (outcome?.kind === 'wrong') throw new PortalError('IDENTIFICATION_CODE_WRONG', outcome.triesLeft);
        if (outcome?.kind === 'locked') throw new PortalError('IDENTIFICATION_LOCKED', MAX_WRONG_CODES);
        return viewOf(updated, claims.signerId, baseUrl);
      });
    },

    /**
     * Signs as the token's signer, with the signature data-URL `input.signature`; `input.consent`
     * records their consent to the disclosure in force (`consented`, with its SHA-256) first.
     */
    async sign(token: string | null, input: unknown, baseUrl: string, client: ClientInfo): Promise<SigningView> {
      const { claims, record } = await redeem(token);
      const { signature, consent } = parseInput(signingSignatureInput, input, 'sign');
      const shown = disclosureOf(record);
      if (consent !== undefined && consent.disclosureVersion !== shown.version)
        throw new PortalError('DISCLOSURE_CHANGED', shown.version);
      const disclosureHash = sha256Hex(shown.text);
      const now = clock();
      const updated = await apply(claims.accountId, claims.agreementId, now, (current) => {
        let ready = identified(current, claims.signerId);
        if (consent !== undefined && isOpen(ready)) {
          ready = audited(ready, now, 'consented', {
            actor: claims.signerId,
            signerId: claims.signerId,
            client,
            withDocuments: false,
            disclosureHash,
          });
        }
        return sign(ready, claims.signerId, signature, now, claims.signerId, client);
      });
      return viewOf(updated, claims.signerId, baseUrl);
    },

    /** Declines as the token's signer, with an optional reason: the agreement closes. */
    async decline(token: string | null, input: unknown, baseUrl: string, client: ClientInfo): Promise<SigningView> {
      const { claims } = await redeem(token);
      const { reason = null } = parseInput(declineInput, input === undefined ? {} : input, 'decline');
      const now = clock();
      const updated = await apply(claims.accountId, claims.agreementId, now, (current) =>
        decline(identified(current, claims.signerId), claims.signerId, reason, now, client),
      );
      return viewOf(updated, claims.signerId, baseUrl);
    },

    /** The certificate of completion (a PDF) of an agreement that is signed or closed; 409 while it is open. */
    async certificate(accountId: string, agreementId: string): Promise<{ pdf: Buffer; agreementId: string }> {
      checkAccountId(accountId);
      agreementIdOf({ agreementId });
      const record = await storage.getAgreement(accountId, agreementId);
      if (record === null) throw new PortalError('AGREEMENT_NOT_FOUND', agreementId);
      if (isOpen(record)) throw new PortalError('AGREEMENT_STILL_OPEN', record.id, CERTIFICATE_LATER);
      return { pdf: await deps.certificates.get(record), agreementId };
    },

    /**
     * The agreement's audit trail, oldest first, whether its hash chain is intact, and the key its
     * digests of personal fields are keyed with (`null` once erased, or for a trail made before
     * keys): with it, whoever holds the agreement recomputes every `personal` and `state`. It tells
     * nothing the agreement does not show, and goes when its personal data is erased.
     */
    async audit(
      accountId: string,
      agreementId: string,
    ): Promise<{ data: AuditEntry[]; verified: boolean; personalKey: string | null }> {
      checkAccountId(accountId);
      agreementIdOf({ agreementId });
      const record = await storage.getAgreement(accountId, agreementId);
      if (record === null) throw new PortalError('AGREEMENT_NOT_FOUND', agreementId);
      const key = record.personalKey ?? null;
      return { data: record.audit, verified: verifyTrail(record), personalKey: key === ERASED ? null : key };
    },
  };
}

export type SigningService = ReturnType<typeof createSigningService>;
