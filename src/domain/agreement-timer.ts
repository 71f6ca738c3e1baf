import type { AgreementRecord } from '../records.js';
import { describeError, isPortalError } from '../errors.js';
import type { Storage } from '../ports.js';
import type { Logger } from '../shared/logger.js';
import { atom } from '../shared/time.js';
import { createAgreementChanges } from './agreement-changes.js';
import { SIGNING_LINK_SECONDS } from './inputs.js';
import type { CompletedCopies } from './completed-copies.js';
import type { SignerMail } from './signer-mail.js';
import { isPastExpiry, remind } from './signing-rules.js';

/** Agreements looked at, at most, by one tick; more wait for the next. */
const AGREEMENTS_PER_TICK = 100;
/**
 * Of one account, at most, a tick: an account with thousands of agreements due at once (a bulk
 * send that expires together) takes a tenth of each tick, and another account's expiry or
 * reminder is never behind its backlog.
 */
const AGREEMENTS_PER_ACCOUNT_PER_TICK = 10;

/**
 * What the worker's tick does for agreements: closes those whose `expiresAt` has come
 * (`agreement-expired`) and makes the reminder rounds that are due (`agreement-reminder-due`), each
 * in one `updateAgreement`, so two instances ticking at once store each close and each round once.
 * With a notifier it also sends the mail agreements owe their signers (reminders by mail with a
 * fresh link, codes and invitations whose first attempt failed, completions).
 * Reads only the agreements whose time has come (`Storage.agreementsDue`), at most 100 a tick.
 */
export function createAgreementTimer(deps: {
  storage: Storage;
  clock: () => Date;
  logger: Logger;
  notify: () => void;
  reminderIntervalMs: number | undefined;
  /** Told of each agreement the timer closed (expired). */
  closed?: (record: AgreementRecord) => void;
  /**
   * With a notifier: the sender of mail to signers, and the API root reminder links are made under
   * (`publicUrl`; without it reminders stay events only).
   */
  mail?: { sender: Pick<SignerMail, 'deliver'>; baseUrl: string | undefined } | undefined;
  /** Makes the completed copies owed (retries, and those no request's kick made). */
  copies?: Pick<CompletedCopies, 'deliver'>;
}) {
  const apply = createAgreementChanges({ storage: deps.storage, notify: deps.notify, closed: deps.closed });
  const { mail } = deps;
  const byMail =
    mail?.baseUrl === undefined ? undefined : { baseUrl: mail.baseUrl, linkSeconds: SIGNING_LINK_SECONDS.default };
  const step = (current: AgreementRecord, now: Date) => remind(current, now, deps.reminderIntervalMs, byMail);
  return async function tick(): Promise<void> {
    const now = deps.clock();
    // With reminders on, the agreements made while they were off are read too, to schedule theirs.
    const unscheduled = deps.reminderIntervalMs !== undefined;
    const due = await deps.storage.agreementsDue(
      atom(now),
      AGREEMENTS_PER_TICK,
      AGREEMENTS_PER_ACCOUNT_PER_TICK,
      unscheduled,
    );
    for (const { accountId, id } of due) {
      try {
        // Found for its mail alone, an agreement is not written for nothing.
        const record = await deps.storage.getAgreement(accountId, id);
        if (record === null) continue;
        if (isPastExpiry(record, now) || step(record, now) !== null) {
          // The expiry comes first (apply closes an expired agreement whatever the step); else the round.
          await apply(accountId, id, now, (current) => step(current, now) ?? { agreement: current, events: [] });
        }
      } catch (error) {
        if (!isPortalError(error, 'AGREEMENT_CLOSED')) {
          deps.logger.error(
            { agreementId: id, err: describeError(error) },
            'agreements: the expiry or a reminder failed; the next tick tries again',
          );
        }
      }
      try {
        await deps.copies?.deliver(accountId, id);
      } catch (error) {
        deps.logger.error(
          { agreementId: id, err: describeError(error) },
          'agreements: the completed copies failed; the next tick tries again',
        );
      }
      try {
        await mail?.sender.deliver(accountId, id);
      } catch (error) {
        deps.logger.error(
          { agreementId: id, err: describeError(error) },
          'agreements: mail to signers failed; the next tick tries again',
        );
      }
    }
  };
}
