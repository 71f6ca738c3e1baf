import { createHash } from 'node:crypto';
import { newId } from '../../src/shared/ids.js';
import { atomAfter } from '../../src/shared/time.js';
import type {
  AgreementRecord,
  AttachmentRecord,
  DeliveryAttempt,
  EventRecord,
  FileEntryRecord,
  WebhookRecord,
} from '../../src/records.js';

export const T0 = '2026-01-01T00:00:00+00:00';

/** T0 plus `seconds`, as ATOM. */
export const at = (seconds: number) => atomAfter(new Date(T0), seconds);

/** An attempt at `seconds`: answered with `statusCode`, or refused at connect when it is null. */
export const attempt = (statusCode: number | null, seconds = 0): DeliveryAttempt => ({
  at: at(seconds),
  statusCode,
  error: statusCode === null ? 'connect ECONNREFUSED' : null,
  durationMs: 12,
});

export function webhookRecord(overrides: Partial<WebhookRecord> = {}): WebhookRecord {
  return {
    id: newId('wbh'),
    accountId: 'acct_a',
    type: 'customer-created',
    url: 'https://receiver.example/hook',
    secret: 'whsec_' + Buffer.alloc(32, 7).toString('base64'),
    createdAt: T0,
    ...overrides,
  };
}

export function fileRecord(overrides: Partial<FileEntryRecord> = {}): FileEntryRecord {
  return {
    id: newId('fsf'),
    accountId: 'acct_a',
    directoryId: null,
    type: 'file',
    name: 'report.pdf',
    size: 1234,
    mime: 'application/pdf',
    fileShareId: null,
    createdAt: T0,
    ...overrides,
  };
}

export function directoryRecord(overrides: Partial<FileEntryRecord> = {}): FileEntryRecord {
  return fileRecord({
    id: newId('fsd'),
    type: 'directory',
    name: 'Contracts',
    size: 0,
    mime: 'inode/directory',
    ...overrides,
  });
}

/** `n` bytes of a repeating, position-dependent pattern: a shifted or dropped chunk shows up. */
export function patternBytes(n: number, seed = 1): Buffer {
  const bytes = Buffer.alloc(n);
  for (let i = 0; i < n; i++) bytes[i] = (i * 31 + seed * 17 + (i >> 8)) & 0xff;
  return bytes;
}

export function eventRecord(overrides: Partial<EventRecord> = {}): EventRecord {
  return {
    id: newId('evt'),
    accountId: 'acct_a',
    type: 'customer-created',
    createdAt: T0,
    data: { customer: { id: 'cus_1', name: 'Ada Lovelace', tags: ['vip'], credit: 12.5, active: true, note: null } },
    ...overrides,
  };
}

/** An agreement of three signers (none signed) and two documents. */
export function agreementRecord(overrides: Partial<AgreementRecord> = {}): AgreementRecord {
  const signer = (firstName: string) => ({
    id: newId('ags'),
    firstName,
    lastName: 'Signer',
    email: `${firstName.toLowerCase()}@example.com`,
    shouldIdentify: false,
    signature: null,
    signatureHash: null,
    signedAt: null,
    viewedAt: null,
    declinedAt: null,
    declineReason: null,
    signingLinkId: null,
    identity: null,
  });
  return {
    id: newId('agr'),
    accountId: 'acct_a',
    name: 'Lease — Ünïcødé',
    status: 'sent',
    signerName: 'Ann Owner',
    signerSignature: 'data:image/png;base64,iVBORw0KGgo=',
    signerSignatureHash: createHash('sha256').update(`data:image/png;base64,iVBORw0KGgo=\n${T0}`).digest('hex'),
    signers: ['Bo', 'Cy', 'Di'].map(signer),
    documents: [
      {
        id: newId('agd'),
        documentName: 'lease.pdf',
        fileSize: 1234,
        fileHash: 'b'.repeat(64),
        signedFileHash: null,
        signedFileKey: null,
        fields: [],
      },
      {
        id: newId('agd'),
        documentName: 'annex.pdf',
        fileSize: 0,
        fileHash: 'c'.repeat(64),
        signedFileHash: null,
        signedFileKey: null,
        fields: [],
      },
    ],
    createdAt: T0,
    signingOrder: 'parallel',
    expiresAt: null,
    closedAt: null,
    closedReason: null,
    audit: [],
    auditHead: null,
    nextReminderAt: null,
    mail: [],
    completion: null,
    ...overrides,
  };
}

export function attachmentRecord(overrides: Partial<AttachmentRecord> = {}): AttachmentRecord {
  return {
    id: newId('tca'),
    accountId: 'acct_a',
    ticketId: newId('tck'),
    messageId: newId('tcm'),
    name: 'invoice.pdf',
    mime: 'application/pdf',
    size: 52_431,
    createdAt: T0,
    ...overrides,
  };
}
