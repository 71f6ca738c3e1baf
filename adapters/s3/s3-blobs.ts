import { randomBytes } from 'node:crypto';
import { BLOB_KEY } from '../../src/shared/ids.js';
import { open as openFile, rm, type FileHandle } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import type { CompletedPart, S3Client } from '@aws-sdk/client-s3';
import type { BlobInfo, BlobStore, PresignOptions } from '../../src/ports.js';
import { storageUnavailable } from '../../src/errors.js';
import { atom } from '../../src/shared/time.js';
import { takeBody } from '../shared/body.js';
import { writeAll } from '../shared/write-all.js';
import { createBufferPool, createByteBatch } from '../shared/byte-batch.js';

export interface S3BlobsOptions {
  /** An `S3Client` the host configured (endpoint, region, credentials, `forcePathStyle`). Never destroyed here. */
  client: S3Client;
  /** The bucket; it must exist (`open` checks that it answers). */
  bucket: string;
  /** Prepended to every object key, e.g. `portal/`. Give the portal a bucket or prefix of its own: the orphan sweep walks it. */
  prefix?: string;
  /** Download links answer 302 to a presigned URL of the object, so the bytes do not pass through the portal. */
  redirect?: boolean;
  /**
   * Dates each blob by this clock instead of the bucket's: kept in the object's `written-at` metadata,
   * which `stat` and `listBefore` then read (one HEAD per object listed). For tests; default the bucket's `LastModified`.
   */
  clock?: () => Date;
  /** Bytes per multipart part, at least 5 MiB (S3's least part but the last); default 5 MiB. */
  partSize?: number;
  /**
   * Bytes of a part held in memory while it fills; past them the part spills to a temp file in
   * `spoolDir`. A body that ends within them never touches the disk. Default 1 MiB; 0 spools every byte.
   */
  memoryBytes?: number;
  /** Where a part waits once it outgrows `memoryBytes` (one file per upload, removed after); default the OS temp directory. */
  spoolDir?: string;
}

/** S3's least size of a multipart part other than the last. */
const MIN_PART_SIZE = 5 * 1024 * 1024;
const DEFAULT_MEMORY_BYTES = 1024 * 1024;
/** A spilled part is written in batches of this size: one `writev` per batch instead of one write per chunk. */
const SPILL_BATCH = 256 * 1024;
const WRITTEN_AT = 'written-at';
/** A multipart upload started this long before the sweep's horizon belonged to a process that died. */
const ABANDONED_UPLOAD_MS = 24 * 60 * 60 * 1000;

type Sdk = typeof import('@aws-sdk/client-s3');
type Presigner = typeof import('@aws-sdk/s3-request-presigner').getSignedUrl;

/**
 * The SDK's commands, loaded on first use: the host that passes an S3Client has the package, and an
 * app that imports `customer-portal/adapters/s3` only to type its options needs it not at all.
 */
let sdkLoading: Promise<Sdk> | undefined;
const sdk = () => (sdkLoading ??= import('@aws-sdk/client-s3'));

const statusOf = (error: unknown) => (error as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode;

const toBytes = (chunk: unknown): Uint8Array =>
  chunk instanceof Uint8Array
    ? chunk
    : typeof chunk === 'string'
      ? Buffer.from(chunk)
      : Buffer.from(chunk as ArrayBuffer);

/**
 * Blobs as objects `<prefix><key>` in an S3-compatible bucket (AWS S3, R2, MinIO, Ceph, GCS's S3 API).
 *
 * S3 takes no request body of unknown length, and no multipart part under 5 MiB but the last. So a
 * put gathers the body one part at a time — its first `memoryBytes` in memory, the rest of the part
 * in a temp file — never holding more of it in memory: a body that ends within the first part goes
 * up as one PutObject with its length known; a longer one as a multipart upload, each part sent once
 * the next byte shows it is not the last. The object appears whole when the PutObject or
 * CompleteMultipartUpload succeeds; a failed body aborts the upload.
 */
export function s3Blobs(options: S3BlobsOptions): BlobStore {
  const { client, bucket } = options ?? ({} as S3BlobsOptions);
  if (typeof client?.send !== 'function')
    throw new TypeError('s3Blobs: `client` must be an S3Client from @aws-sdk/client-s3');
  if (typeof bucket !== 'string' || bucket === '') throw new TypeError('s3Blobs: `bucket` must be a bucket name');
  const prefix = options.prefix ?? '';
  if (typeof prefix !== 'string') throw new TypeError('s3Blobs: `prefix` must be a string');
  const partSize = options.partSize ?? MIN_PART_SIZE;
  if (!Number.isInteger(partSize) || partSize < MIN_PART_SIZE)
    throw new TypeError(`s3Blobs: \`partSize\` must be a whole number of at least ${MIN_PART_SIZE} bytes`);
  const memoryBytes = options.memoryBytes ?? DEFAULT_MEMORY_BYTES;
  if (!Number.isInteger(memoryBytes) || memoryBytes < 0)
    throw new TypeError('s3Blobs: `memoryBytes` must be a whole number of bytes, 0 or more');
  const spoolDir = options.spoolDir ?? os.tmpdir();
  const clock = options.clock;
  let presigner: Presigner | undefined;

  /** Awaits a request; a store out of reach (no answer, or a 5xx) becomes the catalogue's STORAGE_UNAVAILABLE. */
  async function reach<T>(request: Promise<T>): Promise<T> {
    try {
      return await request;
    } catch (error) {
      const status = statusOf(error);
      if (status === undefined || status >= 500) {
        throw storageUnavailable(`The object store (bucket ${bucket}) cannot be reached: ${(error as Error).message}`, {
          cause: error,
        });
      }
      throw error;
    }
  }

  /** `reach`, resolving `null` where S3 answers 404 (no such key). */
  const orNull = <T>(request: Promise<T>) =>
    reach(request).catch((error: unknown) => {
      if (statusOf(error) === 404) return null;
      throw error;
    });

  const objectKey = (key: string) => prefix + key;
  const metadata = () => (clock === undefined ? undefined : { [WRITTEN_AT]: atom(clock()) });
  const dated = (head: { Metadata?: Record<string, string>; LastModified?: Date }) =>
    head.Metadata?.[WRITTEN_AT] ?? atom(head.LastModified ?? new Date(0));

  async function put(key: string, body: Readable | AsyncIterable<Uint8Array>): Promise<{ size: number }> {
    takeBody(body);
    if (!BLOB_KEY.test(key))
      throw new TypeError(`s3Blobs: ${JSON.stringify(key)} is not a record id (abc_ and letters or digits)`);
    const Bucket = bucket;
    const Key = objectKey(key);
    const s3 = await sdk();
    const part = createPartBuffer(memoryBytes, spoolDir);
    let uploadId: string | undefined;
    const parts: CompletedPart[] = [];
    let size = 0;

    const sendPart = async () => {
      uploadId ??= (
        await reach(client.send(new s3.CreateMultipartUploadCommand({ Bucket, Key, Metadata: metadata() })))
      ).UploadId!;
      const PartNumber = parts.length + 1;
      const ContentLength = part.length;
      const { ETag } = await reach(
        client.send(
          new s3.UploadPartCommand({
            Bucket,
            Key,
            UploadId: uploadId,
            PartNumber,
            Body: await part.body(),
            ContentLength,
          }),
        ),
      );
      parts.push({ ETag, PartNumber });
      part.reset();
    };

    try {
      for await (const chunk of body) {
        let bytes = toBytes(chunk);
        while (bytes.length > 0) {
          if (part.length === partSize) await sendPart();
          const piece = bytes.subarray(0, partSize - part.length);
          // Backpressure: the next chunk is asked for once this one is held (in memory, or on disk past `memoryBytes`).
          await part.add(piece);
          size += piece.length;
          bytes = bytes.subarray(piece.length);
        }
      }
      if (uploadId === undefined) {
        const ContentLength = part.length;
        await reach(
          client.send(
            new s3.PutObjectCommand({ Bucket, Key, Body: await part.body(), ContentLength, Metadata: metadata() }),
          ),
        );
      } else {
        await sendPart();
        await reach(
          client.send(
            new s3.CompleteMultipartUploadCommand({
              Bucket,
              Key,
              UploadId: uploadId,
              MultipartUpload: { Parts: parts },
            }),
          ),
        );
      }
      return { size };
    } catch (error) {
      // Should the abort fail too, the sweep's walk aborts the upload a day later (see `listBefore`).
      if (uploadId !== undefined)
        await reach(client.send(new s3.AbortMultipartUploadCommand({ Bucket, Key, UploadId: uploadId }))).catch(
          () => {},
        );
      throw error;
    } finally {
      await part.dispose();
    }
  }

  async function stat(key: string): Promise<BlobInfo | null> {
    if (!BLOB_KEY.test(key)) return null;
    const s3 = await sdk();
    const head = await orNull(client.send(new s3.HeadObjectCommand({ Bucket: bucket, Key: objectKey(key) })));
    return head === null ? null : { key, size: head.ContentLength ?? 0, createdAt: dated(head) };
  }

  /** Aborts the multipart uploads under the prefix that a process which died left, a day past `horizon`. */
  async function abortAbandonedUploads(horizon: string): Promise<void> {
    const s3 = await sdk();
    const before = new Date(horizon).getTime() - ABANDONED_UPLOAD_MS;
    let KeyMarker: string | undefined;
    let UploadIdMarker: string | undefined;
    do {
      const page = await reach(
        client.send(new s3.ListMultipartUploadsCommand({ Bucket: bucket, Prefix: prefix, KeyMarker, UploadIdMarker })),
      );
      for (const upload of page.Uploads ?? []) {
        if ((upload.Initiated?.getTime() ?? Infinity) >= before || !BLOB_KEY.test(upload.Key!.slice(prefix.length)))
          continue;
        await orNull(
          client.send(
            new s3.AbortMultipartUploadCommand({ Bucket: bucket, Key: upload.Key, UploadId: upload.UploadId }),
          ),
        );
      }
      [KeyMarker, UploadIdMarker] = page.IsTruncated
        ? [page.NextKeyMarker, page.NextUploadIdMarker]
        : [undefined, undefined];
    } while (KeyMarker !== undefined);
  }

  return {
    async open() {
      const s3 = await sdk();
      try {
        await client.send(new s3.HeadBucketCommand({ Bucket: bucket }));
      } catch (error) {
        const detail = statusOf(error) === 404 ? 'no such bucket' : (error as Error).message || (error as Error).name;
        throw new Error(`s3Blobs: the bucket ${bucket} cannot be used (${detail})`, { cause: error });
      }
      if (options.redirect === true) {
        try {
          presigner = (await import('@aws-sdk/s3-request-presigner')).getSignedUrl;
        } catch (error) {
          throw new Error(
            's3Blobs: `redirect: true` needs the package @aws-sdk/s3-request-presigner (npm install @aws-sdk/s3-request-presigner)',
            {
              cause: error,
            },
          );
        }
      }
    },

    put,

    async get(key, range) {
      if (!BLOB_KEY.test(key)) return null;
      const s3 = await sdk();
      const command = new s3.GetObjectCommand({
        Bucket: bucket,
        Key: objectKey(key),
        Range: range === undefined ? undefined : `bytes=${range.start}-${range.end}`,
      });
      try {
        const answer = await orNull(client.send(command));
        return answer === null ? null : (answer.Body as Readable);
      } catch (error) {
        // S3 answers 416 to any range of an empty object: its bytes in that range are none.
        if (statusOf(error) === 416) return Readable.from([], { objectMode: false });
        throw error;
      }
    },

    stat,

    async delete(key) {
      // DeleteObject answers alike whether or not the key was there: the HEAD tells.
      if ((await stat(key)) === null) return false;
      const s3 = await sdk();
      await reach(client.send(new s3.DeleteObjectCommand({ Bucket: bucket, Key: objectKey(key) })));
      return true;
    },

    async *listBefore(before): AsyncIterable<BlobInfo> {
      await abortAbandonedUploads(before);
      const s3 = await sdk();
      let ContinuationToken: string | undefined;
      do {
        const page = await reach(
          client.send(new s3.ListObjectsV2Command({ Bucket: bucket, Prefix: prefix, ContinuationToken })),
        );
        for (const object of page.Contents ?? []) {
          const key = object.Key!.slice(prefix.length);
          if (!BLOB_KEY.test(key)) continue;
          const info =
            clock === undefined ? { key, size: object.Size ?? 0, createdAt: dated(object) } : await stat(key);
          if (info !== null && info.createdAt < before) yield info;
        }
        ContinuationToken = page.NextContinuationToken;
      } while (ContinuationToken !== undefined);
    },

    ...(options.redirect === true && {
      async presign(key: string, presign: PresignOptions) {
        if (presigner === undefined) throw new Error('s3Blobs: call open() first and wait for it (createPortal does)');
        const s3 = await sdk();
        const command = new s3.GetObjectCommand({
          Bucket: bucket,
          Key: objectKey(key),
          ResponseContentType: presign.contentType,
          ResponseContentDisposition: presign.contentDisposition,
        });
        return presigner(client, command, { expiresIn: presign.expiresInSeconds });
      },
    }),
  };
}

/**
 * One part of an upload while it fills: its first `memoryBytes` copied into memory, what follows
 * into a temp file (opened on the first byte past them), written in batches of `SPILL_BATCH`.
 * Chunks are copied, so a producer may reuse its buffer once the next chunk is asked for.
 * Spooling every chunk to disk, one awaited write each, read the body far slower than the upload
 * could take it; a 1 MiB document now goes up from memory as one buffer (bench row "S3 upload";
 * docs/performance.md, "Figures behind the code": S3 parts).
 */
function createPartBuffer(memoryBytes: number, spoolDir: string) {
  // A spill is rare (parts past `memoryBytes`): its one buffer is not worth a pool across uploads.
  const spillBuffers = createBufferPool(SPILL_BATCH, 0);
  let memory = Buffer.alloc(0);
  let inMemory = 0;
  let onDisk = 0;
  let spool: { path: string; handle: FileHandle } | undefined;
  /** The part's body last handed to a request; ended before the spool file closes under it. */
  let handedOut: Readable | undefined;
  const spill = createByteBatch(spillBuffers, async (bytes) => {
    spool ??= await openSpool(spoolDir);
    await writeAll(spool.handle, bytes, onDisk);
    onDisk += bytes.length;
  });

  /** Room for `length` bytes in memory, grown by doubling so that a small body takes little. */
  function reserve(length: number): void {
    if (length <= memory.length) return;
    const grown = Buffer.allocUnsafe(Math.min(memoryBytes, Math.max(length, 2 * memory.length, 64 * 1024)));
    memory.copy(grown, 0, 0, inMemory);
    memory = grown;
  }

  return {
    get length() {
      return inMemory + onDisk + spill.pending;
    },
    async add(bytes: Uint8Array): Promise<void> {
      if (onDisk + spill.pending === 0 && inMemory + bytes.length <= memoryBytes) {
        reserve(inMemory + bytes.length);
        memory.set(bytes, inMemory);
        inMemory += bytes.length;
        return;
      }
      await spill.add(bytes);
    },
    /** The part's bytes: one buffer when it stayed in memory, else the memory then a read of the file. */
    async body(): Promise<Uint8Array | Readable> {
      const head = memory.subarray(0, inMemory);
      if (onDisk + spill.pending === 0) return head;
      await spill.flush();
      const file = spool!.handle.createReadStream({ start: 0, end: onDisk - 1, autoClose: false });
      handedOut = head.length === 0 ? file : Readable.from(concatStreams(head, file), { objectMode: false });
      return handedOut;
    },
    /** Empties the part for the next one (its request has settled); memory and spool file are reused. */
    reset(): void {
      inMemory = 0;
      onDisk = 0;
      handedOut = undefined;
    },
    async dispose(): Promise<void> {
      memory = Buffer.alloc(0);
      handedOut?.destroy();
      if (spool === undefined) return;
      await spool.handle.close().catch(() => {});
      await rm(spool.path, { force: true });
    },
  };
}

async function openSpool(spoolDir: string): Promise<{ path: string; handle: FileHandle }> {
  const spoolPath = path.join(spoolDir, `customer-portal-${randomBytes(8).toString('hex')}.part`);
  return { path: spoolPath, handle: await openFile(spoolPath, 'wx+', 0o600) };
}

async function* concatStreams(head: Uint8Array, rest: AsyncIterable<Uint8Array>): AsyncIterable<Uint8Array> {
  yield head;
  yield* rest;
}
