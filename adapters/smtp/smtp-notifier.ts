import type { Transporter } from 'nodemailer';
import type { Notifier, NotifierMessage } from '../../src/ports.js';

export interface SmtpNotifierOptions {
  /**
   * The mail server, as nodemailer reads it: `smtp://user:pass@host:587` (STARTTLS when the server
   * offers it) or `smtps://user:pass@host:465` (TLS from the start).
   */
  url: string;
  /** The sender: `"Acme <signing@acme.example>"` or an address. */
  from: string;
}

export interface SmtpNotifier extends Notifier {
  /** Closes the connections to the server. */
  close(): void;
}

type Nodemailer = typeof import('nodemailer');

/**
 * A notifier that hands each mail to an SMTP server through nodemailer (an optional peer: install
 * `nodemailer`). A mail the server did not accept rejects, and the portal retries it. The transport
 * never reads a file or a URL for a mail (only the bytes given), and gives up on a server that does
 * not answer within seconds, so a slow server costs a retry, not a held request.
 */
export function smtpNotifier(options: SmtpNotifierOptions): SmtpNotifier {
  const { url, from } = options ?? ({} as SmtpNotifierOptions);
  if (typeof url !== 'string' || !URL.canParse(url) || !['smtp:', 'smtps:'].includes(new URL(url).protocol)) {
    throw new TypeError(
      'smtpNotifier: url must be an smtp:// or smtps:// URL, such as "smtp://user:pass@mail.example.com:587"',
    );
  }
  if (typeof from !== 'string' || !/@/.test(from) || /[\r\n]/.test(from)) {
    throw new TypeError('smtpNotifier: from must be an address, or "Name <address>"');
  }
  let transport: Promise<Transporter> | undefined;
  const open = () =>
    (transport ??= (import('nodemailer') as Promise<Nodemailer | { default: Nodemailer }>)
      .then((loaded) => ('default' in loaded ? loaded.default : loaded))
      .then((nodemailer) =>
        nodemailer.createTransport({
          url,
          disableFileAccess: true,
          disableUrlAccess: true,
          connectionTimeout: 10_000,
          greetingTimeout: 10_000,
          socketTimeout: 30_000,
        }),
      )
      .catch((error: NodeJS.ErrnoException) => {
        transport = undefined;
        if (error.code === 'ERR_MODULE_NOT_FOUND')
          throw new Error('smtpNotifier needs the nodemailer package: npm install nodemailer');
        throw error;
      }));
  return {
    async send(message: NotifierMessage) {
      const mailer = await open();
      await mailer.sendMail({
        from,
        to: message.to,
        subject: message.subject,
        text: message.text,
        ...(message.html === undefined ? {} : { html: message.html }),
        attachments: (message.attachments ?? []).map(({ filename, contentType, content }) => ({
          filename,
          contentType,
          content,
        })),
        // Sent by a program, on the signer's behalf: no out-of-office replies.
        headers: { 'Auto-Submitted': 'auto-generated' },
      });
    },
    close() {
      void transport?.then((mailer) => mailer.close()).catch(() => undefined);
    },
  };
}
