import type { FileHandle } from 'node:fs/promises';

/** Writes all of `bytes` at `position`: one `write` may take fewer bytes than it was given. */
export async function writeAll(handle: FileHandle, bytes: Uint8Array, position: number): Promise<void> {
  for (let done = 0; done < bytes.length; ) {
    const { bytesWritten } = await handle.write(bytes, done, bytes.length - done, position + done);
    done += bytesWritten;
  }
}
