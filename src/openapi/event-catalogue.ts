import { toJsonSchema } from '@valibot/to-json-schema';
import type * as v from 'valibot';
import type { EventTypeDefinition } from '../domain/event-types.js';
import * as shapes from './shapes.js';

/**
 * The event types the library emits itself, each with the schema of its data (from `shapes.ts`, the
 * same the OpenAPI document's `webhooks` section shows), what it means and an example: the built-in
 * entries of the event catalogue (`portal.eventTypes`, `GET /event-types`), which the document's
 * `webhooks` section is generated from.
 */
export interface LibraryEventType {
  name: string;
  description: string;
  data: v.GenericSchema;
  example: Record<string, unknown>;
}

const HASH = 'a3f1c9e07b25d4418e6f0c2b9d7a5e3f1c0b8a6d4e2f09b7c5a3e1d9f7b5c3a1';
const signer = {
  id: 'ags_7Qm2Vx9LpT4cKw8ZrB3nYh',
  firstName: 'Grace',
  lastName: 'Hopper',
  email: 'grace@example.com',
  shouldIdentify: false,
  signatureHash: null,
  signedAt: null,
  viewedAt: null,
  declinedAt: null,
  declineReason: null,
  identification: { required: false, verified: false, method: null, at: null },
};
const agreement = {
  id: 'agr_3ZkQ8mXb1T0pLq7VwE2sYd',
  name: 'Service agreement',
  status: 'sent',
  signerName: 'Ada Lovelace',
  signerSignatureHash: HASH,
  signers: [signer],
  documents: [
    {
      id: 'agd_5Rt8Yw2KmN6bVc1XzQ9pLs',
      documentName: 'terms.pdf',
      fileSize: 48213,
      fileHash: HASH,
      signedFileHash: null,
    },
  ],
  createdAt: '2026-11-26T10:00:00+00:00',
  signingOrder: 'parallel',
  expiresAt: null,
  closedAt: null,
  closedReason: null,
};
const viewed = { ...signer, viewedAt: '2026-11-26T10:05:00+00:00' };
const signed = { ...viewed, signatureHash: HASH, signedAt: '2026-11-26T10:06:00+00:00' };
const declined = { ...viewed, declinedAt: '2026-11-26T10:06:00+00:00', declineReason: 'The terms changed.' };

export const LIBRARY_EVENT_TYPES: readonly LibraryEventType[] = [
  {
    name: 'agreement-created',
    description:
      'An agreement was created; its data is the agreement without its signature images (`GET /agreements/{agreementId}` has them).',
    data: shapes.agreementEventData,
    example: agreement,
  },
  {
    name: 'agreement-signed',
    description: 'The last signer of an agreement signed; its data is the agreement without its signature images.',
    data: shapes.agreementEventData,
    example: { ...agreement, status: 'signed', signers: [signed] },
  },
  {
    name: 'agreement-viewed',
    description: 'A signer first opened the agreement through a signing link; `signerId` names them.',
    data: shapes.agreementSignerEventData,
    example: { ...agreement, signers: [viewed], signerId: signer.id },
  },
  {
    name: 'agreement-signer-signed',
    description:
      'One signer signed (through a link, or `agreements.sign`); `signerId` names them. The last one is followed by `agreement-signed`.',
    data: shapes.agreementSignerEventData,
    example: { ...agreement, signers: [signed], signerId: signer.id },
  },
  {
    name: 'agreement-declined',
    description:
      'A signer declined; the agreement is then closed (`closedReason: declined`), with their `declineReason`.',
    data: shapes.agreementSignerEventData,
    example: {
      ...agreement,
      signers: [declined],
      closedAt: '2026-11-26T10:06:00+00:00',
      closedReason: 'declined',
      signerId: signer.id,
    },
  },
  {
    name: 'agreement-expired',
    description: 'An open agreement reached its `expiresAt` and closed (`closedReason: expired`).',
    data: shapes.agreementEventData,
    example: {
      ...agreement,
      expiresAt: '2026-12-26T10:00:00+00:00',
      closedAt: '2026-12-26T10:00:00+00:00',
      closedReason: 'expired',
    },
  },
  {
    name: 'agreement-reminder-due',
    description:
      "A signer who may sign now is due a reminder, every `agreements.reminderIntervalMs` while the agreement is open (made by the worker's tick); `signerId` names them. The host sends the reminder.",
    data: shapes.agreementSignerEventData,
    example: { ...agreement, signers: [viewed], signerId: signer.id },
  },
  {
    name: 'agreement-voided',
    description:
      'The sender voided an open agreement (`POST /agreements/{agreementId}/void`): it is closed (`closedReason: voided`) and every signing link revoked. The reason is in the audit trail.',
    data: shapes.agreementEventData,
    example: { ...agreement, closedAt: '2026-11-27T09:00:00+00:00', closedReason: 'voided' },
  },
];

/** The library's types as catalogue definitions: each data schema as JSON Schema (draft 2020-12). */
export function libraryEventDefinitions(): Record<string, EventTypeDefinition> {
  return Object.fromEntries(
    LIBRARY_EVENT_TYPES.map(({ name, description, data, example }) => {
      const { $schema: _dialect, ...schema } = toJsonSchema(data, {
        target: 'draft-2020-12',
        ignoreActions: ['check', 'raw_check', 'raw_transform'],
      }) as Record<string, unknown>;
      return [name, { schema, description, example }];
    }),
  );
}
