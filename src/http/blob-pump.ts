import type { ServerResponse } from 'node:http';
import type { BlobReader } from '../ports.js';

/** The most bytes read at a time: a file stream's own chunk, so a download holds no more than it did. */
const CHUNK = 64 * 1024;

/**
 * Writes the `length` bytes of `reader` to `res`, and ends it, through at most two buffers for the
 * whole download: one is read into while the other goes out, and a buffer is read into again only
 * once the socket has taken what was written from it (the write's callback). Resolves once the
 * response is done or its client went away; rejects when a read fails or the blob ends short, the
 * connection cut. The reader is closed in every case, after a read in progress.
 * Hot path: a stream reads each chunk into a new buffer outside the heap, and V8 collects as that
 * memory grows, a mark-compact every few tens of MiB sent (bench row "5 MiB download, fsBlobs, server
 * CPU a MiB"; the figures in docs/performance.md, "Downloads from fsBlobs").
 */
export function pumpBlob(reader: BlobReader, res: ServerResponse, length: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const size = Math.min(CHUNK, length);
    const free: Buffer[] = [];
    if (length > 0) free.push(Buffer.allocUnsafeSlow(size));
    if (length > size) free.push(Buffer.allocUnsafeSlow(size));
    let left = length;
    let reading = false;
    let stopped = false;
    let released = false;

    const release = () => {
      if (released || reading) return;
      released = true;
      reader.close().catch(() => {});
    };
    const fail = (error: unknown) => {
      if (!stopped) {
        stopped = true;
        res.destroy(error instanceof Error ? error : undefined);
        reject(error);
      }
      release();
    };
    if (res.destroyed) {
      // The client went away while the blob was being opened: its 'close' has come and gone.
      stopped = true;
      release();
      return resolve();
    }
    res.once('close', () => {
      // The client went away, or the answer is out: nothing more to read either way.
      stopped = true;
      release();
      resolve();
    });

    const next = (): void => {
      if (stopped || reading || left === 0) return;
      const buffer = free.pop();
      if (buffer === undefined) return;
      reading = true;
      reader.read(left < buffer.length ? buffer.subarray(0, left) : buffer).then(
        (count) => {
          reading = false;
          if (stopped) return release();
          if (!(count > 0)) return fail(new Error(`the blob ended ${left} bytes before its length`));
          left -= count;
          const bytes = count === buffer.length ? buffer : buffer.subarray(0, count);
          if (left === 0) {
            res.end(bytes);
            return release();
          }
          // Called once the socket holds no reference to the bytes: the buffer is free again.
          res.write(bytes, (error) => {
            if (error !== null && error !== undefined) return;
            free.push(buffer);
            next();
          });
          next();
        },
        (error: unknown) => {
          reading = false;
          fail(error);
        },
      );
    };

    if (length === 0) {
      res.end();
      release();
    } else next();
  });
}
