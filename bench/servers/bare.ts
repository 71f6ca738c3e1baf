/** The floor: node:http with the same key check, a map lookup and a JSON reply, nothing else. */
import http from 'node:http';
import { ENTRY_COUNT, announce, entries, keyMatches, sendJson, webhook } from './fixture.js';

const directoryId = 'fsd_benchDirectory00000001';
const listing = entries(directoryId);
const webhooks = new Map([[webhook.id, webhook]]);
const WEBHOOKS = '/v1/webhooks/';
const FILES = '/v1/files?directoryId=';

const server = http.createServer((req, res) => {
  const url = req.url!;
  if (!keyMatches(req.headers.authorization)) {
    return sendJson(res, 401, { message: 'The API key is not valid.' }, { 'WWW-Authenticate': 'Bearer realm="customer-portal"' });
  }
  if (url.startsWith(WEBHOOKS)) {
    const found = webhooks.get(url.slice(WEBHOOKS.length));
    return found ? sendJson(res, 200, found) : sendJson(res, 404, { message: 'No webhook in this account.' });
  }
  if (url.startsWith(FILES) && url.slice(FILES.length) === directoryId) return sendJson(res, 200, { data: listing });
  sendJson(res, 404, { message: 'Not found' });
});
server.listen(0, '127.0.0.1', () => announce(server, { webhookId: webhook.id, directoryId, entries: ENTRY_COUNT }));
