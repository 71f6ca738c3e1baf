import type { Notifier, NotifierMessage } from '../../src/index.js';

/** A notifier that keeps what it is given, and refuses the next `refusing` sends (a mail server down). */
export interface RecordingNotifier extends Notifier {
  sent: NotifierMessage[];
  refused: number;
  refusing: number;
  /** The last identification code mailed to `email`. */
  codeFor(email: string): string;
  /** The signing link of the last invitation or reminder mailed to `email`. */
  linkFor(email: string): string;
}

export function recordingNotifier(): RecordingNotifier {
  const notifier: RecordingNotifier = {
    sent: [],
    refused: 0,
    refusing: 0,
    async send(message) {
      if (notifier.refusing > 0) {
        notifier.refusing--;
        notifier.refused++;
        throw new Error('550 mailbox unavailable');
      }
      notifier.sent.push(message);
    },
    codeFor(email) {
      const mail = notifier.sent.findLast((one) => one.kind === 'identification-code' && one.to.includes(`<${email}>`));
      const code = mail?.text.match(/\b\d{6}\b/)?.[0];
      if (code === undefined) throw new Error(`no code was mailed to ${email}`);
      return code;
    },
    linkFor(email) {
      const mail = notifier.sent.findLast(
        (one) =>
          (one.kind === 'signing-invitation' || one.kind === 'signing-reminder') && one.to.includes(`<${email}>`),
      );
      const link = mail?.text.match(/https?:\/\/\S+\/sign#\S+/)?.[0];
      if (link === undefined) throw new Error(`no link was mailed to ${email}`);
      return link;
    },
  };
  return notifier;
}

/** Resolves once `condition` holds, polling (mail is sent off the request that queued it). */
export async function until(condition: () => boolean | Promise<boolean>, what: string, ms = 5000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await condition())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}
