import { PortalError } from '../../errors.js';
import type { FileEntry } from '../../records.js';
import type { FileService } from '../../domain/files.js';
import type { Route } from '../handler.js';
import { jsonString } from '../reply.js';

/**
 * An entry as JSON text, from its known fields, as Fastify does from a response schema: a listing
 * is the largest answer the API serializes, up to thousands of entries (hot path).
 */
export function entryJson(entry: FileEntry): string {
  return (
    '{"id":' + jsonString(entry.id) +
    ',"type":' + jsonString(entry.type) +
    ',"name":' + jsonString(entry.name) +
    ',"size":' + entry.size +
    ',"mime":' + jsonString(entry.mime) +
    ',"fileShareId":' + (entry.fileShareId === null ? 'null' : jsonString(entry.fileShareId)) +
    ',"createdAt":' + jsonString(entry.createdAt) +
    '}'
  );
}

/** `GET /files?directoryId=fsd_…`: one directory's entries, the account's root without the parameter. */
export function fileRoutes(files: FileService): Route[] {
  return [
    {
      method: ['GET', 'HEAD'],
      path: '/files',
      async handler({ accountId, query }) {
        const directoryId = query.directoryId;
        if (Array.isArray(directoryId)) throw new PortalError('QUERY_REPEATED', 'directoryId');
        const entries = await files.list(accountId, directoryId);
        return { status: 200, json: '{"data":[' + entries.map(entryJson).join(',') + ']}' };
      },
    },
  ];
}
