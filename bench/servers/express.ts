/** The same endpoint in Express 5: a key-check middleware and a route. */
import { randomUUID } from 'node:crypto';
import express from 'express';
import { announce, keyMatches, webhook } from './fixture.js';

const webhooks = new Map([[webhook.id, webhook]]);
const app = express();
app.disable('x-powered-by');
app.disable('etag');
app.use((_req, res, next) => {
  // The headers the contract puts on every response, as the portal and the bare baseline send them.
  res.set({ 'X-Request-Id': randomUUID(), 'X-Content-Type-Options': 'nosniff', 'Cache-Control': 'no-store' });
  next();
});
app.use((req, res, next) => {
  if (!keyMatches(req.headers.authorization)) {
    res.status(401).set('WWW-Authenticate', 'Bearer realm="customer-portal"').json({ message: 'The API key is not valid.' });
    return;
  }
  next();
});
app.get('/v1/webhooks/:id', (req, res) => {
  const found = webhooks.get(req.params.id);
  if (!found) {
    res.status(404).json({ message: 'No webhook in this account.' });
    return;
  }
  res.json(found);
});
const server = app.listen(0, '127.0.0.1', () => announce(server, { webhookId: webhook.id }));
