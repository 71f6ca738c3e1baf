import * as v from 'valibot';
import { idPattern } from '../../shared/ids.js';
import { queryParameter, response, failure, json, pathParameter, uploadBody } from '../route-doc.js';
import { PortalError } from '../../errors.js';
import type { FileService } from '../../domain/files.js';
import type { Route } from '../handler.js';
import { readJson } from '../json-body.js';
import { readUpload } from '../upload-form.js';

/**
 * `GET /files?directoryId=fsd_…`: one directory's entries, the account's root without the parameter;
 * and the extensions: upload a file, make a directory, a download link to a file, delete either.
 */
export function fileRoutes(files: FileService): Route[] {
  return [
    {
      method: ['GET', 'HEAD'],
      path: '/files',
      doc: {
        operationId: 'listFiles',
        summary: 'List a directory',
        tags: ['Files'],
        description: 'Directories first, then files, each by name without regard to case, then by id. Not paginated.',
        parameters: [
          queryParameter(
            'directoryId',
            "The directory to list (`fsd_…`); without it, the account's root.",
            v.pipe(v.string(), v.regex(idPattern('fsd'))),
          ),
        ],
        responses: {
          200: response('Every entry of the directory.', 'FileList'),
          400: failure('`directoryId` is malformed or given more than once.'),
          404: failure('No such directory in this account.'),
        },
      },
      async handler({ accountId, query }) {
        const directoryId = query.directoryId;
        if (Array.isArray(directoryId)) throw new PortalError('QUERY_REPEATED', 'directoryId');
        const entries = await files.list(accountId, directoryId);
        return { status: 200, body: { data: entries } };
      },
    },
    ...fileExtensionRoutes(files),
  ];
}

/** Extensions: upload a file (multipart, streamed), a download link to one, make a directory, delete either. */
function fileExtensionRoutes(files: FileService): Route[] {
  return [
    {
      method: 'POST',
      path: '/files',
      extension: true,
      doc: {
        operationId: 'uploadFile',
        summary: 'Upload a file',
        tags: ['Files'],
        description: `The parts in any order. The file is streamed into the blob store as it arrives and the entry made once every part is read; a failed or aborted upload, or a \`directoryId\` that names no directory, keeps nothing.`,
        requestBody: uploadBody('FileUploadForm'),
        responses: {
          201: response('The file entry made.', 'FileEntry'),
          400: failure(
            '`directoryId` malformed or repeated; the `file` part missing, repeated or without a filename; an unknown part; a malformed body.',
          ),
          404: failure('No such directory in this account.'),
          413: failure('The file is over 5 MiB (5,242,880 bytes).'),
          415: failure('The body is not `multipart/form-data`, or is compressed.'),
        },
      },
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
      extension: true,
      doc: {
        operationId: 'getFileDownloadLink',
        summary: 'A download link for a file',
        parameters: [pathParameter('fileId', 'The file id (`fsf_…`).')],
        tags: ['Files'],
        description: `The link serves for 5 minutes without Authorization, like an attachment's (Range, HEAD, a presigned redirect with \`s3Blobs({ redirect: true })\`).`,
        responses: {
          200: response('The link and when it expires.', 'DownloadLink'),
          400: failure("The id is neither a file's nor a directory's."),
          404: failure(
            "No such file in this account, or the id is a directory's (the message says which: a directory has no download).",
          ),
        },
      },
      async handler({ accountId, params, baseUrl }) {
        return { status: 200, body: await files.downloadLink(accountId, params.fileId!, baseUrl) };
      },
    },
    {
      method: 'POST',
      path: '/directories',
      extension: true,
      doc: {
        operationId: 'createDirectory',
        summary: 'Create a directory',
        tags: ['Files'],
        description: `In the account's root, or in \`directoryId\`.`,
        requestBody: { required: true, content: json('DirectoryInput') },
        responses: {
          201: response('The directory made.', 'FileEntry'),
          400: failure('The body is not JSON, or not `{name, directoryId?}` with a valid name and id.'),
          404: failure('No such parent directory in this account.'),
          415: failure('The body is not `application/json`.'),
        },
      },
      async handler({ req, accountId }) {
        const input = (await readJson(req)) as { name: string; directoryId?: string | null };
        return { status: 201, body: await files.createDirectory(accountId, input) };
      },
    },
    {
      method: 'DELETE',
      path: '/files/:entryId',
      extension: true,
      doc: {
        operationId: 'deleteFileEntry',
        summary: 'Delete a file or an empty directory',
        parameters: [pathParameter('entryId', 'The file (`fsf_…`) or directory (`fsd_…`) id.')],
        tags: ['Files'],
        description: `A file's bytes go with it.`,
        responses: {
          204: response('Deleted.'),
          404: failure('No such file or directory in this account.'),
          409: failure('The directory is not empty.'),
        },
      },
      async handler({ accountId, params }) {
        if (!(await files.delete(accountId, params.entryId!))) throw new PortalError('FILE_NOT_FOUND', params.entryId!);
        return { status: 204 };
      },
    },
  ];
}
