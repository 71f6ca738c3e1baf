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
    // eslint-disable-next-line require-yield
    async *listBefore() {
      walks++;
      throw new Error('store offline');
    },
  };
  const sweep = createOrphanSweep({ storage: memoryStorage(), blobs, clock: () => new Date(), logger, schedule: '* * * * * *' });
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
  const sweeps = () => [...cron.getTasks().values()].filter((task) => task.name === 'customer-portal orphan sweep').length;
  const before = sweeps();
  await withPortal(async (app) => {
    assert.is(sweeps(), before + 1);
  });
  assert.is(sweeps(), before);
});

test.run();
