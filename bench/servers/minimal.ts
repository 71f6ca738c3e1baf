/**
 * The least `node:http` can do for the same answers: the key compared as a string, the request id
 * echoed or generated, each answer's headers in one flat `writeHead` list. Not a form anyone should ship (the
 * key check is not constant-time, the routing is `startsWith`): reported beside the bench's bare
 * server, as the floor under every contender.
 */
import http from 'node:http';
import { INVALID_REALM, KEY, MESSAGES, REALM, announce, requestIdOf, webhooks } from './fixture.js';

const bodies = new Map(webhooks.map((one) => [one.id, JSON.stringify(one)]));
const WEBHOOKS = '/v1/webhooks/';
const BEARER = `Bearer ${KEY}`;
const TYPE = 'application/json; charset=utf-8';

function send(res: http.ServerResponse, status: number, requestId: string, payload: string, realm?: string) {
  const head = [
    'X-Request-Id',
    requestId,
    'X-Content-Type-Options',
    'nosniff',
    'Cache-Control',
    'no-store',
    'Content-Type',
    TYPE,
    'Content-Length',
    String(Buffer.byteLength(payload)),
  ];
  if (realm !== undefined) head.push('www-authenticate', realm);
  res.writeHead(status, head);
  res.end(payload);
}

const server = http.createServer((req, res) => {
  const requestId = requestIdOf(req);
  const authorization = req.headers.authorization;
  if (authorization !== BEARER) {
    const missing = authorization === undefined;
    return send(res, 401, requestId, JSON.stringify({ message: missing ? MESSAGES.missing : MESSAGES.invalid }), missing ? REALM : INVALID_REALM);
  }
  const id = req.url!.slice(WEBHOOKS.length);
  const body = bodies.get(id);
  send(res, body === undefined ? 404 : 200, requestId, body ?? JSON.stringify({ message: MESSAGES.webhookNotFound(id) }));
});
server.listen(0, '127.0.0.1', () => announce(server));
