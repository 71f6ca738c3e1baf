/**
 * Gathers a body's chunks into one buffer of `size` bytes and hands each full batch to `write`,
 * awaited before more is taken: one write per batch instead of one per chunk, and backpressure at
 * the batch's pace. Chunks are copied in, so a producer may reuse its buffer as soon as the next
 * chunk is asked for (a `BlobStore` body may be any async iterable, not only a stream).
 *
 * Batches of 256 KiB make a fifth of the writes a 64 KiB socket chunk written as it came made, for a
 * copy that costs little of the server's time. The buffers come from a `BufferPool`: a fresh buffer
 * per blob raised the garbage collector's share (bench row "POST /v1/agreements, 5 × 1 MiB, fsBlobs";
 * docs/performance.md, "Figures behind the code": byte batches).
 */
export function createByteBatch(pool: BufferPool, write: (bytes: Uint8Array) => Promise<void>) {
  let buffer: Buffer | undefined;
  let filled = 0;

  async function flush(): Promise<void> {
    if (filled === 0) return;
    const bytes = buffer!.subarray(0, filled);
    filled = 0;
    await write(bytes);
  }

  return {
    /** Bytes taken and not yet written. */
    get pending(): number {
      return filled;
    },
    /** Copies `bytes` in, writing each batch that fills. */
    async add(bytes: Uint8Array): Promise<void> {
      for (let offset = 0; offset < bytes.length; ) {
        buffer ??= pool.take();
        const taken = Math.min(bytes.length - offset, buffer.length - filled);
        buffer.set(bytes.subarray(offset, offset + taken), filled);
        filled += taken;
        offset += taken;
        if (filled === buffer.length) await flush();
      }
    },
    /** Writes what is left. */
    flush,
    /** Gives the buffer back to the pool, once no write of it is in flight: the batch is done. */
    release(): void {
      if (buffer !== undefined) pool.give(buffer);
      buffer = undefined;
      filled = 0;
    },
  };
}

export interface BufferPool {
  take(): Buffer;
  give(buffer: Buffer): void;
}

/** Buffers of `size` bytes, up to `keep` of them kept for reuse between batches of one store. */
export function createBufferPool(size: number, keep: number): BufferPool {
  const spare: Buffer[] = [];
  return {
    take: () => spare.pop() ?? Buffer.allocUnsafe(size),
    give(buffer) {
      if (spare.length < keep) spare.push(buffer);
    },
  };
}
