import type { Route } from '../handler.js';
import { PortalError } from '../../errors.js';
import type { FileService } from '../../domain/files.js';

/** `GET /files?directoryId=fsd_…`: one directory's entries, the account's root without the parameter. */
export function fileRoutes(files: FileService): Route[] {
  return [
    {
      method: ['GET', 'HEAD'],
      path: '/files',
      async handler({ accountId, query }) {
        const directoryId = query.directoryId;
        if (Array.isArray(directoryId)) throw new PortalError('QUERY_REPEATED', 'directoryId');
        return { status: 200, json: await files.listJson(accountId, directoryId) };
      },
    },
  ];
}
