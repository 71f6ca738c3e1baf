import { suite } from 'uvu';
import { agreementStorageTests } from './storage-agreements.js';
import { callStatsStorageTests } from './storage-call-stats.js';
import { attachmentStorageTests } from './storage-attachments.js';
import { fileStorageTests } from './storage-files.js';
import { idempotencyStorageTests } from './storage-idempotency.js';
import { healthStorageTests } from './storage-health.js';
import { outboxStorageTests } from './storage-outbox.js';
import { orderingStorageTests } from './storage-ordering.js';
import { retentionStorageTests } from './storage-retention.js';
import { sessionStorageTests } from './storage-sessions.js';
import { rotationStorageTests } from './storage-rotation.js';
import { webhookStorageTests } from './storage-webhooks.js';
import type { StorageFactory } from './types.js';

export type { StorageFactory } from './types.js';

/**
 * Runs every `Storage` behaviour against the adapter `factory` makes: one suite for all adapters,
 * so that "passes the conformance suite" is the definition of a working adapter. One file per area.
 */
export function storageSuite(factory: StorageFactory): void {
  const test = suite(`Storage conformance: ${factory.name}`);
  webhookStorageTests(test, factory);
  rotationStorageTests(test, factory);
  fileStorageTests(test, factory);
  attachmentStorageTests(test, factory);
  outboxStorageTests(test, factory);
  orderingStorageTests(test, factory);
  healthStorageTests(test, factory);
  retentionStorageTests(test, factory);
  callStatsStorageTests(test, factory);
  agreementStorageTests(test, factory);
  idempotencyStorageTests(test, factory);
  sessionStorageTests(test, factory);
  test.run();
}
