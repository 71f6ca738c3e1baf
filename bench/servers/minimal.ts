/**
 * The least `node:http` can do for the same answers: the key compared as a string, the bodies made
 * at start, the fixture's `sendJson`. Not a form anyone should ship (the key check is not
 * constant-time, there is no routing): reported beside the bench's bare server, as the floor
 * under every contender.
 */
import http from 'node:http';
import { INVALID_REALM, KEY, MESSAGES, REALM, announce, requestIdOf, sendJson, webhooks } from './fixture.js';

const bodies = new Map(webhooks.map((one) => [one.id, JSON.stringify(one)]));
const WEBHOOKS = '/v1/webhooks/';
const BEARER = `Bearer ${KEY}`;

const server = http.createServer((req, res) => {
  const requestId = requestIdOf(req);
  const authorization = req.headers.authorization;
  if (authorization !== BEARER) {
    const missing = authorization === undefined;
    const message = JSON.stringify({ message: missing ? MESSAGES.missing : MESSAGES.invalid });
    return sendJson(res, 401, requestId, message, 'www-authenticate', missing ? REALM : INVALID_REALM);
  }
  const id = req.url!.slice(WEBHOOKS.length);
  const body = bodies.get(id);
  sendJson(
    res,
    body === undefined ? 404 : 200,
    requestId,
    body ?? JSON.stringify({ message: MESSAGES.webhookNotFound(id) }),
  );
});
server.listen(0, '127.0.0.1', () => announce(server));
