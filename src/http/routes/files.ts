import { PortalError } from '../../errors.js';
import type { FileService } from '../../domain/files.js';
import type { Route } from '../handler.js';
import { readJson } from '../json-body.js';
import { readUpload } from '../upload-form.js';

/** `GET /files?directoryId=fsd_…`: one directory's entries, the account's root without the parameter. */
export function fileRoutes(files: FileService, options: { extensions: boolean }): Route[] {
  const routes: Route[] = [
    {
      method: ['GET', 'HEAD'],
      path: '/files',
      query: ['directoryId'],
      async handler({ accountId, query }) {
        const directoryId = query.directoryId;
        if (Array.isArray(directoryId)) throw new PortalError('QUERY_REPEATED', 'directoryId');
        const entries = await files.list(accountId, directoryId);
        // JSON.stringify, not text built field by field: V8's own serializer is quicker on a
        // thousand entries, while the field-by-field text wins on one record (bench row
        // "GET /v1/files (1,000 entries)"; docs/performance.md, "Figures behind the code": the listing).
        return { status: 200, body: { data: entries } };
      },
    },
  ];
  if (options.extensions) routes.push(...fileExtensionRoutes(files));
  return routes;
}

/** Extensions: upload a file (multipart, streamed), a download link to one, make a directory, delete either. */
function fileExtensionRoutes(files: FileService): Route[] {
  return [
    {
      method: 'POST',
      path: '/files',
      streamsBody: true,
      async handler({ req, accountId }) {
        const entry = await readUpload(req, 'POST /files', ['directoryId'], {
          keep: (file) => files.receive(accountId, file),
          complete: (received, fields) => files.place(accountId, received, { directoryId: fields.directoryId ?? null }),
          discard: (received) => files.discard(received),
        });
        return { status: 201, body: entry };
      },
    },
    {
      method: ['GET', 'HEAD'],
      path: '/files/:fileId/download',
      async handler({ accountId, params, baseUrl }) {
        return { status: 200, body: await files.downloadLink(accountId, params.fileId!, baseUrl) };
      },
    },
    {
      method: 'POST',
      path: '/directories',
      async handler({ req, accountId }) {
        const input = (await readJson(req)) as { name: string; directoryId?: string | null };
        return { status: 201, body: await files.createDirectory(accountId, input) };
      },
    },
    {
      method: 'DELETE',
      path: '/files/:entryId',
      async handler({ accountId, params }) {
        if (!(await files.delete(accountId, params.entryId!))) throw new PortalError('FILE_NOT_FOUND', params.entryId!);
        return { status: 204 };
      },
    },
  ];
}
