/**
 * A writer for the crash test, run as a child process: `node fs-crash-writer.js <dir> <run>`.
 * Once a line arrives on stdin (the parent starts it while it checks the previous run), it opens
 * an fs record store and blob store in `<dir>` and writes until it is killed. Before each
 * operation it prints what the operation may leave behind (`B`), and once the operation resolved,
 * what it did leave (`A`): one JSON object per line, so the parent knows what was acknowledged.
 * A subject is `<table>:<id>` (or `blob:<key>`); a state is the whole record, a blob's SHA-256,
 * or `null` for removed.
 */
import { createHash } from 'node:crypto';
import { once } from 'node:events';
import { Readable } from 'node:stream';
import { fsBlobs, fsStorage } from '../../adapters/fs/index.js';
import { newId } from '../../src/shared/ids.js';
import { type AgreementRecord, type DeliveryRecord, withRotation } from '../../src/records.js';
import { fileRecord, webhookRecord } from '../conformance/fixtures.js';
import { agreementRecord, eventRecord } from './record-fixtures.js';

type Subject = [subject: string, state: unknown];

const [dir, runText] = process.argv.slice(2);
const runNumber = Number(runText);
/** Each run dates its events a minute before the previous run's. */
const runAt = new Date(Date.UTC(2090, 0, 1) - runNumber * 60_000).toISOString().slice(0, 19) + '+00:00';
let seed = runNumber + 1;
/** A small seeded generator, so a failing run can be replayed with its number. */
function random(): number {
  seed = (seed * 1103515245 + 12345) % 2147483648;
  return seed / 2147483648;
}
const pick = <T>(items: T[]): T => items[Math.floor(random() * items.length)]!;

const storage = fsStorage({ dir: `${dir}/records`, compactAfterBytes: 32 * 1024 });
const blobs = fsBlobs({ dir: `${dir}/blobs` });
let nextOp = 0;

/**
 * Prints one line and resolves once it is in the pipe: when the parent reads slowly the pipe
 * fills and stdout queues, and an operation announced only in that queue would die unannounced.
 */
const say = (line: object) =>
  new Promise<void>((resolve, reject) => {
    process.stdout.write(JSON.stringify(line) + '\n', (error) => (error ? reject(error) : resolve()));
  });

/** Announces `candidates`, runs `operation`, then reports the subjects it returns. */
async function run(candidates: Subject[], operation: () => Promise<Subject[]>): Promise<void> {
  const op = nextOp++;
  await say({ t: 'B', op, s: candidates });
  const done = await operation();
  await say({ t: 'A', op, s: done });
}

const sha256 = (bytes: Buffer) => createHash('sha256').update(bytes).digest('hex');
const padding = () => 'x'.repeat(pick([0, 10, 500, 3000, 20_000]));

async function files() {
  const entry = fileRecord({ accountId: 'acct_crash', name: `f-${padding().length}` });
  const subject = `file:${entry.id}`;
  await run([[subject, entry]], async () => (await storage.insertFileEntry(entry), [[subject, entry]]));
  if (random() < 0.4)
    await run(
      [[subject, null]],
      async () => (await storage.deleteFileEntry('acct_crash', entry.id), [[subject, null]]),
    );
}

async function agreements() {
  const agreement = agreementRecord({ accountId: 'acct_crash', signerSignature: `data:image/png;base64,${padding()}` });
  const created = eventRecord({ accountId: 'acct_crash', type: 'agreement-created', data: agreement });
  const subjects: Subject[] = [
    [`agreement:${agreement.id}`, agreement],
    [`event:${created.id}`, created],
  ];
  await run(subjects, async () => (await storage.insertAgreement(agreement, [created]), subjects));
  const signed: AgreementRecord = { ...agreement, status: 'signed', name: 'Signed lease' };
  const event = eventRecord({ accountId: 'acct_crash', type: 'agreement-signed', data: signed });
  const after: Subject[] = [
    [`agreement:${agreement.id}`, signed],
    [`event:${event.id}`, event],
  ];
  await run(after, async () => {
    const stored = await storage.updateAgreement('acct_crash', agreement.id, () => ({
      agreement: signed,
      events: [event],
    }));
    return [
      [`agreement:${agreement.id}`, stored],
      [`event:${event.id}`, event],
    ];
  });
}

/** This run's deliveries not claimed yet: any of them may be the next claim's. */
const pending = new Map<string, DeliveryRecord>();

/**
 * Webhooks, events and their deliveries, from claim to attempt: one worker does all of it, one
 * step after another, so each delivery's state changes in the order the lines say. Events of
 * this run are dated `runAt`, earlier than every earlier run's, so a claim "due at `runAt`" only
 * ever takes this run's deliveries.
 */
async function outbox() {
  const webhook = webhookRecord({ accountId: 'acct_crash', createdAt: runAt });
  await run(
    [[`webhook:${webhook.id}`, webhook]],
    async () => (await storage.insertWebhook(webhook), [[`webhook:${webhook.id}`, webhook]]),
  );
  if (random() < 0.5) {
    // A rotation rewrites the webhook's record: after a crash it is the old record or the new one, whole.
    const rotation = {
      secret: 'whsec_' + Buffer.alloc(32, runNumber % 256).toString('base64'),
      previousSecretUntil: runAt,
    };
    const rotated = withRotation(webhook, rotation);
    await run([[`webhook:${webhook.id}`, rotated]], async () => [
      [`webhook:${webhook.id}`, await storage.rotateWebhookSecret('acct_crash', webhook.id, rotation)],
    ]);
  }
  for (let i = 0; i < 4; i++) {
    const event = eventRecord({ accountId: 'acct_crash', createdAt: runAt, data: { i, padding: padding() } });
    await run([[`event:${event.id}`, event]], async () => {
      const deliveries = await storage.publishEvents([event]);
      for (const delivery of deliveries) pending.set(delivery.id, delivery);
      return [[`event:${event.id}`, event], ...deliveries.map((d): Subject => [`delivery:${d.id}`, d])];
    });
  }
  const until = '2100-01-01T00:00:00+00:00';
  const leased = (d: DeliveryRecord): DeliveryRecord => ({ ...d, leaseOwner: 'crash-worker', leaseUntil: until });
  let claimed: DeliveryRecord[] = [];
  await run(
    [...pending.values()].map((d): Subject => [`delivery:${d.id}`, leased(d)]),
    async () => {
      claimed = (await storage.claimDeliveries({ now: runAt, leaseUntil: until, limit: 3, owner: 'crash-worker' })).map(
        (c) => c.delivery,
      );
      return claimed.map((d): Subject => [`delivery:${d.id}`, d]);
    },
  );
  for (const delivery of claimed) pending.delete(delivery.id);
  for (const delivery of claimed) {
    const attempt = { at: runAt, statusCode: 200, error: null, durationMs: 1 };
    const done: DeliveryRecord = {
      ...delivery,
      attempts: [attempt],
      attemptCount: 1,
      status: 'succeeded',
      nextAttemptAt: null,
      leaseOwner: null,
      leaseUntil: null,
    };
    await run([[`delivery:${delivery.id}`, done]], async () => {
      await storage.recordAttempt({
        id: delivery.id,
        owner: 'crash-worker',
        attempt,
        outcome: { status: 'succeeded', nextAttemptAt: null },
      });
      return [[`delivery:${delivery.id}`, done]];
    });
  }
}

async function blobWrites() {
  const key = newId(pick(['fsf', 'tca', 'agd']));
  const bytes = Buffer.alloc(pick([0, 100, 70_000, 200_000]), random().toString(36));
  await run([[`blob:${key}`, sha256(bytes)]], async () => {
    await blobs.put(key, Readable.from([bytes.subarray(0, bytes.length >> 1), bytes.subarray(bytes.length >> 1)]));
    return [[`blob:${key}`, sha256(bytes)]];
  });
  if (random() < 0.3)
    await run([[`blob:${key}`, null]], async () => (await blobs.delete(key), [[`blob:${key}`, null]]));
}

async function worker(steps: (() => Promise<void>)[]) {
  for (;;) await pick(steps)();
}

await once(process.stdin, 'data');
await storage.open!();
await blobs.open!();
await say({ t: 'ready' });
await Promise.all([...Array.from({ length: 5 }, () => worker([files, agreements, blobWrites])), worker([outbox])]);
