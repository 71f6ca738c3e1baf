import { spawn } from 'node:child_process';
import { once } from 'node:events';
import {
  closeSync,
  existsSync,
  openSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  utimesSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { buffer } from 'node:stream/consumers';
import { fileURLToPath } from 'node:url';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import {
  DirectoryInUseError,
  type DiscardReport,
  fsBlobs,
  fsStorage,
  type RepairReport,
} from '../../adapters/fs/index.js';
import { crc32, crc32Portable } from '../../adapters/fs/durable.js';
import type { Storage } from '../../src/ports.js';
import { blobStoreSuite } from '../conformance/blobs.js';
import { eventRecord, patternBytes, webhookRecord } from '../conformance/fixtures.js';
import { storageSuite } from '../conformance/storage.js';
import {
  fsBackChannel,
  fsBlobsFactory,
  fsStorageFactory,
  openStorage,
  removeDir,
  tempDir,
} from '../helpers/fs-dirs.js';
import { rejection } from '../helpers/record-fixtures.js';

storageSuite(fsStorageFactory('fs'));
// The same suite again with a log rewritten every few KiB, so that reads after a compaction are covered.
storageSuite(fsStorageFactory('fs, compacting often', 4096));
blobStoreSuite(fsBlobsFactory('fs'));

const CHILD = fileURLToPath(new URL('../helpers/fs-lock-child.js', import.meta.url));

/** Runs the lock child and resolves its first line; `hold` children are left running for the test to kill. */
async function child(kind: 'storage' | 'blobs', dir: string, mode: 'try' | 'hold') {
  const process_ = spawn(process.execPath, [CHILD, kind, dir, mode], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  process_.stdout.setEncoding('utf8').on('data', (chunk: string) => (out += chunk));
  while (!out.includes('\n')) {
    const [closed] = await Promise.race([once(process_.stdout, 'data'), once(process_, 'exit').then(() => ['exit'])]);
    if (closed === 'exit' && !out.includes('\n')) throw new Error(`the lock child ended without a word`);
  }
  return { line: JSON.parse(out.slice(0, out.indexOf('\n'))) as Record<string, unknown>, process: process_ };
}

async function killed(process_: ReturnType<typeof spawn>) {
  const exit = once(process_, 'exit');
  process_.kill('SIGKILL');
  await exit;
}

const withDir = (body: (dir: string) => Promise<void>) => async () => {
  const dir = tempDir('lock');
  try {
    await body(dir);
  } finally {
    removeDir(dir);
  }
};

const lock = suite('fs adapters: one process per directory');

for (const kind of ['storage', 'blobs'] as const) {
  const openHere = async (dir: string) => {
    const store = kind === 'storage' ? await openStorage(dir) : fsBlobs({ dir });
    await store.open?.();
    return store;
  };
  const lockFile = (dir: string) => path.join(dir, `${kind}.lock`);

  lock(
    `${kind}: another process gets an error naming the holder, until the holder closes`,
    withDir(async (dir) => {
      const store = await openHere(dir);
      const refused = await child(kind, dir, 'try');
      assert.is(refused.line.name, 'DirectoryInUseError');
      const message = String(refused.line.message);
      assert.ok(message.includes(`process ${process.pid} on ${os.hostname()}`), message);
      assert.ok(message.includes(path.resolve(dir)), message);
      assert.ok(message.includes('One process may use a directory at a time'), message);
      await store.close!();
      assert.not.ok(existsSync(lockFile(dir)), 'close removes the lock file');
      assert.equal((await child(kind, dir, 'try')).line, { ok: true });
    }),
  );

  lock(
    `${kind}: a second store on the directory in the same process is refused`,
    withDir(async (dir) => {
      const store = await openHere(dir);
      const error = await rejection(openHere(dir));
      assert.instance(error, DirectoryInUseError);
      await store.close!();
      await (await openHere(dir)).close!();
    }),
  );

  lock(
    `${kind}: the lock of a process killed with SIGKILL is taken over`,
    withDir(async (dir) => {
      const holder = await child(kind, dir, 'hold');
      assert.is(holder.line.ready, true);
      await killed(holder.process);
      assert.ok(existsSync(lockFile(dir)), 'the killed holder left its lock file');
      const store = await openHere(dir);
      assert.is(JSON.parse(readFileSync(lockFile(dir), 'utf8')).pid, process.pid);
      if (kind === 'storage')
        assert.ok(
          await (store as Storage).getWebhook('acct_a', String(holder.line.id)),
          'what the holder wrote is there',
        );
      await store.close!();
    }),
  );
}

lock(
  'the lock of a holder killed with SIGKILL and not yet reaped (a zombie) is taken over at once',
  withDir(async (dir) => {
    // The holder's parent is `sleep`, which never reaps it: after SIGKILL it stays a zombie, as a
    // process does for a while under a supervisor that has not yet noticed its death.
    const parent = spawn('sh', ['-c', '"$0" "$1" storage "$2" hold & exec sleep 60', process.execPath, CHILD, dir], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    try {
      let out = '';
      parent.stdout.setEncoding('utf8').on('data', (chunk: string) => (out += chunk));
      while (!out.includes('\n')) await once(parent.stdout, 'data');
      const held = JSON.parse(out.slice(0, out.indexOf('\n'))) as { pid: number };
      process.kill(held.pid, 'SIGKILL');
      const state = () => readFileSync(`/proc/${held.pid}/stat`, 'utf8').split(') ')[1]!.split(' ')[0];
      for (let i = 0; i < 200 && state() !== 'Z'; i++) await new Promise((resolve) => setTimeout(resolve, 10));
      assert.is(state(), 'Z', 'the killed holder is a zombie');
      const store = await openStorage(dir);
      assert.is(JSON.parse(readFileSync(path.join(dir, 'storage.lock'), 'utf8')).pid, process.pid);
      await store.close!();
    } finally {
      parent.kill('SIGKILL');
    }
  }),
);

/** Writes a lock file as another process would have. */
function plantLock(dir: string, owner: object, ageMs = 0) {
  const file = path.join(dir, 'storage.lock');
  writeFileSync(file, JSON.stringify({ start: null, nonce: 'planted', since: '2026-01-01T00:00:00.000Z', ...owner }));
  const at = new Date(Date.now() - ageMs);
  utimesSync(file, at, at);
  return file;
}

lock(
  'a lock of another host is refused while its holder touches it, taken over once a minute passed',
  withDir(async (dir) => {
    plantLock(dir, { pid: 4242, host: 'elsewhere.example' });
    const error = await rejection(openStorage(dir));
    assert.instance(error, DirectoryInUseError);
    assert.ok(error.message.includes('process 4242 on elsewhere.example'), error.message);
    plantLock(dir, { pid: 4242, host: 'elsewhere.example' }, 61_000);
    await (await openStorage(dir)).close!();
  }),
);

lock(
  'a lock naming this pid that this process does not hold (a restarted container) is taken over',
  withDir(async (dir) => {
    plantLock(dir, { pid: process.pid, host: os.hostname() });
    await (await openStorage(dir)).close!();
  }),
);

lock(
  'a lock file that does not parse is taken over',
  withDir(async (dir) => {
    writeFileSync(path.join(dir, 'storage.lock'), '');
    await (await openStorage(dir)).close!();
  }),
);

lock.run();

const damage = suite('fs record log: damage a crash (or a disk) can leave');
const LOG = 'records.log';

/** A store with webhook `a` written and closed, then `b`: the log's size after each. */
async function twoWrites(dir: string) {
  const a = webhookRecord();
  const b = webhookRecord({ url: `https://receiver.example/${'b'.repeat(5000)}` });
  let storage = await openStorage(dir);
  await storage.insertWebhook(a);
  await storage.close!();
  const afterA = statSync(path.join(dir, LOG)).size;
  storage = await openStorage(dir);
  await storage.insertWebhook(b);
  await storage.close!();
  return { a, b, afterA, full: readFileSync(path.join(dir, LOG)) };
}

const discarded = (dir: string) => readdirSync(dir).filter((name) => name.startsWith(`${LOG}.discarded-`));
/** What a kill -9 leaves: no mark of a close. */
const crashed = (dir: string) => rmSync(path.join(dir, `${LOG}.closed`), { force: true });

damage(
  'after a crash, a last frame cut anywhere is dropped, kept aside and told; the store opens, and writes after it survive',
  withDir(async (dir) => {
    const { a, b, afterA, full } = await twoWrites(dir);
    for (const cut of [afterA + 1, afterA + 7, afterA + 8, afterA + 9, afterA + 2000, full.length - 1]) {
      writeFileSync(path.join(dir, LOG), full.subarray(0, cut));
      crashed(dir);
      for (const name of discarded(dir)) rmSync(path.join(dir, name));
      const told: DiscardReport[] = [];
      let storage = fsStorage({ dir, onDiscard: (report) => told.push(report) });
      await storage.open!();
      assert.equal(
        told.map(({ from, to }) => [from, to]),
        [[afterA, cut]],
        `cut at ${cut}: told`,
      );
      assert.ok(
        readFileSync(path.join(dir, discarded(dir)[0]!)).equals(full.subarray(afterA, cut)),
        `cut at ${cut}: the bytes are kept`,
      );
      assert.equal(await storage.getWebhook('acct_a', a.id), a, `cut at ${cut}`);
      assert.is(await storage.getWebhook('acct_a', b.id), null, `cut at ${cut}`);
      const c = webhookRecord();
      await storage.insertWebhook(c);
      await storage.close!();
      storage = await openStorage(dir);
      assert.equal(
        (await storage.listWebhooks('acct_a')).map((w) => w.id).sort(),
        [a.id, c.id].sort(),
        `cut at ${cut}`,
      );
      await storage.close!();
    }
  }),
);

damage(
  'after a crash, a last frame whose checksum fails is dropped with what follows, which is kept aside',
  withDir(async (dir) => {
    const { a, b, afterA, full } = await twoWrites(dir);
    const damaged = Buffer.from(full);
    damaged[afterA + 100] = damaged[afterA + 100]! ^ 0x01;
    writeFileSync(path.join(dir, LOG), damaged);
    crashed(dir);
    const storage = await openStorage(dir);
    assert.equal(await storage.getWebhook('acct_a', a.id), a);
    assert.is(await storage.getWebhook('acct_a', b.id), null);
    await storage.close!();
    const [aside] = discarded(dir);
    assert.ok(aside, 'the dropped bytes are kept');
    assert.ok(readFileSync(path.join(dir, aside!)).equals(damaged.subarray(afterA)));
  }),
);

damage(
  'a log closed cleanly whose last frame is damaged (its body, a bit of its length) or cut is refused; repair keeps the bytes and names the records',
  withDir(async (dir) => {
    const { a, b, afterA, full } = await twoWrites(dir);
    const flipped = (at: number) => {
      const bytes = Buffer.from(full);
      bytes[at] = bytes[at]! ^ 0x01;
      return bytes;
    };
    const cases: [string, Buffer][] = [
      ['a flipped bit in its body', flipped(afterA + 100)],
      ['a flipped bit in its length (it now runs past the end)', flipped(afterA + 2)],
      ['a flipped bit in its checksum', flipped(afterA + 5)],
      ['its last byte cut', full.subarray(0, full.length - 1)],
    ];
    for (const [what, bytes] of cases) {
      writeFileSync(path.join(dir, LOG), bytes);
      const error = await rejection(openStorage(dir));
      assert.is(error.name, 'DamagedLogError', `${what}: ${error.message}`);
      assert.ok(
        error.message.includes(`damaged at byte ${afterA}: the log was closed at ${full.length} bytes`),
        error.message,
      );
      assert.ok(readFileSync(path.join(dir, LOG)).equals(bytes), `${what}: the log is left exactly as it was`);
    }
    const repairs: RepairReport[] = [];
    const storage = fsStorage({ dir, repair: true, onRepair: (report) => repairs.push(report) });
    await storage.open!();
    assert.equal(await storage.getWebhook('acct_a', a.id), a);
    assert.is(await storage.getWebhook('acct_a', b.id), null);
    assert.equal(repairs[0]!.records, [{ table: 'webhook', id: b.id }], 'the record the lost frame held is named');
    assert.ok(readFileSync(repairs[0]!.savedAs).equals(full.subarray(afterA, full.length - 1)), 'its bytes are kept');
    await storage.close!();
    await (await openStorage(dir)).close!();
  }),
);

/** Three writes, each closed: webhooks `a`, `b` (with a long URL), `c`, and where each frame starts. */
async function threeWrites(dir: string) {
  const { a, b, afterA, full } = await twoWrites(dir);
  const c = webhookRecord();
  const storage = await openStorage(dir);
  await storage.insertWebhook(c);
  await storage.close!();
  return { a, b, c, afterA, afterB: full.length, full: readFileSync(path.join(dir, LOG)) };
}

damage(
  'a damaged frame with whole frames after it stops the open with an error naming the file, the byte and the repair',
  withDir(async (dir) => {
    const { afterA, full } = await threeWrites(dir);
    // A flipped bit in the middle frame's body, then in its length: neither is what a crash leaves.
    for (const at of [afterA + 100, afterA + 1]) {
      const damaged = Buffer.from(full);
      damaged[at] = damaged[at]! ^ 0x10;
      writeFileSync(path.join(dir, LOG), damaged);
      const error = await rejection(openStorage(dir));
      assert.is(error.name, 'DamagedLogError', error.message);
      assert.ok(error.message.includes(path.join(dir, LOG)), error.message);
      assert.ok(error.message.includes(`damaged at byte ${afterA}`), error.message);
      assert.ok(error.message.includes('repair: true'), error.message);
      assert.ok(readFileSync(path.join(dir, LOG)).equals(damaged), 'the log is left exactly as it was');
      assert.not.ok(existsSync(path.join(dir, 'storage.lock')), 'the lock is given back');
    }
  }),
);

damage(
  'repair: true keeps every whole frame, drops the damaged one (saved, with the records it named), and the log opens plainly after',
  withDir(async (dir) => {
    const { a, b, c, afterA, afterB, full } = await threeWrites(dir);
    const damaged = Buffer.from(full);
    damaged[afterA + 100] = damaged[afterA + 100]! ^ 0x10;
    writeFileSync(path.join(dir, LOG), damaged);
    const reports: RepairReport[] = [];
    let storage = fsStorage({ dir, repair: true, onRepair: (report) => reports.push(report) });
    await storage.open!();
    assert.equal(
      (await storage.listWebhooks('acct_a')).map((w) => w.id).sort(),
      [a.id, c.id].sort(),
      'b was in the damaged frame',
    );
    await storage.close!();
    assert.is(reports.length, 1);
    assert.equal(reports[0]!.damaged, [{ from: afterA, to: afterB }]);
    assert.equal(reports[0]!.records, [{ table: 'webhook', id: b.id }], 'the record the damaged bytes still name');
    assert.ok(readFileSync(reports[0]!.savedAs).equals(damaged.subarray(afterA, afterB)), 'the damaged bytes are kept');
    assert.equal(JSON.parse(readFileSync(`${reports[0]!.savedAs}.json`, 'utf8')).records, reports[0]!.records);
    storage = await openStorage(dir);
    assert.equal(
      (await storage.listWebhooks('acct_a')).map((w) => w.id).sort(),
      [a.id, c.id].sort(),
      'a plain open after the repair',
    );
    await storage.close!();
  }),
);

damage(
  'after a repair dropped an event, its delivery still pending is cancelled by the next claim, which goes on',
  withDir(async (dir) => {
    let storage = await openStorage(dir);
    const webhook = webhookRecord();
    await storage.insertWebhook(webhook);
    const beforeEvent = statSync(path.join(dir, LOG)).size;
    const event = eventRecord();
    const [delivery] = await storage.publishEvents([event]);
    const afterEvent = statSync(path.join(dir, LOG)).size;
    // The delivery written again in a later frame, and one more frame after: the event's frame is in the middle.
    await storage.redeliver('acct_a', delivery!.id, '2026-01-01T00:00:00+00:00');
    await storage.insertWebhook(webhookRecord());
    await storage.close!();
    const bytes = readFileSync(path.join(dir, LOG));
    bytes[beforeEvent + 20] = bytes[beforeEvent + 20]! ^ 0x10;
    writeFileSync(path.join(dir, LOG), bytes);
    storage = fsStorage({ dir, repair: true });
    await storage.open!();
    assert.ok(afterEvent > beforeEvent);
    assert.is(
      (await storage.getDelivery('acct_a', delivery!.id))!.status,
      'pending',
      'the delivery outlived its event',
    );
    const claimed = await storage.claimDeliveries({
      now: '2030-01-01T00:00:00+00:00',
      leaseUntil: '2030-01-01T01:00:00+00:00',
      limit: 10,
      owner: 'w',
    });
    assert.equal(claimed, []);
    assert.is((await storage.getDelivery('acct_a', delivery!.id))!.status, 'cancelled', 'nothing to send, ever');
    await storage.close!();
  }),
);

damage(
  'a compaction that meets a damaged record stops the store instead of copying it under a fresh checksum',
  withDir(async (dir) => {
    // Events are read from the log by position: the compaction copies them, and checks their frames first.
    let storage = await openStorage(dir);
    const webhook = webhookRecord();
    await storage.insertWebhook(webhook);
    await storage.publishEvents([eventRecord()]);
    // Old versions of the webhook: dead bytes enough that the next write compacts.
    for (let i = 0; i < 20; i++)
      await storage.rotateWebhookSecret('acct_a', webhook.id, { secret: `whsec_${i}`, previousSecretUntil: null });
    await storage.close!();
    const bytes = readFileSync(path.join(dir, LOG));
    const at = bytes.indexOf(Buffer.from('Ada Lovelace'));
    assert.ok(at > 0);
    storage = fsStorage({ dir, compactAfterBytes: 0 });
    await storage.open!();
    // Damaged under the running store, as a disk fault would.
    const handle = openSync(path.join(dir, LOG), 'r+');
    writeSync(handle, Buffer.from('Ada Lovelacf'), 0, 12, at);
    closeSync(handle);
    // The write itself is on disk; the compaction after it finds the damage and stops the store.
    await storage.insertWebhook(webhookRecord());
    const later = await rejection(storage.insertWebhook(webhookRecord()));
    assert.is(later.name, 'DamagedLogError', later.message);
    await storage.close!().catch(() => {});
    assert.ok(
      readFileSync(path.join(dir, LOG)).includes(Buffer.from('Ada Lovelacf')),
      'the damaged log is still there to repair',
    );
    assert.is((await rejection(openStorage(dir))).name, 'DamagedLogError');
  }),
);

damage(
  'garbage or zeros after the last frame are dropped; every frame stays',
  withDir(async (dir) => {
    const { a, b, full } = await twoWrites(dir);
    for (const tail of [Buffer.alloc(4096), patternBytes(777)]) {
      writeFileSync(path.join(dir, LOG), Buffer.concat([full, tail]));
      const storage = await openStorage(dir);
      assert.equal((await storage.listWebhooks('acct_a')).map((w) => w.id).sort(), [a.id, b.id].sort());
      await storage.close!();
      assert.is(statSync(path.join(dir, LOG)).size, full.length);
    }
  }),
);

damage(
  'a file that is not a record log is refused with a clear error, and the lock is given back',
  withDir(async (dir) => {
    writeFileSync(path.join(dir, LOG), 'hello, I am a text file\n');
    for (let i = 0; i < 2; i++) {
      const error = await rejection(openStorage(dir));
      assert.ok(error.message.includes('is not a customer-portal record log'), error.message);
    }
    assert.not.ok(existsSync(path.join(dir, 'storage.lock')));
  }),
);

damage(
  'a compaction a crash interrupted leaves a temp file that the next open removes',
  withDir(async (dir) => {
    const { a } = await twoWrites(dir);
    writeFileSync(path.join(dir, `${LOG}.compact`), patternBytes(1000));
    const storage = await openStorage(dir);
    assert.equal(await storage.getWebhook('acct_a', a.id), a);
    await storage.close!();
    assert.not.ok(existsSync(path.join(dir, `${LOG}.compact`)));
  }),
);

damage(
  'compaction keeps the log near the size of the live records',
  withDir(async (dir) => {
    let storage = await openStorage(dir, 16 * 1024);
    const webhook = webhookRecord();
    await storage.insertWebhook(webhook);
    const [delivery] = await storage.publishEvents([
      {
        id: 'evt_compact1',
        accountId: 'acct_a',
        type: webhook.type,
        createdAt: webhook.createdAt,
        data: { big: 'x'.repeat(3000) },
      },
    ]);
    for (let i = 0; i < 200; i++)
      await storage.redeliver('acct_a', delivery!.id, `2026-01-01T00:00:${String(i % 60).padStart(2, '0')}+00:00`);
    await storage.close!();
    const size = statSync(path.join(dir, LOG)).size;
    // Uncompacted, 200 rewrites of a ~300-byte delivery would take some 60 KiB.
    assert.ok(size < 24 * 1024, `the log is ${size} bytes after 200 rewrites of one delivery`);
    storage = await openStorage(dir);
    assert.is((await storage.getDelivery('acct_a', delivery!.id))!.nextAttemptAt, '2026-01-01T00:00:19+00:00');
    assert.is(((await fsBackChannel(dir).event('evt_compact1'))!.data as { big: string }).big.length, 3000);
    await storage.close!();
  }),
);

damage('CRC-32 in JS and zlib agree', async () => {
  for (const bytes of [Buffer.alloc(0), Buffer.from('123456789'), patternBytes(100_000)])
    assert.is(crc32Portable(bytes), crc32(bytes));
  assert.is(crc32Portable(Buffer.from('123456789')), 0xcbf43926);
});

damage.run();

const blobFiles = suite('fs blobs: keys and leftovers');

blobFiles(
  'a key that is not a record id is refused for writing and absent for reading',
  withDir(async (dir) => {
    const blobs = fsBlobs({ dir });
    for (const key of ['../escape', 'fsf_a/b', 'FSF_abc', 'fsf_', 'fsf_a.b', `fsf_${'a'.repeat(65)}`, 'fsf_a\u0000']) {
      assert.instance(await rejection(blobs.put(key, Readable.from([Buffer.from('x')]))), TypeError, key);
      assert.is(await blobs.get(key), null);
      assert.is(await blobs.stat(key), null);
      assert.is(await blobs.delete(key), false);
    }
    assert.equal(readdirSync(path.join(dir, 'tmp')), []);
    assert.not.ok(existsSync(path.join(dir, '..', 'escape')));
    await blobs.close!();
  }),
);

blobFiles(
  'keys that differ only in case are two blobs, in file names without capitals',
  withDir(async (dir) => {
    const blobs = fsBlobs({ dir });
    await blobs.put('fsf_Ab', Readable.from([Buffer.from('upper')]));
    await blobs.put('fsf_aB', Readable.from([Buffer.from('lower')]));
    assert.is((await buffer((await blobs.get('fsf_Ab'))!)).toString(), 'upper');
    assert.is((await buffer((await blobs.get('fsf_aB'))!)).toString(), 'lower');
    const names = readdirSync(path.join(dir, 'objects'), { recursive: true })
      .map(String)
      .filter((name) => name.includes('fsf_'));
    assert.is(names.length, 2);
    assert.ok(
      names.every((name) => name === name.toLowerCase()),
      names.join(', '),
    );
    const listed = [];
    for await (const info of blobs.listBefore('2100-01-01T00:00:00+00:00')) listed.push(info.key);
    assert.equal(listed.sort(), ['fsf_Ab', 'fsf_aB'].sort());
    await blobs.close!();
  }),
);

blobFiles(
  'temp files of a put that a crash interrupted are removed at open and never listed',
  withDir(async (dir) => {
    let blobs = fsBlobs({ dir });
    await blobs.put('fsf_whole', Readable.from([Buffer.from('whole')]));
    await blobs.close!();
    writeFileSync(path.join(dir, 'tmp', 'fsf_half.0123456789ab'), patternBytes(5000));
    blobs = fsBlobs({ dir });
    await blobs.open!();
    assert.equal(readdirSync(path.join(dir, 'tmp')), []);
    const listed = [];
    for await (const info of blobs.listBefore('2100-01-01T00:00:00+00:00')) listed.push(info.key);
    assert.equal(listed, ['fsf_whole']);
    await blobs.close!();
  }),
);

blobFiles(
  'a blob deleted while it streams is still read whole',
  withDir(async (dir) => {
    const blobs = fsBlobs({ dir });
    const bytes = patternBytes(2_000_000);
    await blobs.put('fsf_going', Readable.from([bytes]));
    const stream = (await blobs.get('fsf_going'))!;
    assert.ok(await blobs.delete('fsf_going'));
    assert.ok((await buffer(stream)).equals(bytes));
    await blobs.close!();
  }),
);

/** The descriptors this process has open, where /proc tells (Linux). */
const openDescriptors = () => (existsSync('/proc/self/fd') ? readdirSync('/proc/self/fd').length : undefined);

blobFiles(
  'a read leaves no descriptor open: read whole, a range, or destroyed half-way',
  withDir(async (dir) => {
    if (openDescriptors() === undefined) {
      console.log('  skipped: no /proc/self/fd here to count open descriptors');
      return;
    }
    const blobs = fsBlobs({ dir });
    const bytes = patternBytes(1_000_000);
    await blobs.put('fsf_counted', Readable.from([bytes]));
    const before = openDescriptors()!;
    for (let i = 0; i < 20; i++) {
      assert.ok((await buffer((await blobs.get('fsf_counted'))!)).equals(bytes));
      assert.ok(
        (await buffer((await blobs.get('fsf_counted', { start: 10, end: 19 }))!)).equals(bytes.subarray(10, 20)),
      );
      const cut = (await blobs.get('fsf_counted'))!;
      await new Promise<void>((resolve) => cut.once('data', () => resolve()));
      cut.destroy();
      await once(cut, 'close');
    }
    assert.is(openDescriptors(), before);
    await blobs.close!();
  }),
);

blobFiles.run();
