import type { AgreementRecord } from './records.js';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createAuthenticator, type AuthOption } from './http/auth.js';
import { createHandler } from './http/handler.js';
import { routeTable } from './http/route-table.js';
import { createPage } from './http/page.js';
import { processWarnings, silentLogger } from './shared/logger.js';
import { errorMessage } from './errors.js';
import {
  DEFAULT_BASE_PATH,
  DEFAULT_EVENT_TYPES,
  apiKeysFromEnv,
  normalizeBasePath,
  normalizePublicUrl,
  resolveDisclosure,
  resolveFrameAncestors,
  resolveUiPath,
  type PortalOptions,
} from './options.js';
import { createOrphanSweep } from './domain/orphan-sweep.js';
import { createReadiness, readQueue, type Readiness } from './domain/readiness.js';
import { loadTelemetry } from './shared/telemetry.js';
import type { BlobStore, Storage, WebhookTransport } from './ports.js';
// The one place the core reaches into an adapter: the contract makes the memory adapters the
// default storage and blob store, and the HTTP transport the default transport.
import { httpTransport } from '../adapters/http-transport/index.js';
import { memoryBlobs, memoryStorage } from '../adapters/memory/index.js';
import { createLinkSigner, resolveSigningKeys } from './domain/download-links.js';
import { createAgreementService, type AgreementApi } from './domain/agreements.js';
import { createEventService, type EventService } from './domain/events.js';
import { createFileService, type FileService } from './domain/files.js';
import { createTicketService, type TicketService } from './domain/tickets.js';
import { createDownloadService } from './domain/downloads.js';
import { createSigningService } from './domain/signing.js';
import { createAgreementTimer } from './domain/agreement-timer.js';
import { createBranding } from './domain/branding.js';
import { createCertificates } from './domain/certificates.js';
import { createSignerMail } from './domain/signer-mail.js';
import { createSigningTokens } from './domain/signing-tokens.js';
import { createCompletedCopies } from './domain/completed-copies.js';
import { createSealer } from './domain/sealing.js';
import { createPdfWork } from './domain/pdf-work.js';
import { createRetention, resolveRetention } from './domain/retention.js';
import { createWebhookWorker, type WebhookWorker } from './webhooks/worker.js';
import { createWebhookService, type WebhookService } from './domain/webhooks.js';
import { createEventCatalogue, type EventCatalogue } from './domain/event-types.js';
import { libraryEventDefinitions } from './openapi/event-catalogue.js';
import {
  type PortalSessionLink,
  type PortalSessionOptions,
  createPortalSessionService,
} from './domain/portal-sessions.js';
import { resolveWebhookOptions } from './webhooks/options.js';
import { routedTransport, routesOf } from './webhooks/destinations.js';
import {
  createOperationalEvents,
  type OperationalEventType,
  type OperationalListener,
} from './domain/operational-events.js';

export interface Portal {
  /** The `node:http` request handler; with `next` (Express, connect), paths outside `basePath` fall through. */
  handler(req: IncomingMessage, res: ServerResponse, next?: (error?: unknown) => void): void;
  /**
   * Webhook records: `create`, `get`, `list`, `delete`, `setFilter`, `dryRun`, `rotateSecret`, `deliveries`, `stats`, `redeliver`,
   * `sendTest`, and their lifecycle: `health`, `disable`, `enable`, `recover`.
   */
  webhooks: Omit<WebhookService, 'createIdempotent'>;
  /** Events: `publish` stores one and enqueues its deliveries. */
  events: EventService;
  /**
   * The event catalogue: `define(name, { schema, description?, example?, deprecated? })` gives a type
   * of `eventTypes` a JSON Schema its data must match; `list()` answers every type (`GET /event-types`).
   */
  eventTypes: Pick<EventCatalogue, 'define' | 'list'>;
  /** The delivery worker (`start`, `stop`, `tick`); `null` when `webhooks.worker` is `false`. */
  worker: WebhookWorker | null;
  /** The file tree: `list`, `createDirectory`, `put`, `get`, `delete`, `downloadLink`. */
  files: Omit<FileService, 'receive' | 'place' | 'discard'>;
  /** Ticket message attachments: `putAttachment`, `getAttachment`, `deleteAttachment`, `downloadLink`. */
  tickets: Pick<TicketService, 'putAttachment' | 'getAttachment' | 'deleteAttachment' | 'downloadLink'>;
  /**
   * Agreements: `get`, `list` (a page, newest first, without signature images), `sign` for one
   * signer, `documentDownloadLink` for one of their documents, `signedCopyLink` for its completed copy, `verify` for a PDF someone holds,
   * `voidAgreement` and `correctSigner` for the sender's changes to an open agreement, `delete` to remove one.
   */
  agreements: AgreementApi;
  /**
   * Portal sessions: `create(accountId, { ttlSeconds?, scopes?, readOnly? })` resolves what
   * `POST /v1/portal-sessions` answers (its `url` absolute with `publicUrl`, else a path); `revoke(accountId, id)`.
   */
  sessions: {
    create(accountId: string, options?: PortalSessionOptions): Promise<PortalSessionLink>;
    revoke(accountId: string, sessionId: string): Promise<void>;
  };
  /**
   * Listens to the portal's operational events: `webhook.disabled`, `delivery.exhausted`,
   * `delivery.recovered`, each emitted once, by the instance that made the change. A listener that
   * throws is logged and never breaks delivery. Returns the function that stops the listener.
   */
  on<T extends OperationalEventType>(type: T, listener: OperationalListener<T>): () => void;
  /** Stops a listener `on` added; `false` when it was not listening. */
  off<T extends OperationalEventType>(type: T, listener: OperationalListener<T>): boolean;
  /**
   * Whether this portal can serve: the record store and the blob store each answer within 2 s, and
   * the delivery worker runs. `checks.worker` also tells how many deliveries wait and how long the
   * earliest has (`lagMs`). What a readiness probe (`GET /readyz` of the standalone server) answers.
   */
  ready(): Promise<Readiness>;
  /** Stops background work and closes the adapters. */
  close(): Promise<void>;
}

function resolveAuth(auth: AuthOption | undefined): AuthOption {
  if (auth !== undefined) return auth;
  const apiKeys = apiKeysFromEnv(process.env.PORTAL_API_KEYS);
  if (apiKeys.length === 0) {
    throw new TypeError('createPortal: give `auth` (API keys or a function), or set PORTAL_API_KEYS');
  }
  return { apiKeys };
}

/** Builds a portal and resolves once its adapters are open (tables migrated, locks taken). */
export async function createPortal(options: PortalOptions = {}): Promise<Portal> {
  const clock = options.clock ?? (() => new Date());
  const logger = options.logger ?? silentLogger;
  const basePath = normalizeBasePath(options.basePath ?? DEFAULT_BASE_PATH);
  const publicUrl = options.publicUrl === undefined ? undefined : normalizePublicUrl(options.publicUrl);
  const authenticate = createAuthenticator(resolveAuth(options.auth));
  const storage: Storage = options.storage ?? memoryStorage();
  const blobs: BlobStore = options.blobs ?? memoryBlobs({ clock });
  const eventTypes = options.eventTypes ?? DEFAULT_EVENT_TYPES;
  const webhookOptions = resolveWebhookOptions(options.webhooks);
  const reminderIntervalMs = options.agreements?.reminderIntervalMs;
  const retention = resolveRetention(options.retention);
  if (reminderIntervalMs !== undefined && !(Number.isSafeInteger(reminderIntervalMs) && reminderIntervalMs >= 60_000)) {
    throw new TypeError(
      'agreements.reminderIntervalMs must be a whole number of milliseconds, at least 60000 (a minute)',
    );
  }
  const uiPath = resolveUiPath(options.ui, basePath);
  if (uiPath !== null && options.extensions === false) {
    throw new TypeError(
      'ui: the portal page calls the extension routes (webhooks, deliveries); it cannot be served with extensions: false',
    );
  }
  const destinations = routesOf(options.destinations);
  // Read before any adapter opens: a page that was never built stops the start with nothing to undo.
  const page =
    uiPath === null
      ? undefined
      : await createPage({ path: uiPath, basePath, eventTypes, schemes: destinations.schemes });
  const signer = createLinkSigner(resolveSigningKeys(options.signingKeys, options.logger ?? processWarnings));

  // The signing options are checked before any adapter opens, too.
  const frameAncestors = resolveFrameAncestors(options.signing?.frameAncestors);
  const disclosure = resolveDisclosure(options.signing?.disclosure);
  const brandingOf = createBranding(options.branding, logger);
  if (options.notifier !== undefined && typeof options.notifier?.send !== 'function')
    throw new TypeError('notifier must be an object with a send(message) method');
  const sealer = await createSealer(options.sealing);
  // Senders' PDFs are opened only there: counted at creation, stamped and sealed once signed.
  const pdf = createPdfWork(options.sealing);

  await storage.open?.();
  try {
    await blobs.open?.();
  } catch (error) {
    await storage.close?.();
    throw error;
  }

  const operational = createOperationalEvents(logger);
  // On when @opentelemetry/api is installed; what it reports goes to whatever SDK the host registered.
  const telemetry = await loadTelemetry();
  let worker: WebhookWorker | null = null;
  /** Asks the worker for a pass now; every service that stores events calls it after the write. */
  const notify = () => worker?.poke();
  // Made as each agreement closes, by whichever part closed it, and kept: a request only reads one.
  const certificates = createCertificates({ storage, blobs, clock, logger, sealer, brandingOf });
  const tokens = createSigningTokens(signer);
  const downloads = createDownloadService({ storage, blobs, clock, signer, publicUrl });
  const signerMail = createSignerMail({
    storage,
    clock,
    logger,
    notifier: options.notifier,
    keys: signer,
    tokens,
    certificates,
    blobs,
    retrySchedule: webhookOptions.retrySchedule,
    brandingOf,
    downloads,
  });
  const mailQueued = signerMail.mailing
    ? { queued: (record: AgreementRecord) => signerMail.kick(record.accountId, record.id) }
    : undefined;
  // The completed copies of each signed agreement, made off the request and kept.
  const copies = createCompletedCopies({
    storage,
    blobs,
    clock,
    logger,
    pdf,
    retrySchedule: webhookOptions.retrySchedule,
    emit: operational.emit,
    mail: mailQueued,
  });
  const copiesOwed = { owed: (record: AgreementRecord) => copies.kick(record.accountId, record.id) };
  let transport: WebhookTransport | undefined = options.transport;
  if (webhookOptions.worker) {
    const { timeoutMs, allowPrivateNetworks } = webhookOptions;
    transport ??= httpTransport({ timeoutMs, allowPrivateNetworks, logger });
    if (options.destinations !== undefined)
      transport = routedTransport(transport, destinations, { allowPrivateNetworks, logger });
    const agreementTimer = createAgreementTimer({
      storage,
      clock,
      logger,
      notify: () => worker?.poke(),
      reminderIntervalMs,
      closed: certificates.prepare,
      mail: signerMail.mailing ? { sender: signerMail, baseUrl: publicUrl } : undefined,
      copies,
    });
    const removeExpired = createRetention({ storage, clock, logger, retention, telemetry });
    // Each part on its own: one failing (its error logged by the worker) does not hold back the other.
    const housekeeping = async () => {
      const outcomes = await Promise.allSettled([agreementTimer(), removeExpired()]);
      const failed = outcomes.find((outcome): outcome is PromiseRejectedResult => outcome.status === 'rejected');
      if (failed !== undefined) throw failed.reason;
    };
    worker = createWebhookWorker({
      storage,
      transport,
      clock,
      logger,
      ...webhookOptions,
      emit: operational.emit,
      housekeeping,
      telemetry,
    });
  }

  const webhooks = createWebhookService({
    storage,
    clock,
    eventTypes,
    notify,
    emit: operational.emit,
    maxPerAccount: webhookOptions.maxPerAccount,
    signer,
    publicUrl,
    urls: destinations,
  });
  const catalogue = createEventCatalogue(eventTypes, libraryEventDefinitions());
  const events = createEventService({ storage, clock, eventTypes, notify, catalogue });
  const files = createFileService({ storage, blobs, clock, downloads });
  const tickets = createTicketService({ storage, blobs, clock, downloads });
  const agreements = createAgreementService({
    storage,
    blobs,
    clock,
    logger,
    notify,
    downloads,
    reminderIntervalMs,
    closed: certificates.prepare,
    erased: certificates.remake,
    ...(mailQueued === undefined ? {} : { mail: mailQueued }),
    copies: copiesOwed,
    pdf,
  });
  const signing = createSigningService({
    storage,
    clock,
    signer,
    tokens,
    downloads,
    notify,
    certificates,
    mail: signerMail,
    copies: copiesOwed,
    disclosure,
    brandingOf,
  });
  const sessions = createPortalSessionService({ storage, clock });
  /** The portal page's address under an API base URL (`<root><basePath>`): `<root><uiPath>/`. */
  const pageUrl = (baseUrl: string) =>
    uiPath === null ? null : `${baseUrl.endsWith(basePath) ? baseUrl.slice(0, -basePath.length) : baseUrl}${uiPath}/`;
  const extensions = options.extensions ?? true;
  const routes = routeTable(
    { webhooks, catalogue, files, tickets, downloads, agreements, signing, sessions, brandingOf },
    { extensions, frameAncestors, pageUrl },
  );
  const orphanSweep = createOrphanSweep({ storage, blobs, clock, logger });

  const handler = createHandler({
    basePath,
    routes,
    authenticate,
    logger,
    logRequests: options.logger !== undefined,
    publicUrl,
    trustProxy: options.trustProxy ?? false,
    page,
    telemetry,
    sessions: sessions.verify,
  });

  worker?.start();
  // Another instance's publish wakes this worker at once; the cron tick stays the fallback.
  const unsubscribe =
    worker === null
      ? undefined
      : storage.subscribe?.(
          () => worker?.poke(),
          (error) =>
            logger.warn(
              { err: errorMessage(error) },
              'webhook worker: not listening for new work for now; the tick still polls',
            ),
        );
  orphanSweep.start();
  const stopObserving = telemetry.observeQueue(() => readQueue(storage, clock()));
  let closing: Promise<void> | undefined;
  return {
    handler,
    webhooks,
    events,
    eventTypes: { define: catalogue.define, list: catalogue.list },
    worker,
    files: {
      list: files.list,
      createDirectory: files.createDirectory,
      put: files.put,
      get: files.get,
      delete: files.delete,
      downloadLink: files.downloadLink,
    },
    tickets: {
      putAttachment: tickets.putAttachment,
      getAttachment: tickets.getAttachment,
      deleteAttachment: tickets.deleteAttachment,
      downloadLink: tickets.downloadLink,
    },
    agreements: {
      get: agreements.get,
      list: agreements.list,
      sign: agreements.sign,
      documentDownloadLink: agreements.documentDownloadLink,
      signedCopyLink: agreements.signedCopyLink,
      verify: agreements.verify,
      voidAgreement: agreements.voidAgreement,
      correctSigner: agreements.correctSigner,
      delete: agreements.delete,
      erasePersonalData: agreements.erasePersonalData,
    },
    sessions: {
      create: (accountId, sessionOptions = {}) =>
        sessions.create(accountId, sessionOptions, pageUrl(publicUrl ?? basePath)),
      revoke: sessions.revoke,
    },
    on: operational.on,
    off: operational.off,
    ready: createReadiness({ storage, blobs, clock, workerRunning: () => (worker === null ? null : worker.running) }),
    close() {
      closing ??= (async () => {
        // The worker and the sweep first: work in flight still writes to the open adapters.
        unsubscribe?.();
        stopObserving();
        await Promise.all([worker?.stop(), orphanSweep.stop()]);
        // A certificate being made still writes to the blob store.
        await copies.settled();
        await signerMail.settled();
        await certificates.settled();
        await pdf.close();
        await Promise.allSettled([transport?.close?.(), storage.close?.(), blobs.close?.()]);
      })();
      return closing;
    },
  };
}
