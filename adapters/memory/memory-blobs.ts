import { takeBody } from '../shared/body.js';
import { Readable } from 'node:stream';
import type { BlobInfo, BlobStore } from '../../src/ports.js';
import { atom } from '../../src/shared/time.js';

interface StoredBlob {
  bytes: Buffer;
  createdAt: string;
}

/** Keeps blobs in process memory: the default, for tests and demos. Nothing survives a restart. */
export function memoryBlobs(options: { clock?: () => Date } = {}): BlobStore {
  const clock = options.clock ?? (() => new Date());
  const blobs = new Map<string, StoredBlob>();

  return {
    async put(key, body) {
      takeBody(body);
      const chunks: Buffer[] = [];
      for await (const chunk of body) chunks.push(Buffer.from(chunk));
      // Stored only once the whole body arrived: a failed body rejects above and leaves nothing.
      const bytes = Buffer.concat(chunks);
      blobs.set(key, { bytes, createdAt: atom(clock()) });
      return { size: bytes.length };
    },
    async get(key, range) {
      const blob = blobs.get(key);
      if (blob === undefined) return null;
      const bytes = range === undefined ? blob.bytes : blob.bytes.subarray(range.start, range.end + 1);
      return Readable.from([bytes], { objectMode: false });
    },
    async stat(key) {
      const blob = blobs.get(key);
      return blob === undefined ? null : { key, size: blob.bytes.length, createdAt: blob.createdAt };
    },
    async delete(key) {
      return blobs.delete(key);
    },
    async *listBefore(before): AsyncIterable<BlobInfo> {
      // The keys only: a walk may pause for a while (the orphan sweep's bound), and must not keep deleted bytes alive.
      for (const key of [...blobs.keys()]) {
        const blob = blobs.get(key);
        if (blob !== undefined && blob.createdAt < before)
          yield { key, size: blob.bytes.length, createdAt: blob.createdAt };
      }
    },
  };
}
