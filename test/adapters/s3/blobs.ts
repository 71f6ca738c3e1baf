import { readdirSync } from 'node:fs';
import { Readable } from 'node:stream';
import { buffer } from 'node:stream/consumers';
import {
  CreateMultipartUploadCommand,
  HeadObjectCommand,
  ListMultipartUploadsCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
} from '@aws-sdk/client-s3';
import type { Test } from 'uvu';
import * as assert from 'uvu/assert';
import { s3Blobs } from '../../../adapters/s3/index.js';
import { atom } from '../../../src/shared/time.js';
import { patternBytes } from '../../conformance/fixtures.js';
import { emptyPrefix, type Moto } from '../../helpers/moto.js';
import { tempDir, removeDir } from '../../helpers/fs-dirs.js';
import { rejection } from '../../helpers/record-fixtures.js';

const MiB = 1024 * 1024;

function* slices(bytes: Buffer, size: number) {
  for (let offset = 0; offset < bytes.length; offset += size) yield bytes.subarray(offset, offset + size);
}

/** What is particular to S3: multipart uploads, what a failed one leaves, keys, the bucket's own clock. */
export function s3Tests(test: Test, context: { moto: Moto; bucket: string } | undefined): void {
  let run = 0;
  /** A store under a fresh prefix, its spool in a fresh directory, both emptied after `body`. */
  const withStore =
    (body: (store: ReturnType<typeof s3Blobs>, prefix: string, spoolDir: string) => Promise<void>) => async () => {
      const { moto, bucket } = context!;
      const prefix = `s3-tests-${++run}-${Date.now()}/`;
      const spoolDir = tempDir('spool');
      const store = s3Blobs({ client: moto.client, bucket, prefix, spoolDir });
      await store.open!();
      try {
        await body(store, prefix, spoolDir);
      } finally {
        await emptyPrefix(moto.client, bucket, prefix);
        removeDir(spoolDir);
      }
    };
  const uploadsUnder = async (prefix: string) =>
    (await context!.moto.client.send(new ListMultipartUploadsCommand({ Bucket: context!.bucket, Prefix: prefix })))
      .Uploads ?? [];

  test(
    'a body over one part goes up in parts and reads back whole; no spool file stays',
    withStore(async (store, prefix, spoolDir) => {
      const bytes = patternBytes(11 * MiB + 5, 4);
      assert.equal(await store.put('fsf_multi', Readable.from(slices(bytes, 64 * 1024))), { size: bytes.length });
      assert.ok((await buffer((await store.get('fsf_multi'))!)).equals(bytes));
      const head = await context!.moto.client.send(
        new HeadObjectCommand({ Bucket: context!.bucket, Key: `${prefix}fsf_multi` }),
      );
      assert.match(head.ETag ?? '', /-3"$/, 'a multipart ETag names its three parts');
      const part = await buffer((await store.get('fsf_multi', { start: 5 * MiB - 3, end: 5 * MiB + 2 }))!);
      assert.ok(part.equals(bytes.subarray(5 * MiB - 3, 5 * MiB + 3)), 'a range across a part boundary');
      assert.equal(readdirSync(spoolDir), []);
      assert.equal(await uploadsUnder(prefix), []);
    }),
  );

  test('a part stays in memory up to memoryBytes and spills to one spool file past them, reading back whole either way', async () => {
    const { moto, bucket } = context!;
    const prefix = `s3-tests-${++run}-${Date.now()}/`;
    const spoolDir = tempDir('spool');
    const seen: string[][] = [];
    /** The body, then a look at the spool directory while the put still holds the part. */
    async function* watched(bytes: Buffer) {
      yield* slices(bytes, 64 * 1024);
      seen.push(readdirSync(spoolDir));
    }
    try {
      const store = s3Blobs({ client: moto.client, bucket, prefix, spoolDir, memoryBytes: 256 * 1024 });
      const small = patternBytes(256 * 1024, 7);
      const large = patternBytes(512 * 1024 + 1, 8);
      assert.equal(await store.put('fsf_small', watched(small)), { size: small.length });
      assert.equal(await store.put('fsf_large', watched(large)), { size: large.length });
      assert.equal(seen[0], [], 'a body within memoryBytes never touches the disk');
      assert.is(seen[1]!.length, 1, 'past it, the part spills to one spool file (in 256 KiB writes)');
      assert.ok((await buffer((await store.get('fsf_small'))!)).equals(small));
      assert.ok((await buffer((await store.get('fsf_large'))!)).equals(large));
      assert.equal(readdirSync(spoolDir), [], 'the spool file is removed after the put');
    } finally {
      await emptyPrefix(moto.client, bucket, prefix);
      removeDir(spoolDir);
    }
  });

  test(
    'a body exactly one part long goes up as one object',
    withStore(async (store, prefix) => {
      const bytes = patternBytes(5 * MiB, 6);
      await store.put('fsf_exact', Readable.from(slices(bytes, 100_000)));
      const head = await context!.moto.client.send(
        new HeadObjectCommand({ Bucket: context!.bucket, Key: `${prefix}fsf_exact` }),
      );
      assert.not.match(head.ETag ?? '', /-\d+"$/, 'a single PutObject');
      assert.is(head.ContentLength, 5 * MiB);
    }),
  );

  test(
    'a body that fails after two parts aborts the multipart upload: no object, no upload, no spool file',
    withStore(async (store, prefix, spoolDir) => {
      async function* failing() {
        yield* slices(patternBytes(12 * MiB), MiB);
        throw new Error('client went away');
      }
      const error = await rejection(store.put('fsf_broken', failing()));
      assert.is(error.message, 'client went away');
      assert.is(await store.stat('fsf_broken'), null);
      assert.equal(await uploadsUnder(prefix), []);
      assert.equal(readdirSync(spoolDir), []);
    }),
  );

  test(
    'a key that is not a record id is refused for writing and absent for reading',
    withStore(async (store, prefix) => {
      for (const key of ['../escape', 'fsf_a/b', 'FSF_abc', 'fsf_']) {
        assert.instance(await rejection(store.put(key, Readable.from([Buffer.from('x')]))), TypeError, key);
        assert.is(await store.get(key), null);
        assert.is(await store.stat(key), null);
        assert.is(await store.delete(key), false);
      }
      const listed = await context!.moto.client.send(
        new ListObjectsV2Command({ Bucket: context!.bucket, Prefix: prefix }),
      );
      assert.is(listed.KeyCount ?? 0, 0);
    }),
  );

  test(
    'without a clock, blobs are dated by the bucket; listBefore skips objects not named like a record',
    withStore(async (store, prefix) => {
      const before = Date.now();
      await store.put('fsf_dated', Readable.from([Buffer.from('abc')]));
      await context!.moto.client.send(
        new PutObjectCommand({ Bucket: context!.bucket, Key: `${prefix}notes/readme.txt`, Body: 'not ours' }),
      );
      const info = (await store.stat('fsf_dated'))!;
      const written = new Date(info.createdAt).getTime();
      assert.ok(written >= Math.floor(before / 1000) * 1000 - 5_000 && written <= Date.now() + 5_000, info.createdAt);
      const list = async (at: number) => {
        const keys: string[] = [];
        for await (const blob of store.listBefore(atom(new Date(at)))) keys.push(blob.key);
        return keys;
      };
      assert.equal(await list(Date.now() + 3_600_000), ['fsf_dated']);
      assert.equal(await list(before - 3_600_000), []);
    }),
  );

  test(
    "the sweep's walk aborts multipart uploads a dead process left, a day past the horizon",
    withStore(async (store, prefix) => {
      const { moto, bucket } = context!;
      await moto.client.send(new CreateMultipartUploadCommand({ Bucket: bucket, Key: `${prefix}fsf_abandoned` }));
      // moto dates every upload 2010-11-10T20:48:33Z, whatever the time: the horizons straddle that.
      for await (const _ of store.listBefore('2010-11-11T20:00:00+00:00')) void _;
      assert.is(
        (await uploadsUnder(prefix)).length,
        1,
        'an upload younger than a day before the horizon may still be running',
      );
      for await (const _ of store.listBefore('2010-11-11T21:00:00+00:00')) void _;
      assert.equal(await uploadsUnder(prefix), []);
    }),
  );

  test('open fails with a clear message for a bucket that does not exist, or a store out of reach', async () => {
    const { moto } = context!;
    const missing = await rejection(s3Blobs({ client: moto.client, bucket: 'cp-no-such-bucket' }).open!());
    assert.match(missing.message, /the bucket cp-no-such-bucket cannot be used \(no such bucket\)/);
    const nowhere = new S3Client({
      endpoint: 'http://127.0.0.1:9',
      region: 'us-east-1',
      forcePathStyle: true,
      credentials: { accessKeyId: 'a', secretAccessKey: 'b' },
      maxAttempts: 1,
    });
    const unreachable = await rejection(s3Blobs({ client: nowhere, bucket: 'anything' }).open!());
    assert.match(unreachable.message, /the bucket anything cannot be used/);
    nowhere.destroy();
  });

  test('options are checked when the store is made', () => {
    const client = context!.moto.client;
    assert.throws(() => s3Blobs({ client: {} as S3Client, bucket: 'b' }), /`client` must be an S3Client/);
    assert.throws(() => s3Blobs({ client, bucket: '' }), /`bucket` must be a bucket name/);
    assert.throws(
      () => s3Blobs({ client, bucket: 'b', partSize: MiB }),
      /`partSize` must be a whole number of at least 5242880 bytes/,
    );
    assert.throws(
      () => s3Blobs({ client, bucket: 'b', memoryBytes: -1 }),
      /`memoryBytes` must be a whole number of bytes, 0 or more/,
    );
  });

  test('a store that stops answering mid-life answers STORAGE_UNAVAILABLE', async () => {
    const nowhere = new S3Client({
      endpoint: 'http://127.0.0.1:9',
      region: 'us-east-1',
      forcePathStyle: true,
      credentials: { accessKeyId: 'a', secretAccessKey: 'b' },
      maxAttempts: 1,
    });
    const store = s3Blobs({ client: nowhere, bucket: 'anything' });
    const error = (await rejection(store.stat('fsf_any'))) as Error & { code?: string; status?: number };
    assert.is(error.code, 'STORAGE_UNAVAILABLE');
    assert.is(error.status, 503);
    nowhere.destroy();
  });
}
