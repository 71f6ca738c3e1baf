/**
 * One portal instance for the multi-instance test, in its own process:
 *   node dist/test/helpers/sql-instance.js <schema> <name>
 * SQL adapters on the PostgreSQL server (schema given), the webhook worker on (a tick every second),
 * and a transport that marks each call with `x-instance: <name>` so the receiver sees who sent it.
 * Driven over IPC: `{ id, op: 'createWebhook', url }`, `{ id, op: 'publish', count }`,
 * `{ id, op: 'advanceClock', ms }`; each answered `{ id, result }` or `{ id, error }`.
 * The clock can be moved ahead, so that a lease runs out without the test sleeping through it.
 */
import pg from 'pg';
import { httpTransport } from '../../adapters/http-transport/index.js';
import { sqlAdapters } from '../../adapters/sql/index.js';
import { createPortal, type WebhookTransport } from '../../src/index.js';
import { POSTGRES_URL } from './sql.js';

const [schema, name] = process.argv.slice(2);
if (schema === undefined || name === undefined) throw new Error('usage: sql-instance.js <schema> <name>');

let offsetMs = 0;
const clock = () => new Date(Date.now() + offsetMs);
const http = httpTransport({ timeoutMs: 30_000, allowPrivateNetworks: true });
const transport: WebhookTransport = {
  send: (call, options) => http.send({ ...call, headers: { ...call.headers, 'x-instance': name } }, options),
  close: () => http.close?.() ?? Promise.resolve(),
};

const pool = new pg.Pool({ connectionString: POSTGRES_URL, max: 8 });
pool.on('error', () => {});
const portal = await createPortal({
  ...sqlAdapters({ client: pool, schema }),
  auth: { apiKeys: ['instance-key-0123456789'] },
  signingKeys: ['a-signing-key-shared-by-every-instance-0123456789'],
  clock,
  transport,
  webhooks: { worker: true, tick: '* * * * * *', timeoutMs: 30_000, concurrency: 32 },
});

type Message =
  | { id: number; op: 'createWebhook'; url: string }
  | { id: number; op: 'publish'; count: number }
  | { id: number; op: 'advanceClock'; ms: number };

async function handle(message: Message): Promise<unknown> {
  switch (message.op) {
    case 'createWebhook':
      return portal.webhooks.create('default', { type: 'customer-created', url: message.url });
    case 'publish': {
      const events = await Promise.all(
        Array.from({ length: message.count }, (_, n) =>
          portal.events.publish('default', 'customer-created', { instance: name, n }),
        ),
      );
      return events.map((event) => event.id);
    }
    case 'advanceClock':
      offsetMs += message.ms;
      return offsetMs;
  }
}

process.on('message', (message: Message) => {
  handle(message).then(
    (result) => process.send!({ id: message.id, result }),
    (error: Error) => process.send!({ id: message.id, error: error.message }),
  );
});
process.on('disconnect', () => {
  void portal
    .close()
    .then(() => pool.end())
    .finally(() => process.exit(0));
});
process.send!({ ready: true, owner: portal.worker!.owner });
