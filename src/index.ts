export { createPortal, type Portal } from './portal.js';
export type { PortalOptions, WebhookOptions } from './options.js';
export type { AuthFunction, AuthOption } from './auth.js';
export type { Logger } from './logger.js';
export { HttpError, StorageUnavailableError } from './http-error.js';
export { openapi } from './openapi.js';
export {
  verifyWebhook,
  WebhookVerificationError,
  type WebhookHeaders,
  type WebhookVerificationFailure,
} from './webhook-signature.js';
export type {
  BlobInfo,
  BlobStore,
  ByteRange,
  Storage,
  WebhookCall,
  WebhookCallResult,
  WebhookTransport,
} from './ports.js';
export type * from './records.js';
export type { FileInput, DirectoryInput, BlobBody } from './services/files.js';
export type { WebhookInput, WebhookService } from './services/webhooks.js';
export type { EventService } from './services/events.js';
export type { WebhookWorker } from './services/webhook-worker.js';
export type { AttachmentInput, AttachmentRef, DownloadLink } from './services/tickets.js';
export type { AgreementApi, SignInput } from './services/agreements.js';
