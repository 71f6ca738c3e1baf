/** The API's shapes, as `docs/http-api.md` and `docs/webhooks.md` give them: what the page reads. */
/** A webhook's filter over its events' data: paths and operators (see docs/webhooks.md#filters). */
export type EventFilter = { [key: string]: unknown };

export interface Webhook {
  id: string;
  type: string;
  url: string;
  /** The `whsec_` secret; absent for a webhook signing with ed25519. */
  secret?: string;
  createdAt: string;
  filter?: EventFilter;
  /** Calls a second at most; absent: none. */
  rateLimit?: number;
  signatureScheme?: 'ed25519';
  /** The `whpk_` public key an ed25519 webhook's calls verify with. */
  publicKey?: string;
}

/** One entry of the event catalogue (`GET /event-types`). */
export interface EventType {
  name: string;
  description: string | null;
  schema: Record<string, unknown> | null;
  example: unknown;
  deprecated: boolean;
}

/** What `POST /webhooks/dry-run` answers. */
export interface DryRunResult {
  data: { id: string; type: string; createdAt: string; data: unknown; matches: boolean }[];
  matched: number;
}

export interface WebhookHealth {
  status: 'enabled' | 'disabled';
  disabledReason: 'gone' | 'failing' | 'manual' | null;
  disabledAt: string | null;
  failingSince: string | null;
  lastSuccessAt: string | null;
  lastAttemptAt: string | null;
  consecutiveFailures: number;
  heldUntil: string | null;
  rateLimit: number | null;
  inFlightLimit: number | null;
}

export interface DeliveryAttempt {
  at: string;
  statusCode: number | null;
  error: string | null;
  durationMs: number;
  /** The call never left the portal (its egress proxy failed): not charged to the webhook. */
  local?: true;
  /** The receiver asked to wait (`Retry-After` on a 429 or 503): no failure, no retry spent. */
  held?: true;
}

export interface Delivery {
  id: string;
  webhookId: string;
  eventId: string;
  eventType: string;
  status: 'pending' | 'succeeded' | 'failed' | 'cancelled';
  attempts: DeliveryAttempt[];
  attemptCount: number;
  nextAttemptAt: string | null;
  createdAt: string;
  /** Its event's ordering key: deliveries of one webhook and key go one at a time, in order. */
  orderingKey: string | null;
  /** A redeliver asked for during a call: one more call follows once that call is recorded. */
  redeliverQueued: boolean;
}

export interface FileEntry {
  id: string;
  type: 'file' | 'directory';
  name: string;
  size: number;
  mime: string;
  fileShareId: string | null;
  createdAt: string;
}

export interface List<T> {
  data: T[];
}

/** A signer as a listed agreement holds one: no signature image. */
export interface AgreementSigner {
  id: string;
  firstName: string;
  lastName: string;
  email: string;
  shouldIdentify: boolean;
  signatureHash: string | null;
  signedAt: string | null;
  viewedAt: string | null;
  declinedAt: string | null;
  declineReason: string | null;
  identification: {
    required: boolean;
    verified: boolean;
    method: 'email-code' | 'access-code' | null;
    at: string | null;
  };
}

/** One step of an agreement's audit trail. */
export interface AuditEntry {
  at: string;
  action: string;
  actor: string;
  signerId: string | null;
  ip: string | null;
  userAgent: string | null;
  detail: string | null;
  method?: 'email-code' | 'access-code';
  disclosureHash?: string;
  hash: string;
}

/** An agreement as `GET /agreements` lists it: without signature images. */
export interface AgreementSummary {
  id: string;
  name: string;
  status: 'sent' | 'signed';
  signerName: string;
  signerSignatureHash: string;
  documents: { id: string; documentName: string; fileSize: number; fileHash: string; signedFileHash: string | null }[];
  createdAt: string;
  signers: AgreementSigner[];
  signingOrder: 'parallel' | 'sequential';
  expiresAt: string | null;
  closedAt: string | null;
  closedReason: 'declined' | 'expired' | 'voided' | null;
}

/** One page of a list that is paged: `nextCursor` asks for the next, `null` after the last. */
export interface Page<T> extends List<T> {
  nextCursor: string | null;
}

/** What `POST /verify` says of a PDF. */
export interface Verification {
  sealed: boolean;
  intact: boolean;
  level: 'B-B' | 'B-T' | 'B-LT' | 'B-LTA' | null;
  signedAt: string | null;
  agreementId: string | null;
  documentId: string | null;
}
