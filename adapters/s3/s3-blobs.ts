import { randomBytes } from 'node:crypto';
import { open as openFile, rm, type FileHandle } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import type { CompletedPart, S3Client } from '@aws-sdk/client-s3';
import type { BlobInfo, BlobStore, PresignOptions } from '../../src/ports.js';
import { storageUnavailable } from '../../src/errors.js';
import { atom } from '../../src/shared/time.js';
import { writeAll } from '../fs/durable.js';

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
  /** Where a part waits while it fills (one file per upload in flight, removed after); default the OS temp directory. */
  spoolDir?: string;
}

/** S3's least size of a multipart part other than the last. */
const MIN_PART_SIZE = 5 * 1024 * 1024;
/** Keys are record ids: an object that is not named like one is none of ours, and never listed. */
const KEY = /^[a-z]{3}_[0-9A-Za-z]{1,64}$/;
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
  chunk instanceof Uint8Array ? chunk : typeof chunk === 'string' ? Buffer.from(chunk) : Buffer.from(chunk as ArrayBuffer);

/**
 * Blobs as objects `<prefix><key>` in an S3-compatible bucket (AWS S3, R2, MinIO, Ceph, GCS's S3 API).
 *
 * S3 takes no request body of unknown length, and no multipart part under 5 MiB but the last. So a
 * put spools the body to a temp file one part at a time, never holding it in memory: a body that
 * ends within the first part goes up as one PutObject with its length known; a longer one as a
 * multipart upload, each part sent once the next byte shows it is not the last. The object appears
 * whole when the PutObject or CompleteMultipartUpload succeeds; a failed body aborts the upload.
 */
export function s3Blobs(options: S3BlobsOptions): BlobStore {
  const { client, bucket } = options ?? ({} as S3BlobsOptions);
  if (typeof client?.send !== 'function') throw new TypeError('s3Blobs: `client` must be an S3Client from @aws-sdk/client-s3');
  if (typeof bucket !== 'string' || bucket === '') throw new TypeError('s3Blobs: `bucket` must be a bucket name');
  const prefix = options.prefix ?? '';
  if (typeof prefix !== 'string') throw new TypeError('s3Blobs: `prefix` must be a string');
  const partSize = options.partSize ?? MIN_PART_SIZE;
  if (!Number.isInteger(partSize) || partSize < MIN_PART_SIZE) throw new TypeError(`s3Blobs: \`partSize\` must be a whole number of at least ${MIN_PART_SIZE} bytes`);
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
        throw storageUnavailable(`The object store (bucket ${bucket}) cannot be reached: ${(error as Error).message}`, { cause: error });
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

  /** A body of `length` bytes read back from the spool file. */
  const spooled = (spool: FileHandle, length: number) =>
    length === 0 ? Buffer.alloc(0) : spool.createReadStream({ start: 0, end: length - 1, autoClose: false });

  async function put(key: string, body: Readable | AsyncIterable<Uint8Array>): Promise<{ size: number }> {
    if (!KEY.test(key)) throw new TypeError(`s3Blobs: ${JSON.stringify(key)} is not a record id (abc_ and letters or digits)`);
    const Bucket = bucket;
    const Key = objectKey(key);
    const spoolPath = path.join(spoolDir, `customer-portal-${randomBytes(8).toString('hex')}.part`);
    const s3 = await sdk();
    const spool = await openFile(spoolPath, 'wx+', 0o600);
    let uploadId: string | undefined;
    const parts: CompletedPart[] = [];
    let filled = 0;
    let size = 0;

    const sendPart = async () => {
      uploadId ??= (await reach(client.send(new s3.CreateMultipartUploadCommand({ Bucket, Key, Metadata: metadata() })))).UploadId!;
      const PartNumber = parts.length + 1;
      const { ETag } = await reach(client.send(
        new s3.UploadPartCommand({ Bucket, Key, UploadId: uploadId, PartNumber, Body: spooled(spool, filled), ContentLength: filled }),
      ));
      parts.push({ ETag, PartNumber });
      filled = 0;
    };

    try {
      // Each chunk is on disk, and each full part sent, before the next chunk is asked for: backpressure.
      for await (const chunk of body) {
        let bytes = toBytes(chunk);
        while (bytes.length > 0) {
          if (filled === partSize) await sendPart();
          const piece = bytes.subarray(0, partSize - filled);
          await writeAll(spool, piece, filled);
          filled += piece.length;
          size += piece.length;
          bytes = bytes.subarray(piece.length);
        }
      }
      if (uploadId === undefined) {
        await reach(client.send(new s3.PutObjectCommand({ Bucket, Key, Body: spooled(spool, filled), ContentLength: filled, Metadata: metadata() })));
      } else {
        await sendPart();
        await reach(client.send(new s3.CompleteMultipartUploadCommand({ Bucket, Key, UploadId: uploadId, MultipartUpload: { Parts: parts } })));
      }
      return { size };
    } catch (error) {
      // Should the abort fail too, the sweep's walk aborts the upload a day later (see `listBefore`).
      if (uploadId !== undefined) await reach(client.send(new s3.AbortMultipartUploadCommand({ Bucket, Key, UploadId: uploadId }))).catch(() => {});
      throw error;
    } finally {
      await spool.close().catch(() => {});
      await rm(spoolPath, { force: true });
    }
  }

  async function stat(key: string): Promise<BlobInfo | null> {
    if (!KEY.test(key)) return null;
    const s3 = await sdk();
    const head = await orNull(client.send(
      new s3.HeadObjectCommand({ Bucket: bucket, Key: objectKey(key) }),
    ));
    return head === null ? null : { key, size: head.ContentLength ?? 0, createdAt: dated(head) };
  }

  /** Aborts the multipart uploads under the prefix that a process which died left, a day past `horizon`. */
  async function abortAbandonedUploads(horizon: string): Promise<void> {
    const s3 = await sdk();
    const before = new Date(horizon).getTime() - ABANDONED_UPLOAD_MS;
    let KeyMarker: string | undefined;
    let UploadIdMarker: string | undefined;
    do {
      const page = await reach(client.send(new s3.ListMultipartUploadsCommand({ Bucket: bucket, Prefix: prefix, KeyMarker, UploadIdMarker })));
      for (const upload of page.Uploads ?? []) {
        if ((upload.Initiated?.getTime() ?? Infinity) >= before || !KEY.test(upload.Key!.slice(prefix.length))) continue;
        await orNull(client.send(new s3.AbortMultipartUploadCommand({ Bucket: bucket, Key: upload.Key, UploadId: upload.UploadId })));
      }
      [KeyMarker, UploadIdMarker] = page.IsTruncated ? [page.NextKeyMarker, page.NextUploadIdMarker] : [undefined, undefined];
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
          throw new Error('s3Blobs: `redirect: true` needs the package @aws-sdk/s3-request-presigner (npm install @aws-sdk/s3-request-presigner)', { cause: error });
        }
      }
    },

    put,

    async get(key, range) {
      if (!KEY.test(key)) return null;
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
        const page = await reach(client.send(new s3.ListObjectsV2Command({ Bucket: bucket, Prefix: prefix, ContinuationToken })));
        for (const object of page.Contents ?? []) {
          const key = object.Key!.slice(prefix.length);
          if (!KEY.test(key)) continue;
          const info = clock === undefined ? { key, size: object.Size ?? 0, createdAt: dated(object) } : await stat(key);
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
