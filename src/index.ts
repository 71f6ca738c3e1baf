export { createPortal, type Portal } from './portal.js';
export type { Branding, PortalOptions, RetentionOptions, SigningOptions, WebhookOptions } from './options.js';
export type { Notifier, NotifierMessage } from './ports.js';
export type { Disclosure, SigningView } from './domain/signing.js';
export type { AuthFunction, AuthOption } from './http/auth.js';
export { jsonLineLogger, type Logger } from './shared/logger.js';
export { PortalError, PortalError as HttpError, ERRORS, type ErrorCode } from './errors.js';
export { openapi } from './openapi/openapi.js';
export {
  verifyWebhook,
  WebhookVerificationError,
  type WebhookHeaders,
  type WebhookVerificationFailure,
} from './webhooks/signature.js';
export type {
  BlobInfo,
  BlobReader,
  BlobStore,
  ByteRange,
  AttemptRecorded,
  AttemptToRecord,
  Claim,
  DeliveryQueue,
  HealthRule,
  PresignOptions,
  Storage,
  StoreLifecycle,
  WebhookStore,
  FileStore,
  AgreementStore,
  AttachmentStore,
  OutboxStore,
  WebhookHealthStore,
  RetentionStore,
  IdempotencyStore,
  PortalSessionStore,
  WebhookCall,
  WebhookChanges,
  WebhookCallResult,
  WebhookTransport,
  WebhookDestination,
  DestinationContext,
} from './ports.js';
export type { Destinations } from './webhooks/destinations.js';
export type * from './records.js';
export type { FileInput, DirectoryInput, BlobBody } from './domain/files.js';
export type { SecretRotationInput } from './domain/inputs.js';
export type {
  DryRunEvent,
  DryRunInput,
  DryRunResult,
  RecoverInput,
  WebhookInput,
  WebhookService,
} from './domain/webhooks.js';
export type { EventFilter } from './rules/event-filter.js';
export type {
  DeliveryExhaustedEvent,
  DeliveryRecoveredEvent,
  OperationalEvent,
  OperationalEventOf,
  OperationalEventType,
  OperationalListener,
  SealingDegradedEvent,
  SealingFailedEvent,
  WebhookDisabledEvent,
} from './domain/operational-events.js';
export type { SealingOptions, SealLevel } from './domain/sealing.js';
export type { PadesLevel } from './domain/seal-check.js';
export type { Verification } from './domain/agreements.js';
export type { EventService, PublishOptions } from './domain/events.js';
export type { EventType, EventTypeDefinition } from './domain/event-types.js';
export type { WebhookWorker } from './webhooks/worker.js';
export type { CheckResult, Readiness, WorkerCheck } from './domain/readiness.js';
export type { AttachmentInput, AttachmentRef } from './domain/tickets.js';
export type { AgreementApi, SignInput } from './domain/agreements.js';
export type { PortalSessionLink, PortalSessionOptions } from './domain/portal-sessions.js';
