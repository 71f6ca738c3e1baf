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
import { type Speech, speechOf } from './locales/index.js';
import type { BrandingOf, ShownBranding } from './branding.js';

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
  /** Who mails speak for: the branding's name (else the agreement's sender) and its support address. */
  brandingOf: BrandingOf;
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
    const branding = await deps.brandingOf(record.accountId);
    const sender = branding?.name ?? record.signerName;
    const speech = speechOf(record.locale);
    const words = speech.mail;
    const render = (draft: Draft) => renderMail(draft, words, branding);
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
        return { ...base, ...render(codeMail(words, sender, record.name, digits)) };
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
          ...render(
            linkMail(
              words,
              mail.kind,
              sender,
              signer,
              record.name,
              url,
              speech.when(atom(new Date(link.expires * 1000))),
            ),
          ),
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
        const until = links.length === 0 ? '' : speech.when(links[0]!.expiresAt);
        return {
          ...base,
          ...render(completedMail(words, sender, signer, record.name, copies !== null, links, until)),
          attachments,
        };
      }
      case 'agreement-voided': {
        const reason = record.audit.findLast((entry) => entry.action === 'voided')?.detail ?? null;
        return { ...base, ...render(voidedMail(words, sender, signer, record.name, reason)) };
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

/**
 * The mail as text and HTML, in the branding's colour, ending with its support address; the HTML
 * shows an `https:` logo (a data-URL one many mail readers refuse, so it is left out).
 */
function renderMail(
  draft: Draft,
  words: Speech['mail'],
  branding: ShownBranding | null,
): { subject: string; text: string; html: string } {
  const paragraphs =
    branding?.supportEmail == null ? draft.paragraphs : [...draft.paragraphs, words.support(branding.supportEmail)];
  const accent = branding?.accentColor ?? null;
  const text = paragraphs
    .map((part) => (typeof part === 'string' ? part : 'link' in part ? part.link : part.code))
    .join('\n\n');
  const linkStyle = accent === null ? '' : ` style="color:${accent}"`;
  const logo =
    branding?.logoUrl?.startsWith('https:') === true
      ? `<p><img src="${escapeHtml(branding.logoUrl)}" alt="${escapeHtml(branding.name)}" style="max-height:48px"></p>\n`
      : '';
  const html = paragraphs
    .map((part) => {
      if (typeof part === 'string') return `<p>${escapeHtml(part)}</p>`;
      if ('link' in part) return `<p><a href="${escapeHtml(part.link)}"${linkStyle}>${escapeHtml(part.label)}</a></p>`;
      return `<p style="font-size:24px;letter-spacing:4px;font-family:monospace"><strong>${escapeHtml(part.code)}</strong></p>`;
    })
    .join('\n');
  return {
    subject: oneLine(draft.subject),
    text: `${text}\n`,
    html: `<!doctype html>\n<html><body>\n${logo}${html}\n</body></html>\n`,
  };
}

const oneLine = (text: string) => text.replace(/[\r\n]+/g, ' ');
const escapeHtml = (text: string) => text.replace(/[&<>"']/g, (char) => `&#${char.charCodeAt(0)};`);

function linkMail(
  words: Speech['mail'],
  kind: MailKind,
  sender: string,
  signer: AgreementSignerRecord,
  name: string,
  url: string,
  expiresAt: string,
): Draft {
  const reminder = kind === 'signing-reminder';
  return {
    subject: reminder ? words.reminderSubject(name) : words.invitationSubject(sender, name),
    paragraphs: [
      words.hello(`${signer.firstName} ${signer.lastName}`),
      reminder ? words.reminder(sender, name) : words.invitation(sender, name),
      { link: url, label: words.openToSign },
      words.linkUntil(expiresAt, reminder),
    ],
  };
}

function codeMail(words: Speech['mail'], sender: string, name: string, code: string): Draft {
  return {
    subject: words.codeSubject(name),
    paragraphs: [words.codeIntro(name, sender), { code }, words.codeWorks(CODE_TTL_MS / 60_000, sender)],
  };
}

function voidedMail(
  words: Speech['mail'],
  sender: string,
  signer: AgreementSignerRecord,
  name: string,
  reason: string | null,
): Draft {
  return {
    subject: words.voidedSubject(name),
    paragraphs: [
      words.hello(`${signer.firstName} ${signer.lastName}`),
      words.voided(sender, name),
      ...(reason === null ? [] : [words.voidReason(reason)]),
    ],
  };
}

function completedMail(
  words: Speech['mail'],
  sender: string,
  signer: AgreementSignerRecord,
  name: string,
  copiesAttached: boolean,
  links: readonly { name: string; link: string; expiresAt: string }[],
  until: string,
): Draft {
  const tooBig = words.tooBig(MAX_ATTACHED_BYTES / 1024 / 1024);
  return {
    subject: words.completedSubject(name),
    paragraphs: [
      words.hello(`${signer.firstName} ${signer.lastName}`),
      words.completed(name, sender),
      copiesAttached
        ? words.copiesAttached
        : links.length === 0
          ? words.askForThem(tooBig, sender)
          : words.linkedInstead(tooBig, until),
      ...links.map((one) => `${one.name}: ${one.link}`),
    ],
  };
}
