import type { AgreementRecord, MailKind, PendingMail } from '../records.js';
import { newId } from '../shared/ids.js';
import { atom } from '../shared/time.js';

/**
 * The mail an agreement owes its signers, kept on the agreement itself: a step that makes a mail
 * (a link sent, a code requested, a reminder, the agreement completed) stores it in the same
 * atomic update as the step, so no mail is promised and lost, whatever stops the process; the
 * sender (`signer-mail.ts`) takes it from there. A newer mail of one kind to one signer replaces
 * an older one not yet sent (the older link or code no longer works), which keeps the queue at a
 * few mails a signer.
 */
export function queueMail(
  record: AgreementRecord,
  mail: {
    kind: MailKind;
    signerId: string;
    link?: { id: string; expires: number };
    codeId?: string;
    baseUrl?: string | null;
  },
  now: Date,
): AgreementRecord {
  const kept = record.mail.filter((one) => !(one.kind === mail.kind && one.signerId === mail.signerId));
  const pending: PendingMail = {
    id: newId('sgm'),
    kind: mail.kind,
    signerId: mail.signerId,
    link: mail.link ?? null,
    codeId: mail.codeId ?? null,
    baseUrl: mail.baseUrl ?? null,
    attempts: 0,
    nextAttemptAt: atom(now),
    lastError: null,
  };
  return { ...record, mail: [...kept, pending] };
}
