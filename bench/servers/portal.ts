/** The portal on memory storage, holding the fixture's records (inserted as its storage keeps them). */
import http from 'node:http';
import { memoryStorage } from '../../adapters/memory/index.js';
import { createPortal } from '../../src/index.js';
import { ACCOUNT, ENTRY_COUNT, KEY, announce, storageRecords } from './fixture.js';
import { BENCH_SIGNING_KEYS } from '../support/signing-keys.js';

const storage = memoryStorage();
const portal = await createPortal({
  auth: { apiKeys: { [KEY]: ACCOUNT } },
  signingKeys: BENCH_SIGNING_KEYS,
  webhooks: { worker: false },
  storage,
});
const records = storageRecords();
await storage.insertFileEntry(records.directory);
for (const entry of records.entries) await storage.insertFileEntry(entry);
for (const webhook of records.webhooks) await storage.insertWebhook(webhook);
const server = http
  .createServer(portal.handler)
  .listen(0, '127.0.0.1', () => announce(server, { entries: ENTRY_COUNT }));
