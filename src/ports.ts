import type { Readable } from 'node:stream';
import type { Logger } from './shared/logger.js';
import type {
  CallStatsHour,
  AgreementRecord,
  AgreementSummaryRecord,
  AttachmentRecord,
  AutomaticDisableReason,
  ClaimedDelivery,
  DeliveryAttempt,
  DeliveryPage,
  DeliveryQuery,
  DeliveryRecord,
  DeliveryStatus,
  EventFilter,
  EventRecord,
  FileEntryRecord,
  SecretRotation,
  IdempotencyCompletion,
  IdempotencyRecord,
  MailKind,
  PageRequest,
  PortalSessionRecord,
  WebhookHealthRecord,
  WebhookRecord,
} from './records.js';

/**
 * When the worker disables a webhook (`webhooks.disableAfterMs`, `webhooks.disableAfterFailures`):
 * once its calls have all failed for `disableAfterMs`, in at least `disableAfterFailures` attempts
 * in a row (`healthAfterAttempt` in `rules/webhook-health.ts`).
 */
export interface HealthRule {
  disableAfterMs: number;
  disableAfterFailures: number;
}

/** The queue of deliveries waiting for a worker (`Storage.deliveryQueue`). */
export interface DeliveryQueue {
  /** How many wait, up to the `limit` asked: `limit` means at least that many. */
  waiting: number;
  /** When the earliest of them fell due; `null` when none waits. */
  oldestDueAt: string | null;
}

/** What a claim asks for: the time, the lease, how many, for whom, and the share one account may hold. */
export interface Claim {
  now: string;
  leaseUntil: string;
  limit: number;
  owner: string;
  /**
   * Fair share: at most `max` deliveries of one account held by `owner` at once, counting its calls
   * in flight (`inFlight`, by account id) and what this claim leases. Without it, no cap.
   */
  perAccount?: { max: number; inFlight: Readonly<Record<string, number>> };
  /**
   * Webhooks with as many calls in flight for `owner` as their limit (`rules/in-flight.ts`): none of
   * their deliveries is leased by this claim (they stay due, for a later one).
   */
  fullWebhooks?: readonly string[];
}

/** What a request asks of an `Idempotency-Key`: the key of the account, for the request holding `token`, until `leaseUntil`. */
export interface IdempotencyClaim {
  accountId: string;
  key: string;
  token: string;
  /** Known up front (a JSON body), or `null` (a form whose documents are still to be hashed). */
  fingerprint: string | null;
  now: string;
  leaseUntil: string;
}

/**
 * Sends events to one webhook, whatever its type, instead of to every webhook of their type: a
 * test call. Each event then makes one delivery, or none when that webhook is not in its account.
 */
export interface DeliveryTarget {
  webhookId: string;
}

/** Opening and closing a store: `reopen.ts` of the conformance suite holds a store to what it kept. */
export interface StoreLifecycle {
  /** Prepares the store (tables, indexes, locks). Called once by `createPortal` before any other method. */
  open?(): Promise<void>;
  /** Releases what `open` took. Never closes a database client it was handed. */
  close?(): Promise<void>;
}

/** Webhooks, their secrets and filters (conformance: `storage-webhooks.ts`, `storage-rotation.ts`). */
export interface WebhookStore {
  /**
   * Stores a new webhook. Given `maxPerAccount`, rejects with `WEBHOOKS_LIMIT` instead, storing
   * nothing, when the account holds that many already: the count and the insert are one atomic step.
   * Given `idempotency`, completes that claim in the same step (see `claimIdempotencyKey`).
   */
  insertWebhook(
    webhook: WebhookRecord,
    limits?: { maxPerAccount?: number },
    idempotency?: IdempotencyCompletion,
  ): Promise<void>;
  /** The webhook, or `null` when absent in this account. */
  getWebhook(accountId: string, id: string): Promise<WebhookRecord | null>;
  /** Every webhook of the account, oldest first: by `createdAt`, and within one second in the order inserted. */
  listWebhooks(accountId: string): Promise<WebhookRecord[]>;
  /** Removes the webhook (and its health) and cancels its pending deliveries in one atomic step; `false` when absent. */
  deleteWebhook(accountId: string, id: string): Promise<boolean>;
  /**
   * Makes `rotation.secret` the webhook's secret and the secret it replaces its `previousSecret` until
   * `rotation.previousSecretUntil` (with `null`, drops any previous secret), in one atomic step: of
   * two rotations at once, the later keeps the earlier's new secret as its previous one. Resolves the
   * stored webhook, or `null` when absent in this account. The webhook keeps its place in listings.
   */
  rotateWebhookSecret(accountId: string, id: string, rotation: SecretRotation): Promise<WebhookRecord | null>;
  /**
   * Changes the webhook's filter, its rate limit, or both, in one atomic step (a key absent is
   * kept, `null` removes it); nothing else changes, and it keeps its place in listings. Publishes
   * from then on are matched against the filter. A change of `rateLimit` starts its pacing again:
   * its deliveries waiting for a slot (`paceSlots` in `rules/rate-limit.ts`) are due at `now` (ATOM),
   * to be paced at the new limit, or sent without one. Resolves the stored webhook, or `null` when
   * absent in this account.
   */
  updateWebhook(accountId: string, id: string, changes: WebhookChanges, now: string): Promise<WebhookRecord | null>;
}

/** What `Storage.updateWebhook` changes: a key absent is kept, `null` removes it. */
export interface WebhookChanges {
  filter?: EventFilter | null;
  rateLimit?: number | null;
}

/** File and directory entries (conformance: `storage-files.ts`). */
export interface FileStore {
  /** Stores a new file or directory entry. */
  insertFileEntry(entry: FileEntryRecord): Promise<void>;
  /** The entry, or `null` when absent in this account. */
  getFileEntry(accountId: string, id: string): Promise<FileEntryRecord | null>;
  /** Every entry directly inside `directoryId` (`null`: the account's root), in no particular order. */
  listFileEntries(accountId: string, directoryId: string | null): Promise<FileEntryRecord[]>;
  /** Removes the entry; `false` when absent. */
  deleteFileEntry(accountId: string, id: string): Promise<boolean>;
}

/** Agreements and their signing state (conformance: `storage-agreements.ts`). */
export interface AgreementStore {
  /**
   * Stores a new agreement together with `events` (see `publishEvents`), atomically; given
   * `idempotency`, completes that claim in the same step (see `claimIdempotencyKey`).
   */
  insertAgreement(
    agreement: AgreementRecord,
    events: EventRecord[],
    idempotency?: IdempotencyCompletion,
  ): Promise<void>;
  /** The agreement, or `null` when absent in this account. */
  getAgreement(accountId: string, id: string): Promise<AgreementRecord | null>;
  /**
   * The agreement and document whose completed copy has SHA-256 `signedFileHash` (hex) in this
   * account, or `null`: what `POST /verify` asks of a PDF. Answered from an index, never a scan.
   */
  findSignedCopy(
    accountId: string,
    signedFileHash: string,
  ): Promise<{ agreementId: string; documentId: string } | null>;
  /**
   * Removes the agreement with its signers, documents and trail, atomically; `false` when absent in
   * this account. Its blobs are the caller's to remove after (bytes no record names are swept).
   */
  deleteAgreement(accountId: string, id: string): Promise<boolean>;
  /**
   * Up to `page.limit` of the account's agreements without their signature images, newest first (by
   * `createdAt`, and within one second the last made first), starting after the agreement
   * `page.after`; `null` when `page.after` names no agreement of this account. An update keeps an
   * agreement's place. Reads only the page, never the account's whole list.
   */
  listAgreements(accountId: string, page: PageRequest): Promise<AgreementSummaryRecord[] | null>;
  /**
   * Replaces the agreement with what `change` makes of the current one, and stores the events it
   * returns, atomically: no other update of that agreement interleaves. `change` may throw, which
   * leaves everything unchanged and rejects with that error. Resolves the stored agreement, or
   * `null` when absent in this account (`change` is then not called).
   */
  updateAgreement(
    accountId: string,
    id: string,
    change: (current: AgreementRecord) => { agreement: AgreementRecord; events: EventRecord[] },
  ): Promise<AgreementRecord | null>;
  /**
   * Erases the agreement's personal data, atomically, as `updateAgreement` changes it: the agreement
   * becomes what `erase` makes of the current one, whose trail may differ from the stored one only
   * as `redactsTrail` allows; the data of each stored event about it (a type starting `agreement-`,
   * the agreement's id as ordering key) becomes `eraseData(data)`, and so does the body (JSON) of
   * each kept idempotent answer whose `location` ends in `/agreements/<id>`. Reads only the
   * account's own events since the agreement was made, and the account's own kept answers.
   * Resolves the stored agreement, or `null` when absent in this account.
   */
  eraseAgreement(
    accountId: string,
    id: string,
    erase: (current: AgreementRecord) => AgreementRecord,
    eraseData: (data: unknown) => unknown,
  ): Promise<AgreementRecord | null>;
  /**
   * Up to `limit` agreements of any account with something due at or before `now` (ATOM): an open
   * one's (not signed, not closed) `expiresAt` or `nextReminderAt`, or any one's next mail to its
   * signers (the earliest `nextAttemptAt` of its `mail`), the earliest first, at most `perAccount` of one
   * account (so one account's backlog never holds back another's expiry). With `unscheduled`, after
   * those, the open agreements with no `nextReminderAt` (made while reminders were off), so the
   * tick schedules their reminders. Reads only those, never every agreement.
   */
  agreementsDue(
    now: string,
    limit: number,
    perAccount: number,
    unscheduled?: boolean,
  ): Promise<{ accountId: string; id: string }[]>;
}

/** Ticket message attachments (conformance: `storage-attachments.ts`). */
export interface AttachmentStore {
  /** Stores a new ticket message attachment. */
  insertAttachment(attachment: AttachmentRecord): Promise<void>;
  /** The attachment, or `null` when absent in this account. */
  getAttachment(accountId: string, id: string): Promise<AttachmentRecord | null>;
  /** Removes the attachment; `false` when absent. */
  deleteAttachment(accountId: string, id: string): Promise<boolean>;
}

/**
 * The outbox: events, their deliveries, claims, attempts and call counts (conformance:
 * `storage-outbox.ts`, `storage-ordering.ts`, `storage-call-stats.ts`).
 */
export interface OutboxStore {
  /**
   * Stores the events and, for each, one pending delivery (a new `whd_` id, `nextAttemptAt` = the
   * event's `createdAt`, no attempts, no lease) per webhook of the event's account and type whose
   * filter its data matches (`isRecipient`; with `target`: to that webhook alone), all in one atomic
   * step. A delivery with an ordering key whose key holds a pending delivery already, or follows
   * one of its key in `events`, is held (`inKeyOrder`). Resolves the deliveries created.
   */
  publishEvents(events: EventRecord[], target?: DeliveryTarget): Promise<DeliveryRecord[]>;
  /**
   * Up to `limit` of the account's events of `type`, the most recent first (by `createdAt`; within
   * one second in no set order). Reads only those, never the account's other events.
   */
  recentEvents(accountId: string, type: string, limit: number): Promise<EventRecord[]>;
  /** The delivery, or `null` when absent in this account. */
  getDelivery(accountId: string, id: string): Promise<DeliveryRecord | null>;
  /**
   * A page of the webhook's deliveries, newest first (by `createdAt`, and within one second the
   * last made first): up to `query.limit` of those matching its `status`, `eventType` and time
   * bounds, starting just past `query.after`, with `next` set to the last one's cursor when more
   * follow. A cursor names a delivery by the key the store chose; when that delivery is gone
   * (removed by retention), the page starts at the deliveries made before its `createdAt`. Reads
   * only the webhook's deliveries, from an index, never another webhook's or account's. A store may
   * end a page early, with fewer than `limit` (even none) and `next` set, where a filter matched few
   * of many: the list ends only where `next` is `null`.
   */
  listDeliveries(accountId: string, webhookId: string, query: DeliveryQuery): Promise<DeliveryPage>;
  /**
   * Leases up to `limit` pending deliveries that are due (`nextAttemptAt <= now`) and not leased
   * (no lease, or one that ended before `now`), oldest due first, to `owner` until `leaseUntil`,
   * in one atomic step: two concurrent claims never return the same delivery. A due delivery whose
   * webhook no longer exists or is disabled, met before `limit` are leased, is cancelled instead of
   * returned and does not count toward `limit`. A due delivery whose webhook is held (its health's
   * `heldUntil` after `now`) is not leased: it is made due at `heldUntil` instead (a store may leave
   * some of a long backlog for its next claims). With `perAccount`, a delivery of an account that
   * holds `max` (its `inFlight` count plus those leased by this claim) is skipped, not leased
   * (`planClaim` in `rules/deliveries.ts`).
   */
  claimDeliveries(claim: Claim): Promise<ClaimedDelivery[]>;
  /**
   * The deliveries waiting for a worker at `now` (claimable: due, and no lease holds them),
   * counted up to `limit`, and the due time of the earliest of them (`null` when none waits). What
   * `portal.ready()` and the queue gauges read, often: a backlog costs it at most `limit` index
   * entries. Optional for a store of the host's own; without it those report no queue.
   */
  deliveryQueue?(now: string, limit: number): Promise<DeliveryQueue>;
  /**
   * The webhook's calls by the hour, from the hour `since` (ATOM) on, earliest first: every attempt
   * `recordAttempt` records is counted in its hour by outcome and duration bin (`rules/call-stats.ts`),
   * in the same atomic step. Hours are kept at least 8 days; reading costs at most that many rows.
   * Empty for another account's webhook.
   */
  callStats(accountId: string, webhookId: string, since: string): Promise<CallStatsHour[]>;
  /**
   * Appends `attempt` to the delivery `id` leased by `owner` (keeping the last `MAX_ATTEMPTS_KEPT`,
   * and counting it in `attemptCount`), sets its status and next attempt (`outcome`), and releases
   * the lease; nothing changes (`recorded: false`) when `owner` no longer holds the lease or the
   * delivery is no longer pending (cancelled meanwhile). Given `health`, the webhook's health takes
   * the attempt in the same atomic step (`healthAfterAttempt`), and when this very write disabled
   * the webhook `disabled` says why (`'gone'`, `'failing'`): of several instances on one store,
   * exactly one learns of each transition. A redeliver queued during the call makes the delivery
   * pending and due instead of the outcome (`recordAttempt` in `rules/deliveries.ts`): `dueAgain`,
   * so that the worker claims again at once. When the write ends its ordering key's turn
   * (`endsTurn`), it releases the key's earliest held delivery, due as the call ended
   * (`dueAfter`), in the same atomic step.
   */
  recordAttempt(record: AttemptToRecord): Promise<AttemptRecorded>;
  /**
   * Gives back the leases `owner` holds on the deliveries `ids`, none of them attempted: each is
   * claimable again at once, due as it was (`giveBack` in `rules/deliveries.ts`); an id `owner` holds
   * no lease on is passed over. What a worker does with deliveries it claimed ahead and can no longer
   * call within their lease (their webhook held through an outage). Optional for a store of the
   * host's own; without it they wait for their lease to run out.
   */
  giveBackDeliveries?(owner: string, ids: readonly string[]): Promise<void>;
  /**
   * Makes the delivery pending again, due at `nextAttemptAt` (now), lease dropped, attempts kept;
   * `null` when absent. While a lease holds it at `nextAttemptAt` (its call in flight), queues the
   * redeliver instead (`redeliverQueued`), the check and the change atomic: never a second call of
   * one delivery at once, and one more call once the current one is recorded. While another
   * delivery has its ordering key's turn, it is held instead (`redeliver` of `rules/deliveries.ts`).
   */
  redeliver(accountId: string, id: string, nextAttemptAt: string): Promise<DeliveryRecord | null>;

  /**
   * Queues again, once, every event of the webhook's type that it had a delivery of, created at or
   * after `since`, that no delivery of this webhook succeeded or still holds pending (exhausted, or
   * cancelled while the webhook was disabled; test calls are of another type): one new pending delivery each, made by
   * `recoveredDelivery` at `now`, oldest event first. Resolves the deliveries made; `null` when the
   * webhook is absent. Rejects with `WEBHOOK_DISABLED`, changing nothing, while it is disabled.
   * Atomic: two recoveries at once never queue one event twice.
   */
  recoverDeliveries(accountId: string, webhookId: string, since: string, now: string): Promise<DeliveryRecord[] | null>;

  /**
   * Optional: calls `onWork` soon after any instance sharing this store published events that made
   * deliveries, or redelivered one (PostgreSQL: `LISTEN`/`NOTIFY`), so a worker wakes before its next tick; keeps
   * trying while its backend is away (telling `onError` why), and calls `onWork` once it listens
   * again. Returns the function that stops it. Stores with no other instance to hear from leave it out.
   */
  subscribe?(onWork: () => void, onError?: (error: unknown) => void): () => void;
}

/** A webhook's health: failures in a row, automatic disabling (conformance: `storage-health.ts`). */
export interface WebhookHealthStore {
  /**
   * The webhook's health; `null` when the webhook is absent in this account. A webhook no attempt
   * has reached has a fresh one (`freshHealth`: enabled, nothing failed).
   */
  getWebhookHealth(accountId: string, webhookId: string): Promise<WebhookHealthRecord | null>;
  /**
   * Keeps the calls in flight a delivery worker now limits the webhook to (`inFlightLimit`, `null`
   * for none below its account's share), for the health to show; nothing when the webhook is absent.
   */
  setInFlightLimit(webhookId: string, limit: number | null): Promise<void>;
  /**
   * Disables the webhook by hand at `at` (`disableHealth`): `true` when this call disabled it,
   * `false` when it was disabled already (its reason kept), `null` when absent. Atomic.
   */
  disableWebhook(accountId: string, webhookId: string, at: string): Promise<boolean | null>;
  /**
   * Enables the webhook again, its run of failures forgotten (`enableHealth`): `true` when it was
   * disabled, `false` when it was enabled already, `null` when absent. Atomic.
   */
  enableWebhook(accountId: string, webhookId: string): Promise<boolean | null>;
}

/** What retention and the orphan sweep ask (conformance: `storage-retention.ts`). */
export interface RetentionStore {
  /**
   * Retention: removes up to `limit` finished deliveries (succeeded, failed or cancelled; never a
   * pending one) made before `before.deliveries`, and then up to `limit` events made before
   * `before.events` that no delivery names any more (a pending delivery's event is never removed,
   * nor a finished one's while it is kept); `null` leaves that kind alone. Oldest first. Resolves
   * how many of each went. Several instances may run it at once: each record is removed once.
   * Called on every retention tick, both `null` included: a store drops there what it keeps only
   * for a while (hourly call counts past their span).
   */
  removeExpired(
    before: { deliveries: string | null; events: string | null },
    limit: number,
  ): Promise<{ deliveries: number; events: number }>;

  /**
   * For a store that keeps events and finished deliveries in generations, each a span of time it
   * removes whole (SQL: a partition of each table): called on every retention tick before
   * `removeExpired`, starts a new generation once the current one began `spanMs` before `now` or
   * earlier. Such a store removes a record once everything in its generation is past its time:
   * a finished delivery is kept at least as long as the retention says and at most about `spanMs`
   * longer; an event, while any finished delivery of its generation is kept.
   */
  rotateHistory?(now: string, spanMs: number): Promise<void>;

  /**
   * Whether any record names the blob `key` (a document, file or attachment id, or `agc_<x>`, the
   * certificate of agreement `agr_<x>`): the orphan sweep asks.
   */
  isBlobReferenced(key: string): Promise<boolean>;
}

/** Idempotency keys (conformance: `storage-idempotency.ts`). */
export interface IdempotencyStore {
  /**
   * Claims an account's `Idempotency-Key` for one request, in one atomic step: when no record holds
   * the key, or the one that does expired (`expiresAt <= now`: a lapsed claim, an old answer), stores
   * a pending claim for `token` until `leaseUntil` and resolves `null`; otherwise changes nothing and
   * resolves that record (a live claim, or a completed answer). Two concurrent claims of one key never
   * both resolve `null`. An insert given an `IdempotencyCompletion` completes the claim: the record
   * becomes `completed` with its fingerprint and answer until its `expiresAt`, in the insert's atomic
   * step; when `token` no longer holds a pending claim on the key (its lease ran out and another request
   * took it), that insert rejects with `IDEMPOTENCY_KEY_IN_PROGRESS` and stores nothing. A pending claim
   * need not outlive the store instance when no other instance shares the store (memory, fs).
   */
  claimIdempotencyKey(claim: IdempotencyClaim): Promise<IdempotencyRecord | null>;
  /** Removes the pending claim on the key when `token` holds it (its request failed: the key is free again); `false`, changing nothing, otherwise. */
  releaseIdempotencyKey(accountId: string, key: string, token: string): Promise<boolean>;
  /** Removes up to `limit` records expired at `now` (`expiresAt <= now`), of any account; resolves how many. */
  sweepIdempotencyKeys(now: string, limit: number): Promise<number>;
}

/** Portal sessions (conformance: `storage-sessions.ts`). */
export interface PortalSessionStore {
  /**
   * Stores a new session and resolves `true`. Given `maxLive`, resolves `false` instead, storing
   * nothing, when the account holds that many live sessions already (unrevoked, expiring after the
   * new one's `createdAt`): the count and the insert are one atomic step. Rejects with
   * `RECORD_EXISTS` when its id is taken.
   */
  insertPortalSession(session: PortalSessionRecord, limits?: { maxLive?: number }): Promise<boolean>;
  /**
   * The session with this id, of any account (a request presenting its token names no account
   * yet), revoked or expired ones included until they are swept; `null` when absent.
   */
  getPortalSession(id: string): Promise<PortalSessionRecord | null>;
  /**
   * Revokes the account's session at `at`: `true` when this call revoked it, `false` when it was
   * revoked already (its time kept), `null` when absent in this account.
   */
  revokePortalSession(accountId: string, id: string, at: string): Promise<boolean | null>;
  /** Removes up to `limit` sessions that expired at `now` (`expiresAt <= now`), of any account; resolves how many. */
  sweepPortalSessions(now: string, limit: number): Promise<number>;
}

/**
 * Where records live. Every read is scoped to an account: a record of another account is absent.
 * Methods resolve `null` (or `false`) when a record is absent and reject only on I/O failure (a
 * backend out of reach: the catalogue's `STORAGE_UNAVAILABLE`), or when a record with the same id
 * already exists (`RECORD_EXISTS`: a bug, never a client's doing).
 * A write that resolves is durable to the degree the adapter promises (memory: until the process ends).
 * The store of each area is a port of its own, held to its conformance file in `test/conformance/`.
 */
export interface Storage
  extends StoreLifecycle,
    WebhookStore,
    FileStore,
    AgreementStore,
    AttachmentStore,
    OutboxStore,
    WebhookHealthStore,
    RetentionStore,
    IdempotencyStore,
    PortalSessionStore {}

/** An attempt a worker made of a delivery it leased, to record (`Storage.recordAttempt`). */
export interface AttemptToRecord {
  /** The delivery. */
  id: string;
  /** Who leased it (the worker's `owner`). */
  owner: string;
  attempt: DeliveryAttempt;
  outcome: { status: DeliveryStatus; nextAttemptAt: string | null };
  /** Given, the webhook's health takes the attempt in the same atomic step. */
  health?: HealthRule;
  /**
   * Given (ATOM), the receiver asked to hold the webhook's calls until then (`holdOf`): the
   * webhook's health keeps the later of this and the hold it has, in the same atomic step.
   */
  hold?: string;
}

/** What `Storage.recordAttempt` resolves. */
export interface AttemptRecorded {
  /** `false`: nothing changed (the lease was lost, or the delivery is no longer pending). */
  recorded: boolean;
  /** Why this very write disabled the webhook; `null` when it did not. */
  disabled: AutomaticDisableReason | null;
  /** A redeliver queued during the call left the delivery pending and due now. */
  dueAgain: boolean;
}

/** A byte range, both ends inclusive, as in an HTTP `Range` header. */
export interface ByteRange {
  start: number;
  end: number;
}

export interface BlobInfo {
  key: string;
  size: number;
  /** When the blob was written, ATOM. */
  createdAt: string;
}

/** Where bytes live: agreement documents, files, attachments; each under the id of its record. */
export interface BlobStore {
  /** Prepares the store. Called once by `createPortal` before any other method. */
  open?(): Promise<void>;
  /** Releases what `open` took. */
  close?(): Promise<void>;
  /**
   * Streams `body` in with backpressure and resolves its size once every byte is durably stored.
   * A blob is visible to `get` only once complete. When `body` errors or is destroyed, `put` rejects
   * with that error and nothing is left under `key`. A chunk is the store's only until it asks for
   * the next: a producer may reuse its buffer then, so a store that keeps bytes across chunks copies them.
   */
  put(key: string, body: Readable | AsyncIterable<Uint8Array>): Promise<{ size: number }>;
  /** The blob's bytes (only `range`, when given) as a stream, or `null` when absent. */
  get(key: string, range?: ByteRange): Promise<Readable | null>;
  /**
   * The blob's bytes (only `range`, when given) read into the caller's buffers, or `null` when
   * absent. Optional, for a store that reads from a file: a download then goes out through two
   * buffers used again and again, where a stream hands out a new buffer for every chunk read and
   * leaves the garbage collector to find them. Where a store has it, downloads read through it
   * instead of `get`.
   */
  reader?(key: string, range?: ByteRange): Promise<BlobReader | null>;
  /** Size and write time, or `null` when absent. */
  stat(key: string): Promise<BlobInfo | null>;
  /** Removes the blob; `false` when absent. */
  delete(key: string): Promise<boolean>;
  /** Every blob written before `before` (ATOM): the orphan sweep walks these. */
  listBefore(before: string): AsyncIterable<BlobInfo>;
  /**
   * A URL that serves the blob's bytes (`GET`/`HEAD`, `Range` honoured) straight from the store for
   * `expiresInSeconds`, answered with the given `Content-Type` and `Content-Disposition`; absence of
   * the blob is not checked. Only on stores that serve bytes themselves: download links redirect to it.
   */
  presign?(key: string, options: PresignOptions): Promise<string>;
}

/** A blob's bytes, read in order into buffers of the caller's (`BlobStore.reader`). */
export interface BlobReader {
  /**
   * Reads the next bytes into `into`, as many as fit; resolves how many, `0` once every byte has
   * been read. `into` is the caller's again once the read resolves. One read at a time.
   */
  read(into: Uint8Array): Promise<number>;
  /** Releases what the reader holds (a file descriptor); once, and never while a read is pending. Later calls do nothing. */
  close(): Promise<void>;
}

/** What a presigned URL serves: for how long, and the headers its answer carries. */
export interface PresignOptions {
  expiresInSeconds: number;
  contentType: string;
  contentDisposition: string;
}

/** One webhook call, fully prepared: the transport only sends it. */
export interface WebhookCall {
  /** The account the call is made for: a transport never lets one account's connection carry another's call. */
  accountId: string;
  /** The webhook the call is for: an SQS FIFO queue's message group when the event has no ordering key. */
  webhookId: string;
  url: string;
  /**
   * The event's ordering key, when it has one. HTTP sends it nowhere; a broker routes by it (routing
   * key and subject suffix, topic level, stream field, FIFO message group) so its consumers can keep
   * the key's order.
   */
  orderingKey?: string;
  headers: Record<string, string>;
  body: string;
}

/** What came of a call: a status code, or the error that stopped one from arriving. */
export interface WebhookCallResult {
  statusCode: number | null;
  /** Response headers, lower-case names (`retry-after` is read from these). */
  headers: Record<string, string | string[] | undefined>;
  /** Why no status came back (timeout, refused address, network error); `null` when one did. */
  error: string | null;
  /**
   * `true` when the call never left the portal's side: its own egress proxy failed (it could not be
   * reached, or asked for other credentials with `407`). The receiver is not to blame: the attempt
   * is logged, but counts neither toward the webhook's auto-disable nor toward the delivery's retries.
   */
  local?: boolean;
}

/** Performs webhook calls. Resolves for every outcome; rejects never. */
export interface WebhookTransport {
  /**
   * Makes the call within `timeoutMs`. The worker cuts off a transport that overruns by a second,
   * and then aborts `signal`: the call is to end at once, its result no longer read.
   */
  send(call: WebhookCall, options: { timeoutMs: number; signal?: AbortSignal }): Promise<WebhookCallResult>;
  /** Releases sockets and agents. */
  close?(): Promise<void>;
}

/** What the portal gives a destination when it opens it: the rules its HTTP transport follows too. */
export interface DestinationContext {
  /** Publish to loopback, private and other non-public broker addresses too (`webhooks.allowPrivateNetworks`). */
  allowPrivateNetworks: boolean;
  /** Where a refused address's details go (the operator's log; the tenant reads only that it was refused). */
  logger?: Logger;
}

/**
 * Where the calls of webhooks whose URL is not `http(s)` go: a broker the tenant names in the URL
 * (`customer-portal/adapters/amqp`, `…/nats`, `…/mqtt`, `…/redis`, `…/sqs`). The option
 * `destinations` holds one per kind; the URL's scheme picks it.
 */
export interface WebhookDestination {
  /** The URL schemes it takes, lower case, without the colon (`['amqp', 'amqps']`). */
  readonly schemes: readonly string[];
  /** What is wrong with a webhook URL of its schemes (a missing stream, a bad option), or `null`: checked when a webhook is made. */
  check(url: URL): string | null;
  /**
   * Starts it: a transport whose `send` publishes the call's body with its headers and resolves once
   * the broker acknowledged it (`statusCode: null, error: null`) or with the error that stopped it.
   */
  open(context: DestinationContext): WebhookTransport;
}

/** One mail to a signer, as the `notifier` option receives it. */
export interface NotifierMessage {
  kind: MailKind;
  /** `"First Last <address>"`. */
  to: string;
  subject: string;
  text: string;
  html?: string;
  attachments?: { filename: string; contentType: string; content: Buffer }[];
  accountId: string;
  agreementId: string;
  signerId?: string;
}

/** Sends mail to signers: `customer-portal/adapters/smtp`'s `smtpNotifier`, or the host's own. Rejects when the mail was not accepted. */
export interface Notifier {
  send(message: NotifierMessage): Promise<void>;
}
