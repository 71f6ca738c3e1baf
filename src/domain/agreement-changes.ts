import { PortalError } from '../errors.js';
import type { Storage } from '../ports.js';
import type { AgreementRecord } from '../records.js';
import { atom } from '../shared/time.js';
import type { Step } from './audit-trail.js';
import { expire, isPastExpiry } from './signing-rules.js';
import { isOpen } from '../records.js';

/**
 * Applies one step of the signing rules to a stored agreement, atomically (`updateAgreement`):
 * an agreement whose `expiresAt` has come is closed first, by whichever request reaches it (the
 * step is then refused with 409, the closing kept), so expiry never waits for the tick alone.
 * Resolves the stored agreement; 404 when absent in this account. A step that signs or closes the
 * agreement is told to `closed` once stored (its certificate is made then, off the request). A
 * read (`reading: true`: a view, a `GET`) is not refused by the expiry it meets: it resolves the
 * agreement as the expiry left it. A step that signs it also stores that its completed copies are
 * owed, and tells `copies`.
 */
export function createAgreementChanges(deps: {
  storage: Storage;
  notify: () => void;
  closed?: ((record: AgreementRecord) => void) | undefined;
  /** Told once a step queued mail to signers (a code, a link sent), to send it. */
  mail?: { queued: (record: AgreementRecord) => void } | undefined;
  /** Told once a step signed an agreement: its completed copies are owed (`completed-copies.ts`). */
  copies?: { owed: (record: AgreementRecord) => void } | undefined;
}) {
  return async function apply(
    accountId: string,
    agreementId: string,
    now: Date,
    step: (current: AgreementRecord) => Step,
    { reading = false } = {},
  ): Promise<AgreementRecord> {
    let refusal: PortalError | undefined;
    let stored = 0;
    let closes = false;
    let mailed = false;
    let signs = false;
    const updated = await deps.storage.updateAgreement(accountId, agreementId, (current) => {
      refusal = undefined;
      let made = isPastExpiry(current, now) ? expire(current, now) : step(current);
      closes = isOpen(current) && !isOpen(made.agreement);
      signs = current.status !== 'signed' && made.agreement.status === 'signed';
      if (signs)
        made = {
          ...made,
          agreement: { ...made.agreement, completion: { attempts: 0, nextAttemptAt: atom(now), lastError: null } },
        };
      mailed =
        made.agreement.mail.length > 0 &&
        made.agreement.mail.some((mail) => mail.attempts === 0 && !current.mail.some((one) => one.id === mail.id));
      if (!reading && made.agreement.closedReason === 'expired' && current.closedReason === null) {
        refusal = new PortalError('AGREEMENT_CLOSED', agreementId, 'expired');
      }
      stored = made.events.length;
      return made;
    });
    if (updated === null) throw new PortalError('AGREEMENT_NOT_FOUND', agreementId);
    if (stored > 0) deps.notify();
    if (closes) deps.closed?.(updated);
    if (mailed) deps.mail?.queued(updated);
    if (signs) deps.copies?.owed(updated);
    if (refusal !== undefined) throw refusal;
    return updated;
  };
}
