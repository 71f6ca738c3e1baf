/** The same endpoint in Express 5, a reference: a middleware for the contract's headers and the key check, and a route. */
import express from 'express';
import { INVALID_REALM, MESSAGES, REALM, announce, keyMatches, requestIdOf, webhooks } from './fixture.js';

const byId = new Map(webhooks.map((one) => [one.id, one]));
const app = express();
app.disable('x-powered-by');
app.disable('etag');
app.use((req, res, next) => {
  res.set({ 'X-Request-Id': requestIdOf(req), 'X-Content-Type-Options': 'nosniff', 'Cache-Control': 'no-store' });
  const authorization = req.headers.authorization;
  if (authorization === undefined) {
    res.status(401).set('WWW-Authenticate', REALM).json({ message: MESSAGES.missing });
    return;
  }
  if (!keyMatches(authorization)) {
    res.status(401).set('WWW-Authenticate', INVALID_REALM).json({ message: MESSAGES.invalid });
    return;
  }
  next();
});
app.get('/v1/webhooks/:id', (req, res) => {
  const found = byId.get(req.params.id!);
  if (found === undefined) res.status(404).json({ message: MESSAGES.webhookNotFound(req.params.id!) });
  else res.json(found);
});
const server = app.listen(0, '127.0.0.1', () => announce(server));
