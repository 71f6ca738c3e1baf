/**
 * A process of its own on a PGlite data directory (argv[2]) that publishes three events, one after
 * a checkpoint, claims and fails one of them, prints the deliveries' ids and the failed one's as
 * JSON, and waits to be killed: test/adapters/sql-server-crash.test.ts kills it with SIGKILL.
 */
import { PGlite } from '@electric-sql/pglite';
import { sqlStorage } from '../../adapters/sql/index.js';
import { at, attempt, eventRecord, webhookRecord } from '../conformance/fixtures.js';

const db = new PGlite(process.argv[2]!);
const storage = sqlStorage({ client: db });
await storage.open!();
await storage.insertWebhook(webhookRecord());
const made = await storage.publishEvents([eventRecord({ createdAt: at(1) }), eventRecord({ createdAt: at(1) })]);
await db.query('CHECKPOINT');
made.push(...(await storage.publishEvents([eventRecord({ createdAt: at(1) })])));
const [failed] = await storage.claimDeliveries({ now: at(2), leaseUntil: at(100), limit: 1, owner: 'w' });
await storage.recordAttempt({
  id: failed!.delivery.id,
  owner: 'w',
  attempt: attempt(500, 2),
  outcome: { status: 'pending', nextAttemptAt: at(3) },
});
console.log(JSON.stringify({ made: made.map((delivery) => delivery.id), failed: failed!.delivery.id }));
setInterval(() => {}, 60_000);
