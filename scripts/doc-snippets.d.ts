// The names the docs' TypeScript snippets take from the text around them.
import type * as nodeFs from 'node:fs';
import type * as nodeHttp from 'node:http';
import type { S3Client as AwsS3Client } from '@aws-sdk/client-s3';
import type { Express } from 'express';
import type pgModule from 'pg';
import type {
  AuthOption,
  BlobStore,
  DeliveryRecord,
  EventRecord,
  IdempotencyRecord,
  Portal,
  PortalSessionRecord,
  Storage,
  WebhookHealthRecord,
  WebhookRecord,
} from 'customer-portal';
import type * as portalPackage from 'customer-portal';
import type * as sqlAdapter from 'customer-portal/adapters/sql';

declare global {
  const portal: Portal;
  const createPortal: typeof portalPackage.createPortal;
  const sqlAdapters: typeof sqlAdapter.sqlAdapters;
  const fs: typeof nodeFs;
  const http: typeof nodeHttp;
  const pg: typeof pgModule;
  const S3Client: typeof AwsS3Client;
  const app: Express;
  const accountId: string;
  const auth: AuthOption;
  const signingKeys: string[];
  /** What a host does with an operational event: its own alerting and mail. */
  const alerts: { notify(accountId: string, text: string): void };
  const mailer: { send(to: string, text: string): Promise<void> };
  const ownerOf: (accountId: string) => string;
  /** The adapter docs/adapters.md imagines: `adapters/mine`. */
  const myStorage: (options: { dir: string }) => Storage;
  const myBlobs: (options: { dir: string; clock: () => Date }) => BlobStore;
  const readMyStore: (dir: string) => Promise<{
    events: Map<string, EventRecord>;
    deliveries: Map<string, DeliveryRecord>;
    webhooks: Map<string, WebhookRecord>;
    idempotencyKeys: Map<string, IdempotencyRecord>;
    health: Map<string, WebhookHealthRecord>;
    sessions: Map<string, PortalSessionRecord>;
  }>;
}
