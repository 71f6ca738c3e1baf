import type { AddressInfo } from 'node:net';
import { SMTPServer } from 'smtp-server';

/** One mail as the sink received it: the envelope, the raw message, and its text part decoded. */
interface ReceivedMail {
  from: string;
  to: string[];
  raw: string;
  subject: string;
  /** The text/plain part, quoted-printable or base64 undone. */
  text: string;
  /** The file names of its attachments. */
  attachments: string[];
}

export interface SmtpSink {
  url: string;
  received: ReceivedMail[];
  /** Mails to refuse next (`550`), as a mailbox that is down would. */
  refusing: number;
  refused: number;
  close(): Promise<void>;
}

/** An SMTP server on 127.0.0.1 that keeps every mail it accepts (no TLS, no authentication). */
export async function startSmtpSink(): Promise<SmtpSink> {
  const sink: SmtpSink = { url: '', received: [], refusing: 0, refused: 0, close: async () => {} };
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS', 'AUTH'],
    logger: false,
    onData(stream, session, callback) {
      const chunks: Buffer[] = [];
      stream.on('data', (chunk: Buffer) => chunks.push(chunk));
      stream.on('end', () => {
        if (sink.refusing > 0) {
          sink.refusing--;
          sink.refused++;
          const error = Object.assign(new Error('mailbox unavailable'), { responseCode: 550 });
          callback(error);
          return;
        }
        const raw = Buffer.concat(chunks).toString('utf8');
        sink.received.push({
          from: session.envelope.mailFrom === false ? '' : session.envelope.mailFrom.address,
          to: session.envelope.rcptTo.map((one) => one.address),
          raw,
          subject: decodeHeader(/^Subject: (.*(?:\r\n[ \t].*)*)/m.exec(raw)?.[1] ?? ''),
          text: textPart(raw),
          attachments: [...raw.matchAll(/filename="?([^";\r\n]+)"?/g)].map((match) => match[1]!),
        });
        callback();
      });
    },
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.server.address() as AddressInfo;
  sink.url = `smtp://127.0.0.1:${port}`;
  sink.close = () => new Promise((resolve) => server.close(() => resolve()));
  return sink;
}

/** The text/plain part of a MIME message, its transfer encoding undone. */
function textPart(raw: string): string {
  const at = raw.search(/^Content-Type: text\/plain/im);
  if (at === -1) return '';
  const part = raw.slice(at);
  const headerEnd = part.indexOf('\r\n\r\n');
  const headers = part.slice(0, headerEnd);
  const body = part.slice(headerEnd + 4).split(/\r\n--/)[0]!;
  if (/Content-Transfer-Encoding: quoted-printable/i.test(headers)) {
    return Buffer.from(
      body
        .replace(/=\r\n/g, '')
        .replace(/=([0-9A-F]{2})/g, (_, hex: string) => String.fromCharCode(Number.parseInt(hex, 16))),
      'latin1',
    ).toString('utf8');
  }
  if (/Content-Transfer-Encoding: base64/i.test(headers))
    return Buffer.from(body.replace(/\s+/g, ''), 'base64').toString('utf8');
  return body;
}

/** A header's encoded words (`=?UTF-8?Q?…?=`, `=?UTF-8?B?…?=`) decoded, its folds unfolded. */
function decodeHeader(value: string): string {
  return value
    .replace(/\r\n[ \t]/g, ' ')
    .replace(/\?=\s+=\?/g, '?==?')
    .replace(/=\?UTF-8\?([QB])\?([^?]*)\?=/gi, (_, encoding: string, text: string) =>
      encoding.toUpperCase() === 'B'
        ? Buffer.from(text, 'base64').toString('utf8')
        : Buffer.from(
            text
              .replace(/_/g, ' ')
              .replace(/=([0-9A-F]{2})/gi, (__, hex: string) => String.fromCharCode(Number.parseInt(hex, 16))),
            'latin1',
          ).toString('utf8'),
    );
}
