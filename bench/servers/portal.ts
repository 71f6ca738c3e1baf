import http from 'node:http';
import { createPortal } from '../../src/index.js';
import { ACCOUNT, ENTRY_COUNT, KEY, announce } from './fixture.js';

const portal = await createPortal({ auth: { apiKeys: { [KEY]: ACCOUNT } }, webhooks: { worker: false } });
const hook = await portal.webhooks.create(ACCOUNT, { type: 'customer-created', url: 'https://receiver.example/hook' });
const directory = await portal.files.createDirectory(ACCOUNT, { name: 'Bench' });
for (let i = 0; i < ENTRY_COUNT; i++) {
  await portal.files.put(ACCOUNT, { name: `document-${String(i).padStart(4, '0')}.pdf`, mime: 'application/pdf', directoryId: directory.id, body: Buffer.alloc(8) });
}
const server = http.createServer(portal.handler).listen(0, '127.0.0.1', () =>
  announce(server, { webhookId: hook.id, directoryId: directory.id }),
);
