import { Readable } from 'node:stream';
import cron from 'node-cron';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { memoryBlobs, memoryStorage } from '../../adapters/memory/index.js';
import type { BlobStore, Logger } from '../../src/index.js';
import { createOrphanSweep } from '../../src/domain/orphan-sweep.js';
import { json, startPortal, withPortal } from '../helpers/server.js';
import { BLOB_KINDS, validFormData } from '../helpers/agreements.js';

const silent: Logger = { debug() {}, info() {}, warn() {}, error() {} };
const bytes = (text: string) => Readable.from([Buffer.from(text)]);

async function keys(blobs: BlobStore) {
  const found: string[] = [];
  for await (const info of blobs.listBefore('9999-12-31T23:59:59+00:00')) found.push(info.key);
  return found.sort();
}

for (const kind of BLOB_KINDS) {
  test(`${kind.name}: tick removes blobs older than an hour that no record names, and nothing else`, async () => {
    let now = new Date('2026-05-01T12:00:00Z');
    const clock = () => now;
    const storage = memoryStorage();
    const { blobs, dispose } = kind.create(clock);
    const app = await startPortal({ storage, blobs, clock });
    try {
      // An agreement whose documents are named by its record.
      const agreement = await json(await app.api('/agreements', { method: 'POST', body: validFormData() }));
      const named = agreement.documents[0].id as string;
      // Bytes a crash left between the blob write and the record, written at the same time.
      await blobs.put('agd_orphanOld', bytes('old orphan'));
      await blobs.put('fsf_orphanOld', bytes('old orphan file'));
      now = new Date('2026-05-01T12:30:00Z');
      await blobs.put('agd_orphanYoung', bytes('still being uploaded, maybe'));

      const sweep = createOrphanSweep({ storage, blobs, clock, logger: silent });
      now = new Date('2026-05-01T12:59:59Z');
      assert.equal(await sweep.tick(), [], 'nothing is an hour old yet');

      now = new Date('2026-05-01T13:00:01Z');
      assert.equal((await sweep.tick()).sort(), ['agd_orphanOld', 'fsf_orphanOld']);
      assert.equal(await keys(blobs), ['agd_orphanYoung', named].sort());

      now = new Date('2026-05-01T14:00:00Z');
      assert.equal(await sweep.tick(), ['agd_orphanYoung']);
      assert.equal(await keys(blobs), [named], 'a named document is kept however old');
    } finally {
      await app.close();
      dispose();
    }
  });
}

test('a tick while one runs shares it instead of walking the store twice', async () => {
  const storage = memoryStorage();
  let now = new Date('2026-05-01T12:00:00Z');
  const blobs = memoryBlobs({ clock: () => now });
  await blobs.put('agd_a', bytes('a'));
  now = new Date('2026-05-01T15:00:00Z');
  let walks = 0;
  const counted = {
    ...blobs,
    listBefore(before: string) {
      walks++;
      return blobs.listBefore(before);
    },
  };
  const sweep = createOrphanSweep({ storage, blobs: counted, clock: () => now, logger: silent });
  const [first, second] = await Promise.all([sweep.tick(), sweep.tick()]);
  assert.equal(first, ['agd_a']);
  assert.is(second, first);
  assert.is(walks, 1);
});

test('the scheduled sweep runs tick, logs a failure instead of throwing, and stops on stop()', async () => {
  const errors: unknown[] = [];
  const logger: Logger = { ...silent, error: (object) => errors.push(object) };
  let walks = 0;
  const blobs = {
    ...memoryBlobs(),
    // biome-ignore lint/correctness/useYield: a store that fails before it yields anything
    async *listBefore() {
      walks++;
      throw new Error('store offline');
    },
  };
  const sweep = createOrphanSweep({
    storage: memoryStorage(),
    blobs,
    clock: () => new Date(),
    logger,
    schedule: '* * * * * *',
  });
  sweep.start();
  sweep.start();
  await new Promise<void>((resolve) => {
    const poll = setInterval(() => errors.length > 0 && (clearInterval(poll), resolve()), 50);
  });
  await sweep.stop();
  const walksAtStop = walks;
  assert.ok(walksAtStop >= 1);
  assert.match(JSON.stringify(errors[0]), 'store offline');
  await new Promise((resolve) => setTimeout(resolve, 1200));
  assert.is(walks, walksAtStop, 'no tick after stop');
});

test('a portal schedules one sweep task with node-cron and removes it on close', async () => {
  const sweeps = () =>
    [...cron.getTasks().values()].filter((task) => task.name === 'customer-portal orphan sweep').length;
  const before = sweeps();
  await withPortal(async (_app) => {
    assert.is(sweeps(), before + 1);
  });
  assert.is(sweeps(), before);
});

/** `count` blobs written at `at` on a memory blob store, none named by a record. */
async function orphans(count: number, at: Date) {
  let now = at;
  const blobs = memoryBlobs({ clock: () => now });
  for (let i = 0; i < count; i++) await blobs.put(`fsf_orphan${i}`, bytes('x'));
  now = new Date(at.getTime() + 2 * 60 * 60 * 1000);
  return { blobs, clock: () => now };
}

test('the sweep walks in pages and yields to the event loop between them: a timer fires during a long walk', async () => {
  const { blobs, clock } = await orphans(5000, new Date('2026-05-01T12:00:00Z'));
  const sweep = createOrphanSweep({ storage: memoryStorage(), blobs, clock, logger: silent });
  let finished = false;
  let firedDuringWalk = 0;
  const timer = setInterval(() => {
    if (!finished) firedDuringWalk++;
  }, 0);
  try {
    const removed = await sweep.tick();
    finished = true;
    assert.is(removed.length, 5000);
  } finally {
    clearInterval(timer);
  }
  assert.ok(firedDuringWalk > 0, 'a timer ran while the sweep walked');
});

test('the sweep looks at most maxBlobsPerRun blobs a run, and the next run goes on where it stopped', async () => {
  const { blobs, clock } = await orphans(2500, new Date('2026-05-01T12:00:00Z'));
  const storage = memoryStorage();
  let asked = 0;
  const counting = { ...storage, isBlobReferenced: (key: string) => (asked++, storage.isBlobReferenced(key)) };
  const sweep = createOrphanSweep({ storage: counting, blobs, clock, logger: silent, maxBlobsPerRun: 1000 });
  const runs: number[] = [];
  for (let run = 0; run < 4; run++) {
    asked = 0;
    runs.push((await sweep.tick()).length);
    assert.ok(asked <= 1000, `run ${run}: ${asked} blobs looked at`);
  }
  assert.equal(runs, [1000, 1000, 500, 0]);
  assert.equal(await keys(blobs), []);
  // A blob kept because a record names it is looked at again on the next walk, not skipped forever.
  await blobs.put('fsf_named', bytes('named'));
  await storage.insertFileEntry({
    id: 'fsf_named',
    accountId: 'acct_a',
    directoryId: null,
    type: 'file',
    name: 'n',
    size: 5,
    mime: 'text/plain',
    fileShareId: null,
    createdAt: '2026-05-01T12:00:00+00:00',
  });
  assert.equal(await sweep.tick(), []);
  assert.equal(await keys(blobs), ['fsf_named']);
});

test('memory storage: isBlobReferenced does not walk every agreement (20,000 agreements, 5,000 look-ups)', async () => {
  const storage = memoryStorage();
  for (let i = 0; i < 20_000; i++) {
    await storage.insertAgreement(
      {
        id: `agr_${i}`,
        accountId: 'acct_a',
        name: 'n',
        status: 'sent',
        signerName: 's',
        signerSignature: 'x',
        signerSignatureHash: 'h',
        auditHead: null,
        mail: [],
        completion: null,
        signers: [],
        documents: [
          {
            id: `agd_${i}`,
            documentName: 'd.pdf',
            fileSize: 1,
            fileHash: 'h',
            signedFileHash: null,
            signedFileKey: null,
            fields: [],
          },
        ],
        createdAt: '2026-05-01T12:00:00+00:00',
        signingOrder: 'parallel',
        expiresAt: null,
        closedAt: null,
        closedReason: null,
        audit: [],
        nextReminderAt: null,
      },
      [],
    );
  }
  assert.ok(await storage.isBlobReferenced('agd_19999'));
  assert.ok(await storage.isBlobReferenced('agd_0'));
  const started = performance.now();
  for (let i = 0; i < 5000; i++) assert.not.ok(await storage.isBlobReferenced(`agd_missing${i}`));
  const ms = performance.now() - started;
  // Walking every agreement costs 100 million comparisons here (seconds); an index answers in a few milliseconds.
  assert.ok(ms < 250, `5,000 look-ups took ${ms.toFixed(0)} ms`);
  // A document an update takes away is no longer named; one it adds is.
  await storage.updateAgreement('acct_a', 'agr_7', (current) => ({
    agreement: {
      ...current,
      documents: [
        {
          id: 'agd_new7',
          documentName: 'e.pdf',
          fileSize: 1,
          fileHash: 'h',
          signedFileHash: null,
          signedFileKey: null,
          fields: [],
        },
      ],
    },
    events: [],
  }));
  assert.equal([await storage.isBlobReferenced('agd_7'), await storage.isBlobReferenced('agd_new7')], [false, true]);
});

test.run();
