import { PortalError, isPortalError } from '../errors.js';
import type { AgreementRecord, AgreementSignerRecord, EventRecord } from '../records.js';
import { ERASED, erasedEntry, erasedValue, isOpen, withoutImages } from '../records.js';
import { atom } from '../shared/time.js';
import { type ClientInfo, NO_CLIENT, type Step, audited, signatureHash } from './audit-trail.js';
import { newEvent } from './events.js';
import { newId } from '../shared/ids.js';
import { currentIdentity, identityForLink } from './signer-identity.js';
import { queueMail } from './signer-mail-queue.js';

/**
 * The rules of signing an agreement, as pure functions of a stored agreement: who may sign or
 * decline and when, what each step changes, the events and the audit entry it adds. Every path
 * that changes an agreement (the host's `sign`, a signer's link, the expiry) goes through these,
 * inside one `updateAgreement`, so a rule lives here once.
 */

/** Who took a step: the host through the API (`account:<id>`), a signer (their id), or the portal itself. */
export const accountActor = (accountId: string) => `account:${accountId}`;
const SYSTEM_ACTOR = 'system';

/**
 * What keeps an agreement's trail (kept with the agreement, read with it) bounded whatever its
 * account does: reminder rounds per agreement, after which no more are scheduled, and links made
 * per signer: one for each reminder round (a host answers a reminder with a fresh link) and ten
 * more. With five signers a trail holds under 400 entries.
 */
const MAX_REMINDER_ROUNDS = 30;
/**
 * The `nextReminderAt` of an agreement whose rounds are all made: never due, and not `null`, which
 * says no round was ever scheduled (made while reminders were off) and has the tick schedule one.
 */
const NO_MORE_ROUNDS = '9999-12-31T23:59:59+00:00';
const MAX_LINKS_PER_SIGNER = MAX_REMINDER_ROUNDS + 10;

/** The data of an agreement event: the agreement without signature images, and the signer it concerns. */
function eventOf(type: string, record: AgreementRecord, now: Date, signerId?: string): EventRecord {
  const data = signerId === undefined ? withoutImages(record) : { ...withoutImages(record), signerId };
  // Keyed by the agreement: a receiver gets one agreement's events in the order they happened.
  return newEvent(record.accountId, type, data, now, record.id);
}

/** Whether `expiresAt` has come while the agreement is still open: it must then be closed before anything else. */
export const isPastExpiry = (record: AgreementRecord, now: Date) =>
  isOpen(record) && record.expiresAt !== null && now.getTime() >= Date.parse(record.expiresAt);

/** Closes an agreement whose `expiresAt` has come: `closedReason: expired`, `agreement-expired`. */
export function expire(record: AgreementRecord, now: Date): Step {
  const closed = audited({ ...record, closedAt: atom(now), closedReason: 'expired' }, now, 'expired', {
    actor: SYSTEM_ACTOR,
    withDocuments: false,
  });
  return { agreement: closed, events: [eventOf('agreement-expired', closed, now)] };
}

function signerOf(record: AgreementRecord, signerId: string): AgreementSignerRecord {
  const signer = record.signers.find((candidate) => candidate.id === signerId);
  if (signer === undefined) throw new PortalError('SIGNER_NOT_FOUND', signerId, record.id);
  return signer;
}

/**
 * The 404 or 409 that keeps `signerId` from signing or declining now; `null` when they may. With
 * `inTurn: false`, a signer whose turn has not come in a sequential agreement passes (a link may be
 * made for them ahead of it).
 */
function refusalToAct(record: AgreementRecord, signerId: string, inTurn = true): PortalError | null {
  const signer = signerOf(record, signerId);
  if (signer.signedAt !== null) return new PortalError('SIGNER_ALREADY_SIGNED', signerId, record.id);
  if (signer.declinedAt !== null) return new PortalError('SIGNER_DECLINED', signerId, record.id);
  if (record.closedReason !== null) return new PortalError('AGREEMENT_CLOSED', record.id, record.closedReason);
  if (record.status === 'signed') return new PortalError('AGREEMENT_CLOSED', record.id, 'signed');
  if (inTurn && record.signingOrder === 'sequential') {
    const first = record.signers.find((candidate) => candidate.signedAt === null);
    if (first !== undefined && first.id !== signerId) return new PortalError('SIGNER_NOT_YET', signerId, first.id);
  }
  return null;
}

/**
 * Records `signerId`'s signature: `agreement-signer-signed`, and for the last signer the agreement
 * `signed` and `agreement-signed`, in the same step (so once, whichever instance stores it).
 */
export function sign(
  record: AgreementRecord,
  signerId: string,
  signature: string,
  now: Date,
  actor: string,
  client: ClientInfo,
): Step {
  const refusal = refusalToAct(record, signerId);
  if (refusal !== null) throw refusal;
  const signers = record.signers.map((candidate) =>
    candidate.id === signerId
      ? { ...candidate, signature, signatureHash: signatureHash(signature), signedAt: atom(now) }
      : candidate,
  );
  const allSigned = signers.every((candidate) => candidate.signedAt !== null);
  const signed = audited({ ...record, signers, status: allSigned ? 'signed' : record.status }, now, 'signed', {
    actor,
    signerId,
    client,
  });
  const events = [eventOf('agreement-signer-signed', signed, now, signerId)];
  if (allSigned) events.push(eventOf('agreement-signed', signed, now));
  return { agreement: signed, events };
}

/** `signerId` declines: the agreement closes (`closedReason: declined`), `agreement-declined`. */
export function decline(
  record: AgreementRecord,
  signerId: string,
  reason: string | null,
  now: Date,
  client: ClientInfo,
): Step {
  const refusal = refusalToAct(record, signerId);
  if (refusal !== null) throw refusal;
  const at = atom(now);
  const signers = record.signers.map((candidate) =>
    candidate.id === signerId ? { ...candidate, declinedAt: at, declineReason: reason } : candidate,
  );
  const closed = audited({ ...record, signers, closedAt: at, closedReason: 'declined' }, now, 'declined', {
    actor: signerId,
    signerId,
    client,
    detail: reason,
  });
  return { agreement: closed, events: [eventOf('agreement-declined', closed, now, signerId)] };
}

/** The 409 that keeps a sender's change (void, a correction) from an agreement that is signed or closed; `null` while it is open. */
function refusalToChange(record: AgreementRecord): PortalError | null {
  if (record.status === 'signed') return new PortalError('AGREEMENT_CLOSED', record.id, 'signed');
  if (record.closedReason !== null) return new PortalError('AGREEMENT_CLOSED', record.id, record.closedReason);
  return null;
}

/**
 * The sender voids an open agreement: `closedReason: voided`, every signer's link revoked (so each
 * answers 401), `agreement-voided`, and the reason in the trail. With `mail`, each signer who had
 * a link is told.
 */
export function voidAgreement(
  record: AgreementRecord,
  reason: string,
  now: Date,
  actor: string,
  client: ClientInfo,
  mail: boolean,
): Step {
  const refusal = refusalToChange(record);
  if (refusal !== null) throw refusal;
  const linked = record.signers.filter((signer) => signer.signingLinkId !== null && signer.signedAt === null);
  const signers = record.signers.map((signer): AgreementSignerRecord => ({ ...signer, signingLinkId: null }));
  // Mail still owed for links and codes is void with them.
  const unsent: AgreementRecord = {
    ...record,
    signers,
    mail: record.mail.filter((one) => one.kind === 'agreement-completed'),
  };
  const told = mail
    ? linked.reduce(
        (queued, signer) => queueMail(queued, { kind: 'agreement-voided', signerId: signer.id }, now),
        unsent,
      )
    : unsent;
  const closed = audited({ ...told, closedAt: atom(now), closedReason: 'voided' }, now, 'voided', {
    actor,
    client,
    detail: reason,
    withDocuments: false,
  });
  return { agreement: closed, events: [eventOf('agreement-voided', closed, now)] };
}

/** An agreement's personal values, wherever its shape is kept (the record, an event's data, an answer): `ERASED`. */
function erasedSigners<T extends Pick<AgreementSignerRecord, 'firstName' | 'lastName' | 'email' | 'declineReason'>>(
  signers: readonly T[],
): T[] {
  return signers.map((signer) => ({
    ...signer,
    firstName: ERASED,
    lastName: ERASED,
    email: ERASED,
    declineReason: erasedValue(signer.declineReason),
  }));
}

/** An event's data or an answer's body, erased where it is agreement `agreementId`'s shape; anything else as it is. */
export function erasedData(data: unknown, agreementId: string): unknown {
  if (typeof data !== 'object' || data === null) return data;
  const shape = data as { id?: unknown; signers?: unknown };
  if (shape.id !== agreementId || !Array.isArray(shape.signers)) return data;
  return { ...shape, signers: erasedSigners(shape.signers) };
}

/** Whether the agreement's personal data is erased already. */
const isErased = (record: Pick<AgreementRecord, 'personalKey'>) => record.personalKey === ERASED;

/**
 * Erases the signers' personal data from a signed or closed agreement: their names, e-mails and
 * decline reasons, and every trail entry's IP, user agent and detail, become `ERASED`; links are
 * revoked, mail still owed dropped, and the key the trail committed to them with discarded, so no
 * digest left can confirm a guess. An `erased` entry ends the trail; every earlier hash is kept
 * (`domain/audit-trail.ts`). 409 while open (void it first); once erased, unchanged.
 */
export function erasePersonalData(
  record: AgreementRecord,
  now: Date,
  actor: string,
  client: ClientInfo,
): AgreementRecord {
  if (isOpen(record))
    throw new PortalError(
      'AGREEMENT_STILL_OPEN',
      record.id,
      `void it first (POST /agreements/${record.id}/void), then erase its personal data.`,
    );
  if (isErased(record)) return record;
  const audit = record.audit.map(erasedEntry);
  const signers = erasedSigners(record.signers).map((signer) => ({ ...signer, signingLinkId: null }));
  const erased: AgreementRecord = { ...record, signers, audit, mail: [], personalKey: ERASED };
  return audited(erased, now, 'erased', {
    actor,
    client,
    detail: 'names, e-mails, IP addresses, user agents and details erased',
    withDocuments: false,
  });
}

/** What a sender may correct of a signer who has not signed. */
export interface SignerCorrection {
  firstName?: string;
  lastName?: string;
  email?: string;
}

/**
 * The sender corrects a signer's name or e-mail while the agreement is open and they have not
 * signed: their link is revoked (a link sent to a wrong address must stop working), mail owed to
 * them dropped, and the trail records which fields changed (their values are in its evidence).
 */
export function correctSigner(
  record: AgreementRecord,
  signerId: string,
  correction: SignerCorrection,
  now: Date,
  actor: string,
  client: ClientInfo,
): Step {
  const signer = signerOf(record, signerId);
  const refusal =
    refusalToChange(record) ??
    (signer.signedAt !== null ? new PortalError('SIGNER_ALREADY_SIGNED', signerId, record.id) : null);
  if (refusal !== null) throw refusal;
  const changed = (['firstName', 'lastName', 'email'] as const).filter(
    (field) => correction[field] !== undefined && correction[field] !== signer[field],
  );
  const signers = record.signers.map((candidate) =>
    candidate.id === signerId ? { ...candidate, ...correction, signingLinkId: null } : candidate,
  );
  const mail = record.mail.filter((one) => one.signerId !== signerId);
  const corrected = audited({ ...record, signers, mail }, now, 'signer-corrected', {
    actor,
    signerId,
    client,
    detail:
      changed.length === 0 ? 'nothing changed; the link revoked' : `corrected: ${changed.join(', ')}; the link revoked`,
    withDocuments: false,
  });
  return { agreement: corrected, events: [] };
}

/** The signer's first opening of the agreement: `viewedAt`, `agreement-viewed`; `null` when it was opened before. */
export function view(record: AgreementRecord, signerId: string, now: Date, client: ClientInfo): Step | null {
  if (signerOf(record, signerId).viewedAt !== null) return null;
  const signers = record.signers.map((candidate) =>
    candidate.id === signerId ? { ...candidate, viewedAt: atom(now) } : candidate,
  );
  const viewed = audited({ ...record, signers }, now, 'viewed', { actor: signerId, signerId, client });
  return { agreement: viewed, events: [eventOf('agreement-viewed', viewed, now, signerId)] };
}

/** What a new signing link carries beyond its id: the access code's hash, and whether it is mailed (and under which API root). */
export interface LinkOptions {
  accessCode?: string | null;
  /** Mail the link (`signing-invitation`), made under `baseUrl`, good until `expires` (unix seconds). */
  send?: { baseUrl: string; expires: number } | null;
  /** Whether a notifier can mail the signer (a code, the link). */
  mailing: boolean;
}

/** A new signing link for `signerId`, named `linkId`: every older link of theirs stops working. */
export function issueLink(
  record: AgreementRecord,
  signerId: string,
  linkId: string,
  now: Date,
  actor: string,
  client: ClientInfo,
  options: LinkOptions,
): Step {
  const refusal = refusalToAct(record, signerId, false);
  if (refusal !== null) throw refusal;
  const signer = signerOf(record, signerId);
  const accessCode = options.accessCode ?? null;
  // A signer who must identify, with no code to mail them and none given: they could never open it.
  if (signer.shouldIdentify && accessCode === null && !options.mailing)
    throw new PortalError('ACCESS_CODE_NEEDED', signerId);
  if (options.send != null && !options.mailing) throw new PortalError('NOTIFIER_MISSING');
  const issued = record.audit.filter((entry) => entry.action === 'link-issued' && entry.signerId === signerId).length;
  if (issued >= MAX_LINKS_PER_SIGNER) throw new PortalError('SIGNING_LINKS_LIMIT', signerId, MAX_LINKS_PER_SIGNER);
  const identity = identityForLink(signer, linkId, accessCode, now);
  const signers = record.signers.map((candidate) =>
    candidate.id === signerId ? { ...candidate, signingLinkId: linkId, identity } : candidate,
  );
  let withLink = audited({ ...record, signers }, now, 'link-issued', { actor, signerId, client, withDocuments: false });
  if (options.send != null) {
    const kind = actor === SYSTEM_ACTOR ? 'signing-reminder' : 'signing-invitation';
    withLink = queueMail(
      withLink,
      { kind, signerId, link: { id: linkId, expires: options.send.expires }, baseUrl: options.send.baseUrl },
      now,
    );
  }
  return { agreement: withLink, events: [] };
}

/** The signers a reminder is for: those who may sign now (in a sequential agreement, the first unsigned). */
function signersToRemind(record: AgreementRecord): AgreementSignerRecord[] {
  const waiting = record.signers.filter((signer) => signer.signedAt === null && signer.declinedAt === null);
  return record.signingOrder === 'sequential' ? waiting.slice(0, 1) : waiting;
}

/**
 * A reminder round, when `nextReminderAt` has come: `agreement-reminder-due` and an audit entry per
 * signer to remind, and the next round `intervalMs` on (past `now`: rounds missed while no tick ran
 * are not made up). `null` when no round is due, which is what a second instance finds once the
 * first stored its round: one round per interval, whichever instance makes it. With reminders off
 * (`intervalMs` undefined) a scheduled round is dropped. An open agreement with no round scheduled
 * (made while reminders were off) gets one, on its own rhythm: the first multiple of `intervalMs`
 * after its creation that is still to come.
 */
export function remind(
  record: AgreementRecord,
  now: Date,
  intervalMs: number | undefined,
  mail?: { baseUrl: string; linkSeconds: number },
): Step | null {
  if (isOpen(record) && record.nextReminderAt === null && intervalMs !== undefined) {
    const created = Date.parse(record.createdAt);
    const rounds = Math.max(1, Math.ceil((now.getTime() - created + 1) / intervalMs));
    return { agreement: { ...record, nextReminderAt: atom(new Date(created + rounds * intervalMs)) }, events: [] };
  }
  if (!isOpen(record) || record.nextReminderAt === null || now.getTime() < Date.parse(record.nextReminderAt))
    return null;
  if (intervalMs === undefined) return { agreement: { ...record, nextReminderAt: null }, events: [] };
  let next = Date.parse(record.nextReminderAt);
  while (next <= now.getTime()) next += intervalMs;
  const rounds = new Set(record.audit.filter((entry) => entry.action === 'reminder').map((entry) => entry.at)).size + 1;
  let reminded: AgreementRecord = {
    ...record,
    nextReminderAt: rounds >= MAX_REMINDER_ROUNDS ? NO_MORE_ROUNDS : atom(new Date(next)),
  };
  const events: EventRecord[] = [];
  for (const signer of signersToRemind(record)) {
    reminded = audited(reminded, now, 'reminder', { actor: SYSTEM_ACTOR, signerId: signer.id, withDocuments: false });
    events.push(eventOf('agreement-reminder-due', reminded, now, signer.id));
    if (mail !== undefined) reminded = remindByMail(reminded, signer.id, now, mail);
  }
  return { agreement: reminded, events };
}

/**
 * A reminder's mail: a fresh link (the older one stops working; the host's access code carries
 * over), mailed. A signer at the most links one may have is reminded by the event alone.
 */
function remindByMail(
  record: AgreementRecord,
  signerId: string,
  now: Date,
  mail: { baseUrl: string; linkSeconds: number },
): AgreementRecord {
  const signer = signerOf(record, signerId);
  const accessCode = currentIdentity(signer)?.accessCode ?? null;
  const linkId = newId('sgl');
  const send = { baseUrl: mail.baseUrl, expires: Math.floor(now.getTime() / 1000) + mail.linkSeconds };
  try {
    return issueLink(record, signerId, linkId, now, SYSTEM_ACTOR, NO_CLIENT, { accessCode, send, mailing: true })
      .agreement;
  } catch (error) {
    if (isPortalError(error, 'SIGNING_LINKS_LIMIT')) return record;
    throw error;
  }
}

/** The audit entry of an agreement's creation. */
export const created = (record: AgreementRecord, now: Date, client: ClientInfo): AgreementRecord =>
  audited(record, now, 'created', { actor: accountActor(record.accountId), client });
