import type { AuditAction, ClosedReason } from '../../records.js';

/**
 * What the portal says to signers outside the signing page, one catalogue per language (`en.ts`,
 * `fr.ts`): the mails, the certificate of completion, and the default consumer disclosure. An
 * agreement's `locale` picks the catalogue of its language (`fr-CA` reads French), English when
 * the portal has none. The signing page's own words are in `ui/src/words.ts`.
 */
export interface Speech {
  /** The BCP 47 language, for dates. */
  lang: string;
  /** A date-time (ATOM) as this language writes it in a mail or the certificate. */
  when(atom: string): string;
  /** The disclosure a signer is shown when the host gives none (`signing.disclosure`). */
  disclosure: { version: string; text: string };
  mail: {
    hello(name: string): string;
    invitationSubject(sender: string, name: string): string;
    reminderSubject(name: string): string;
    invitation(sender: string, name: string): string;
    reminder(sender: string, name: string): string;
    openToSign: string;
    linkUntil(expiresAt: string, reminder: boolean): string;
    codeSubject(name: string): string;
    codeIntro(name: string, sender: string): string;
    codeWorks(minutes: number, sender: string): string;
    voidedSubject(name: string): string;
    voided(sender: string, name: string): string;
    voidReason(reason: string): string;
    completedSubject(name: string): string;
    completed(name: string, sender: string): string;
    copiesAttached: string;
    tooBig(mib: number): string;
    askForThem(tooBig: string, sender: string): string;
    linkedInstead(tooBig: string, until: string): string;
    support(email: string): string;
  };
  certificate: {
    title: string;
    titleOf(name: string): string;
    agreement: string;
    agreementId: string;
    outcome: string;
    signedByAll: string;
    closed(reason: string): string;
    sentBy: string;
    senderSignatureHash: string;
    created: string;
    signingOrder: string;
    order: Record<'parallel' | 'sequential', string>;
    expiresAt: string;
    closedAt: string;
    made: string;
    documents: string;
    name: string;
    size: string;
    bytes(count: number): string;
    signers: string;
    email: string;
    status: string;
    signedAt(at: string): string;
    declinedAt(at: string): string;
    notSigned: string;
    reason: string;
    from: string;
    unknownAddress: string;
    unknownAgent: string;
    identification: string;
    identifiedBy(method: string, at: string): string;
    identificationMissing: string;
    noneRequired: string;
    methods: Record<'email-code' | 'access-code', string>;
    signatureHash: string;
    unreadableSignature: string;
    auditTrail: string;
    /** Every action a trail holds: a language that misses one does not compile. */
    actions: Record<AuditAction, string>;
    by(actor: string, ip: string | null, detail: string | null): string;
    method(method: string): string;
    disclosureHash(hash: string): string;
    hash(hash: string): string;
    finalHash: string;
    none: string;
    chain: string;
    verified: string;
    notVerified: string;
    theSender(actor: string): string;
    thePortal: string;
    reasons: Record<ClosedReason, string>;
  };
}
