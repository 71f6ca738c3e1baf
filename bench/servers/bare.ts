/**
 * The floor: `node:http` as one would write this endpoint by hand, fastest form: the same key check,
 * a map lookup, `JSON.stringify`, and every header in one flat `writeHead` list (as the portal writes).
 */
import http from 'node:http';
import {
  ENTRY_COUNT,
  INVALID_REALM,
  MESSAGES,
  REALM,
  announce,
  directoryId,
  entries,
  keyMatches,
  requestIdOf,
  sendJson,
  webhooks,
} from './fixture.js';

const listing = entries();
const byId = new Map(webhooks.map((one) => [one.id, one]));
const WEBHOOKS = '/v1/webhooks/';
const FILES = '/v1/files?directoryId=';
const message = (text: string) => JSON.stringify({ message: text });

const server = http.createServer((req, res) => {
  const url = req.url!;
  const requestId = requestIdOf(req);
  const authorization = req.headers.authorization;
  if (authorization === undefined)
    return sendJson(res, 401, requestId, message(MESSAGES.missing), 'www-authenticate', REALM);
  if (!keyMatches(authorization))
    return sendJson(res, 401, requestId, message(MESSAGES.invalid), 'www-authenticate', INVALID_REALM);
  if (url.startsWith(WEBHOOKS)) {
    const id = url.slice(WEBHOOKS.length);
    const found = byId.get(id);
    return found
      ? sendJson(res, 200, requestId, JSON.stringify(found))
      : sendJson(res, 404, requestId, message(MESSAGES.webhookNotFound(id)));
  }
  if (url.startsWith(FILES)) {
    const id = url.slice(FILES.length);
    if (id === directoryId) return sendJson(res, 200, requestId, JSON.stringify({ data: listing }));
    return sendJson(res, 404, requestId, message(MESSAGES.directoryNotFound(id)));
  }
  sendJson(res, 404, requestId, message('Not found'));
});
server.listen(0, '127.0.0.1', () => announce(server, { entries: ENTRY_COUNT }));
