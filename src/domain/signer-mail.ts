import { NOTHING, createBackgroundRuns, updateUnlessNothing } from './agreement-work.js';
import { describeError, errorMessage } from '../errors.js';
import { buffer } from 'node:stream/consumers';
import type { BlobStore, Notifier, NotifierMessage, Storage } from '../ports.js';
import {
  type AgreementRecord,
  type AgreementSignerRecord,
  type MailKind,
  type PendingMail,
  isOpen,
} from '../records.js';
import type { Logger } from '../shared/logger.js';
import { atom } from '../shared/time.js';
import type { Certificates } from './certificates.js';
import type { LinkSigner } from './download-links.js';
import type { DownloadService } from './downloads.js';
import { signedName } from './completed-copy.js';
import { CODE_TTL_MS, emailCode } from './signer-identity.js';
import { type SigningTokens, signingPageLink } from './signing-tokens.js';

/** The name mails speak in: `branding.name`, else the agreement's sender. */
export type SenderName = (accountId: string, record: AgreementRecord) => Promise<string>;

/** Attachments of a completion mail, at most: over it, the signed documents are left out. */
/** How long a completion mail's links to the copies serve: a week. */
const MAIL_LINK_SECONDS = 7 * 24 * 3600;
const MAX_ATTACHED_BYTES = 10 * 1024 * 1024;
/** A send that takes longer is a failed attempt; the lease outlasts it, so no second instance sends meanwhile. */
const SEND_TIMEOUT_MS = 30_000;
const LEASE_MS = 120_000;

/**
 * Sends the mail agreements owe their signers (`signer-mail-queue.ts`). `deliver` claims the mail
 * of one agreement that is due, in one atomic update (each due mail's lease moved on and its
 * attempt counted: another instance finds it not due), sends it, and records the outcome: sent
 * mail leaves the queue, failed mail waits `retrySchedule[attempts - 1]` seconds, and past the
 * schedule is given up (logged). A process stopped mid-send leaves the lease to run out: the mail
 * is sent again, at least once in all. What a mail says is made as it is sent: the link minted
 * from the id and expiry the queue keeps, the code derived from its id; a mail whose link or code
 * was replaced, or has expired, is dropped unsent.
 */
export function createSignerMail(deps: {
  storage: Storage;
  clock: () => Date;
  logger: Logger;
  notifier: Notifier | undefined;
  keys: LinkSigner;
  tokens: SigningTokens;
  certificates: Certificates;
  blobs: BlobStore;
  retrySchedule: readonly number[];
  senderName: SenderName;
  /** Links the completed copies when they are too big to attach. */
  downloads?: Pick<DownloadService, 'link'>;
}) {
  const { storage, clock, logger, notifier } = deps;
  const background = createBackgroundRuns((error, agreementId) =>
    logger.warn({ agreementId, err: describeError(error) }, 'signer mail: sending failed; the tick tries again'),
  );
  const update = (
    accountId: string,
    id: string,
    change: (current: AgreementRecord) => AgreementRecord | typeof NOTHING,
  ) => updateUnlessNothing(storage, accountId, id, change);

  /** The message for `mail`, or a reason to drop it unsent. */
  async function compose(record: AgreementRecord, mail: PendingMail, now: Date): Promise<NotifierMessage | string> {
    const signer = record.signers.find((one) => one.id === mail.signerId);
    if (signer === undefined) return 'the signer is gone';
    const sender = await deps.senderName(record.accountId, record);
    const base = {
      kind: mail.kind,
      to: addressOf(signer),
      accountId: record.accountId,
      agreementId: record.id,
      signerId: signer.id,
    };
    switch (mail.kind) {
      case 'identification-code': {
        const code = signer.identity?.code;
        if (code == null || code.id !== mail.codeId) return 'a newer code replaced it';
        if (now.getTime() >= Date.parse(code.expiresAt)) return 'the code expired before it could be sent';
        const digits = emailCode(deps.keys, record, signer.id, code.id);
        return { ...base, ...render(codeMail(sender, record.name, digits)) };
      }
      case 'signing-invitation':
      case 'signing-reminder': {
        const link = mail.link!;
        if (signer.signingLinkId !== link.id) return 'a newer link replaced it';
        if (now.getTime() >= link.expires * 1000) return 'the link expired before it could be sent';
        if (signer.signedAt !== null || signer.declinedAt !== null || !isOpen(record))
          return 'the signer has nothing left to sign';
        if (mail.baseUrl === null) return 'no publicUrl to make the link under';
        const token = deps.tokens.mint({
          accountId: record.accountId,
          agreementId: record.id,
          signerId: signer.id,
          linkId: link.id,
          expires: link.expires,
        });
        const url = signingPageLink(mail.baseUrl, token);
        return {
          ...base,
          ...render(linkMail(mail.kind, sender, signer, record.name, url, atom(new Date(link.expires * 1000)))),
        };
      }
      case 'agreement-completed': {
        const pdf = await deps.certificates.get(record);
        const attachments = [
          { filename: `certificate-${record.id}.pdf`, contentType: 'application/pdf', content: pdf },
        ];
        const copies = await completedCopies(record, MAX_ATTACHED_BYTES - pdf.length);
        attachments.push(...(copies ?? []));
        const links = copies === null ? copyLinks(record) : [];
        return { ...base, ...render(completedMail(sender, signer, record.name, copies !== null, links)), attachments };
      }
      case 'agreement-voided': {
        const reason = record.audit.findLast((entry) => entry.action === 'voided')?.detail ?? null;
        return { ...base, ...render(voidedMail(sender, signer, record.name, reason)) };
      }
    }
  }

  /**
   * Links to the completed copies, for a mail they are too big to ride in (DESIGN §12): each serves
   * for 7 days without Authorization; none without a `publicUrl` to make them under.
   */
  function copyLinks(record: AgreementRecord): { name: string; link: string; expiresAt: string }[] {
    if (deps.downloads === undefined) return [];
    const links = [];
    for (const document of record.documents) {
      if (document.signedFileKey === null) continue;
      try {
        const target = {
          kind: 'signed' as const,
          accountId: record.accountId,
          agreementId: record.id,
          id: document.id,
        };
        links.push({
          name: signedName(document.documentName),
          ...deps.downloads.link(target, undefined, 'the completion mail', MAIL_LINK_SECONDS),
        });
      } catch {
        // No publicUrl: the mail says to ask the sender.
        return [];
      }
    }
    return links;
  }

  /** The signed documents' completed copies as attachments, or `null` when they would come to more than `room` bytes. */
  async function completedCopies(
    record: AgreementRecord,
    room: number,
  ): Promise<NonNullable<NotifierMessage['attachments']> | null> {
    const copies = record.documents.filter((document) => document.signedFileKey !== null);
    const sizes = await Promise.all(
      copies.map(async (document) => (await deps.blobs.stat(document.signedFileKey!))?.size ?? 0),
    );
    if (sizes.reduce((sum, size) => sum + size, 0) > room) return null;
    const attached: NonNullable<NotifierMessage['attachments']> = [];
    for (const document of copies) {
      const stream = await deps.blobs.get(document.signedFileKey!);
      if (stream === null) continue;
      attached.push({
        filename: signedName(document.documentName),
        contentType: 'application/pdf',
        content: await buffer(stream),
      });
    }
    return attached;
  }

  async function attempt(
    record: AgreementRecord,
    mail: PendingMail,
    now: Date,
  ): Promise<{ sent: boolean; error: string | null; dropped?: string }> {
    const message = await compose(record, mail, now);
    if (typeof message === 'string') return { sent: false, error: null, dropped: message };
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new Error(`the notifier did not answer within ${SEND_TIMEOUT_MS / 1000} s`)),
        SEND_TIMEOUT_MS,
      );
    });
    try {
      await Promise.race([notifier!.send(message), timeout]);
      return { sent: true, error: null };
    } catch (error) {
      return { sent: false, error: errorMessage(error).slice(0, 500) };
    } finally {
      clearTimeout(timer);
    }
  }

  /** Records how `mail`'s attempt ended: gone from the queue, or due again on the schedule (given up past it). */
  async function settle(
    record: AgreementRecord,
    mail: PendingMail,
    result: Awaited<ReturnType<typeof attempt>>,
  ): Promise<void> {
    const now = clock();
    const givenUp = !result.sent && result.dropped === undefined && mail.attempts > deps.retrySchedule.length;
    const log = {
      accountId: record.accountId,
      agreementId: record.id,
      signerId: mail.signerId,
      kind: mail.kind,
      mailId: mail.id,
      attempts: mail.attempts,
    };
    if (result.dropped !== undefined) logger.info({ ...log, why: result.dropped }, 'signer mail: dropped unsent');
    else if (givenUp) logger.error({ ...log, err: result.error }, 'signer mail: given up after the last retry');
    else if (!result.sent)
      logger.warn({ ...log, err: result.error }, 'signer mail: the notifier failed; retried on the schedule');
    await update(record.accountId, record.id, (current) => {
      const stored = current.mail.find((one) => one.id === mail.id);
      // Replaced meanwhile (a newer link or code), or settled by another instance after our lease ran out.
      if (stored === undefined || stored.attempts !== mail.attempts) return NOTHING;
      if (result.sent || result.dropped !== undefined || givenUp)
        return { ...current, mail: current.mail.filter((one) => one.id !== mail.id) };
      const wait = deps.retrySchedule[mail.attempts - 1]! * 1000;
      const retried = { ...stored, nextAttemptAt: atom(new Date(now.getTime() + wait)), lastError: result.error };
      return { ...current, mail: current.mail.map((one) => (one.id === mail.id ? retried : one)) };
    });
  }

  /** Claims, sends and settles the mail of one agreement that is due now. */
  async function deliver(accountId: string, id: string): Promise<void> {
    if (notifier === undefined) return;
    const now = clock();
    let claimed: PendingMail[] = [];
    const record = await update(accountId, id, (current) => {
      const due = current.mail.filter((mail) => Date.parse(mail.nextAttemptAt) <= now.getTime());
      if (due.length === 0) return NOTHING;
      const lease = atom(new Date(now.getTime() + LEASE_MS));
      claimed = due.map((mail) => ({ ...mail, attempts: mail.attempts + 1, nextAttemptAt: lease }));
      const byId = new Map(claimed.map((mail) => [mail.id, mail]));
      return { ...current, mail: current.mail.map((mail) => byId.get(mail.id) ?? mail) };
    });
    if (record === null) return;
    for (const mail of claimed) {
      const result = await attempt(record, mail, now).catch((error) => ({
        sent: false,
        error: errorMessage(error).slice(0, 500),
      }));
      await settle(record, mail, result);
    }
  }

  return {
    /** Whether mail can be sent: a notifier is configured. */
    mailing: notifier !== undefined,
    deliver,
    /** Delivers an agreement's due mail now, off the request that queued it (a code is awaited in seconds, not at the next tick). */
    kick(accountId: string, id: string): void {
      if (notifier === undefined) return;
      background.start(id, () => deliver(accountId, id));
    },
    /** Resolves once every send begun so far has ended (the portal's `close` waits for it). */
    settled: background.settled,
  };
}

export type SignerMail = ReturnType<typeof createSignerMail>;

const addressOf = (signer: AgreementSignerRecord) =>
  `${quoteName(`${signer.firstName} ${signer.lastName}`)} <${signer.email}>`;

/** A display name as RFC 5322 takes it: quoted, its quotes and backslashes escaped, no line breaks. */
function quoteName(name: string): string {
  return `"${name.replace(/[\r\n]+/g, ' ').replace(/["\\]/g, '\\$&')}"`;
}

/** A mail as paragraphs, a link or a code standing out; rendered once as text, once as HTML. */
interface Draft {
  subject: string;
  paragraphs: (string | { link: string; label: string } | { code: string })[];
}

function render(draft: Draft): { subject: string; text: string; html: string } {
  const text = draft.paragraphs
    .map((part) => (typeof part === 'string' ? part : 'link' in part ? part.link : part.code))
    .join('\n\n');
  const html = draft.paragraphs
    .map((part) => {
      if (typeof part === 'string') return `<p>${escapeHtml(part)}</p>`;
      if ('link' in part) return `<p><a href="${escapeHtml(part.link)}">${escapeHtml(part.label)}</a></p>`;
      return `<p style="font-size:24px;letter-spacing:4px;font-family:monospace"><strong>${escapeHtml(part.code)}</strong></p>`;
    })
    .join('\n');
  return {
    subject: oneLine(draft.subject),
    text: `${text}\n`,
    html: `<!doctype html>\n<html><body>\n${html}\n</body></html>\n`,
  };
}

const oneLine = (text: string) => text.replace(/[\r\n]+/g, ' ');
const escapeHtml = (text: string) => text.replace(/[&<>"']/g, (char) => `&#${char.charCodeAt(0)};`);

function linkMail(
  kind: MailKind,
  sender: string,
  signer: AgreementSignerRecord,
  name: string,
  url: string,
  expiresAt: string,
): Draft {
  const reminder = kind === 'signing-reminder';
  return {
    subject: reminder ? `Reminder: "${name}" awaits your signature` : `${sender} asks you to sign "${name}"`,
    paragraphs: [
      `Hello ${signer.firstName} ${signer.lastName},`,
      reminder
        ? `"${name}", sent by ${sender}, still awaits your signature.`
        : `${sender} asks you to read and sign "${name}".`,
      { link: url, label: 'Open the documents to sign' },
      `The link works until ${expiresAt}${reminder ? ' and replaces any link you received before' : ''}. Do not forward this mail: the link signs as you.`,
    ],
  };
}

function codeMail(sender: string, name: string, code: string): Draft {
  return {
    subject: `Your code to sign "${name}"`,
    paragraphs: [
      `Your code to open "${name}", sent by ${sender}:`,
      { code },
      `It works for ${CODE_TTL_MS / 60_000} minutes. If you did not ask for it, someone else may hold your signing link: tell ${sender}.`,
    ],
  };
}

function voidedMail(sender: string, signer: AgreementSignerRecord, name: string, reason: string | null): Draft {
  return {
    subject: `"${name}" was voided`,
    paragraphs: [
      `Hello ${signer.firstName} ${signer.lastName},`,
      `${sender} voided "${name}": it can no longer be signed, and the link you were sent no longer works.`,
      ...(reason === null ? [] : [`The reason given: ${reason}`]),
    ],
  };
}

function completedMail(
  sender: string,
  signer: AgreementSignerRecord,
  name: string,
  copiesAttached: boolean,
  links: readonly { name: string; link: string; expiresAt: string }[],
): Draft {
  const tooBig = `The signed documents are over ${MAX_ATTACHED_BYTES / 1024 / 1024} MiB together`;
  return {
    subject: `"${name}" is signed`,
    paragraphs: [
      `Hello ${signer.firstName} ${signer.lastName},`,
      `Everyone has signed "${name}", sent by ${sender}. The certificate of completion is attached: it lists each document's SHA-256, each signer and the agreement's audit trail.`,
      copiesAttached
        ? 'The signed documents are attached too, each with every signature and sealed.'
        : links.length === 0
          ? `${tooBig}: ask ${sender} for them.`
          : `${tooBig}, so they are linked instead, each with every signature and sealed. The links serve until ${links[0]!.expiresAt}:`,
      ...links.map((one) => `${one.name}: ${one.link}`),
    ],
  };
}
