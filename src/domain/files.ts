import { Readable } from 'node:stream';
import { PortalError } from '../errors.js';
import { isId, newId } from '../shared/ids.js';
import type { BlobStore, Storage } from '../ports.js';
import type { DownloadLink, FileEntry, FileEntryRecord } from '../records.js';
import type { DownloadService } from './downloads.js';
import { inListingOrder } from '../shared/order.js';
import { atom } from '../shared/time.js';
import { checkAccountId, directoryInput, fileInput, parseInput } from './inputs.js';

export type BlobBody = Buffer | Uint8Array | string | Readable | AsyncIterable<Uint8Array>;

/** A file's bytes in the blob store under `id`, before a record names them (`FileService.receive`). */
export interface ReceivedFile {
  id: string;
  name: string;
  mime: string;
  size: number;
}

export interface DirectoryInput {
  name: string;
  directoryId?: string | null;
}

export interface FileInput extends DirectoryInput {
  mime: string;
  fileShareId?: string | null;
  body: BlobBody;
}

/** The bytes of a body given as a buffer or string arrive as one chunk; streams pass through as they are. */
function toStream(body: BlobBody): Readable | AsyncIterable<Uint8Array> {
  if (typeof body === 'string') return Readable.from([Buffer.from(body)]);
  if (body instanceof Uint8Array) return Readable.from([body]);
  return body;
}

/**
 * Streams `body` into `blobs` under `id`, then stores the record `make` makes with the size that
 * arrived. Bytes first: bytes no record names are swept, a record without bytes would be broken. When
 * the record cannot be stored, the bytes are removed (what cannot be removed now, the sweep removes).
 */
export async function storeBytesThenRecord<R>(
  blobs: BlobStore,
  id: string,
  body: BlobBody,
  make: (size: number) => R,
  insert: (record: R) => Promise<void>,
): Promise<R> {
  const { size } = await blobs.put(id, toStream(body));
  const record = make(size);
  try {
    await insert(record);
  } catch (error) {
    await blobs.delete(id).catch(() => {});
    throw error;
  }
  return record;
}

/** Public shape of an entry: exactly the fields of the spec's "File or directory entry". */
function toEntry(record: FileEntryRecord): FileEntry {
  return {
    id: record.id,
    type: record.type,
    name: record.name,
    size: record.size,
    mime: record.mime,
    fileShareId: record.fileShareId,
    createdAt: record.createdAt,
  };
}

/** A file's or a directory's id. */
const isEntryId = (id: unknown) => isId('fsf', id) || isId('fsd', id);

/** The rules for the file tree; the routes and `portal.files` both call these. */
export function createFileService(deps: {
  storage: Storage;
  blobs: BlobStore;
  clock: () => Date;
  downloads: DownloadService;
}) {
  const { storage, blobs, clock, downloads } = deps;

  function checkDirectoryId(directoryId: string | null | undefined): void {
    if (directoryId !== undefined && directoryId !== null && !isId('fsd', directoryId)) {
      throw new PortalError('ID_MALFORMED', 'directoryId', 'a directory', 'fsd');
    }
  }

  async function readListing(accountId: string, directoryId: string | null | undefined): Promise<FileEntry[]> {
    const parent = await requireDirectory(accountId, directoryId);
    const records = await storage.listFileEntries(accountId, parent);
    return inListingOrder(records).map(toEntry);
  }

  async function requireDirectory(accountId: string, directoryId: string | null | undefined): Promise<string | null> {
    if (directoryId === null || directoryId === undefined) return null;
    const parent = await storage.getFileEntry(accountId, directoryId);
    if (parent === null || parent.type !== 'directory') throw new PortalError('DIRECTORY_NOT_FOUND', directoryId);
    return parent.id;
  }

  const service = {
    /** The entries of a directory (the root without `directoryId`) in listing order. */
    async list(accountId: string, directoryId?: string | null): Promise<FileEntry[]> {
      checkAccountId(accountId);
      checkDirectoryId(directoryId);
      return readListing(accountId, directoryId);
    },

    async createDirectory(accountId: string, input: DirectoryInput): Promise<FileEntry> {
      checkAccountId(accountId);
      const { name, directoryId } = parseInput(directoryInput, input, 'directory');
      const record: FileEntryRecord = {
        id: newId('fsd'),
        accountId,
        directoryId: await requireDirectory(accountId, directoryId),
        type: 'directory',
        name,
        size: 0,
        mime: 'inode/directory',
        fileShareId: null,
        createdAt: atom(clock()),
      };
      await storage.insertFileEntry(record);
      return toEntry(record);
    },

    /** Streams `body` into the blob store, then records the entry with the size that arrived. */
    async put(accountId: string, input: FileInput): Promise<FileEntry> {
      checkAccountId(accountId);
      const { name, mime, directoryId, fileShareId } = parseInput(fileInput, input, 'file');
      if (input.body === undefined || input.body === null) throw new PortalError('INPUT_REQUIRED', 'file.body');
      // Checked before the bytes are read, so that a wrong directory costs no upload.
      await requireDirectory(accountId, directoryId);
      const received = await service.receive(accountId, { name, mime, body: input.body });
      try {
        return await service.place(accountId, received, { directoryId, fileShareId });
      } catch (error) {
        await service.discard(received);
        throw error;
      }
    },

    /**
     * Streams a file's bytes into the blob store before its place is known (an upload whose
     * `directoryId` comes after the file): `place` records it, `discard` removes the bytes again.
     */
    async receive(accountId: string, input: Omit<FileInput, 'directoryId' | 'fileShareId'>): Promise<ReceivedFile> {
      checkAccountId(accountId);
      const { name, mime } = parseInput(fileInput, { ...input, directoryId: null }, 'file');
      if (input.body === undefined || input.body === null) throw new PortalError('INPUT_REQUIRED', 'file.body');
      const id = newId('fsf');
      const { size } = await blobs.put(id, toStream(input.body));
      return { id, name, mime, size };
    },

    /** Records received bytes as a file in `directoryId` (the root without); on a refusal the caller discards them. */
    async place(
      accountId: string,
      received: ReceivedFile,
      at: Pick<FileInput, 'directoryId' | 'fileShareId'>,
    ): Promise<FileEntry> {
      const { directoryId, fileShareId } = parseInput(
        fileInput,
        { name: received.name, mime: received.mime, ...at },
        'file',
      );
      const record: FileEntryRecord = {
        ...received,
        accountId,
        directoryId: await requireDirectory(accountId, directoryId),
        type: 'file',
        fileShareId: fileShareId ?? null,
        createdAt: atom(clock()),
      };
      await storage.insertFileEntry(record);
      return toEntry(record);
    },

    /** Removes received bytes no record names (what cannot be removed now, the orphan sweep removes). */
    async discard(received: ReceivedFile): Promise<void> {
      await blobs.delete(received.id).catch(() => {});
    },

    /** The entry, or `null` when absent or of another account. */
    async get(accountId: string, id: string): Promise<FileEntry | null> {
      checkAccountId(accountId);
      // An id not of our shape (a control character in it, say) names nothing: it never reaches the store.
      if (!isEntryId(id)) return null;
      const record = await storage.getFileEntry(accountId, id);
      return record && toEntry(record);
    },

    /**
     * A link to the file's bytes that serves for five minutes without Authorization, under `baseUrl`
     * (default: the `publicUrl` option). 400 for an id that is no file's or directory's; 404 for a
     * directory, or a file not in this account.
     */
    async downloadLink(accountId: string, fileId: string, baseUrl?: string): Promise<DownloadLink> {
      checkAccountId(accountId);
      if (!isEntryId(fileId)) throw new PortalError('ID_MALFORMED', 'fileId', 'a file', 'fsf');
      const record = await storage.getFileEntry(accountId, fileId);
      if (record === null) throw new PortalError('FILE_NOT_FOUND', fileId);
      if (record.type !== 'file') throw new PortalError('NOT_A_FILE', fileId);
      return downloads.link({ kind: 'file', accountId, id: record.id }, baseUrl, 'files.downloadLink');
    },

    /**
     * Removes a file (its record first, then its bytes: bytes no record names are swept, while a
     * record without bytes would be broken) or an empty directory. `false` when absent.
     */
    async delete(accountId: string, id: string): Promise<boolean> {
      checkAccountId(accountId);
      if (!isEntryId(id)) return false;
      const record = await storage.getFileEntry(accountId, id);
      if (record === null) return false;
      if (record.type === 'directory' && (await storage.listFileEntries(accountId, id)).length > 0) {
        throw new PortalError('DIRECTORY_NOT_EMPTY', id);
      }
      const removed = await storage.deleteFileEntry(accountId, id);
      if (removed && record.type === 'file') await blobs.delete(id);
      return removed;
    },
  };
  return service;
}

export type FileService = ReturnType<typeof createFileService>;
