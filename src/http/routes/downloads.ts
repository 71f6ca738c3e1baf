import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Readable } from 'node:stream';
import { pumpBlob } from '../blob-pump.js';
import { type RangeRequest, parseRange } from '../byte-range.js';
import { attachmentDisposition } from '../content-disposition.js';
import * as v from 'valibot';
import { DOWNLOAD_ROUTE, UNIX_SECONDS, readDownloadRequest } from '../../domain/download-links.js';
import {
  BYTES_HEADERS,
  REQUEST_ID_HEADER,
  failure,
  header,
  type Json,
  type Operation,
  pathParameter,
  queryParameter,
} from '../route-doc.js';
import { isMediaType } from '../../domain/inputs.js';
import type { Route } from '../handler.js';
import { PortalError } from '../../errors.js';
import type { Downloadable, DownloadService } from '../../domain/downloads.js';
import type { BlobReader } from '../../ports.js';

/**
 * The signed download route (public: the link's signature is its authorization). Streams the
 * bytes of an download, a file or an agreement document, whole or one range, straight from the
 * blob store to the socket; or, where the store can serve them itself (`BlobStore.presign`),
 * redirects there.
 */
export function downloadRoutes(downloads: DownloadService): Route[] {
  return [
    {
      method: ['GET', 'HEAD'],
      path: DOWNLOAD_ROUTE,
      public: true,
      doc: downloadOperation('GET'),
      headDoc: downloadOperation('HEAD'),
      writesResponse: true,
      async handler({ req, res, params, query }) {
        // Private bytes: no shared cache may keep them, whatever the answer turns out to be.
        res.setHeader('Cache-Control', 'private, no-store');
        const presented = readDownloadRequest(params, query);
        const download = await downloads.redeem(presented);
        // A media type stored before they were checked as RFC 9110 writes them could not go out as a header.
        const contentType = isMediaType(download.mime) ? download.mime : 'application/octet-stream';
        const contentDisposition = attachmentDisposition(download.name);
        // A presigned URL is signed for GET alone; a HEAD is answered here, from the record. So is
        // a script's fetch from a page of this origin (the signing page showing a document's pages):
        // the page's CSP lets it talk to its own origin only, so it could not follow the redirect.
        const direct =
          req.method === 'GET' && !fetchedBySameOrigin(req)
            ? await downloads.directUrl(download, presented!.grant.expires, { contentType, contentDisposition })
            : null;
        if (direct !== null) {
          // The store serves the bytes (and the Range) itself, with these headers, until the link expires.
          res.writeHead(302, { Location: direct, 'Content-Length': 0 }).end();
          return;
        }
        const asked = requestedRange(req, download);
        if (asked.kind === 'unsatisfiable') {
          throw new PortalError('RANGE_NOT_SATISFIABLE', download.size);
        }
        const range = asked.kind === 'partial' ? asked.range : undefined;
        const length = range === undefined ? download.size : range.end - range.start + 1;
        const headers: Record<string, string | number> = {
          'Content-Type': contentType,
          'Content-Length': length,
          'Content-Disposition': contentDisposition,
          'Accept-Ranges': 'bytes',
          ETag: etagOf(download),
          'Last-Modified': new Date(download.createdAt).toUTCString(),
          // Should a browser open it anyway, uploaded HTML or SVG runs no script on our origin.
          'Content-Security-Policy': "default-src 'none'; sandbox",
        };
        if (range !== undefined) headers['Content-Range'] = `bytes ${range.start}-${range.end}/${download.size}`;
        const status = range === undefined ? 200 : 206;

        if (req.method === 'HEAD') {
          await downloads.checkBytes(download);
          res.writeHead(status, headers).end();
          return;
        }
        const body = await downloads.openBytes(download, range);
        res.writeHead(status, headers);
        await (isStream(body) ? streamBody(body, res) : pumpBlob(body, res, length));
      },
    },
  ];
}

/** Whether a browser says a script of this origin fetched this (`Sec-Fetch-Site`, `Sec-Fetch-Mode`). */
function fetchedBySameOrigin(req: IncomingMessage): boolean {
  const mode = req.headers['sec-fetch-mode'];
  return req.headers['sec-fetch-site'] === 'same-origin' && (mode === 'cors' || mode === 'same-origin');
}

/**
 * Streams `body` into `res`. Resolves once the response is done, or once the client went away (the
 * body destroyed then, so the blob store closes what it read from; nothing to answer). Rejects when
 * the body fails, the connection cut. `pipe` rather than `stream.pipeline`: on Node 24 pipeline
 * took more CPU a MiB for the same bytes (bench row "5 MiB download, fsBlobs, server CPU a MiB";
 * the figures in docs/performance.md, "Downloads from fsBlobs").
 */
function streamBody(body: Readable, res: ServerResponse): Promise<void> {
  return new Promise((resolve, reject) => {
    if (res.destroyed) {
      // The client went away while the blob was being opened: its 'close' has come and gone.
      body.destroy();
      return resolve();
    }
    body.on('error', (error) => {
      res.destroy(error);
      reject(error);
    });
    res.once('close', () => {
      if (!res.writableFinished) body.destroy();
      resolve();
    });
    body.pipe(res);
  });
}

/** A stream by its shape, not its class: a store may hand out another library's readable streams. */
const isStream = (body: Readable | BlobReader): body is Readable => typeof (body as Readable).pipe === 'function';

/** The bytes under a download id never change, so its id is a strong validator. */
const etagOf = (download: Downloadable) => `"${download.id}"`;

/**
 * The `Range` asked for. With an `If-Range`, only when it names our ETag: a date there is a weak
 * validator, which RFC 9110 §13.1.5 does not let a range rely on, so it gets the whole download.
 */
function requestedRange(req: IncomingMessage, download: Downloadable): RangeRequest {
  const ifRange = req.headers['if-range'];
  if (ifRange !== undefined && ifRange !== etagOf(download)) return { kind: 'full' };
  return parseRange(req.headers.range, download.size);
}

/** The download route's operation; a HEAD's answers are those of the GET without their bodies, and it never redirects. */
function downloadOperation(method: 'GET' | 'HEAD'): Operation {
  const bytes =
    method === 'GET'
      ? { content: { '*/*': { schema: { type: 'string', contentMediaType: 'application/octet-stream' } } } }
      : {};
  const redirect: Record<number, Json> = {
    302: {
      description:
        'With a blob store that serves bytes itself (`s3Blobs({ redirect: true })`): a presigned URL of the object, valid no longer than the link, answering with the same Content-Type and Content-Disposition and honouring Range.',
      headers: { ...REQUEST_ID_HEADER, Location: { schema: { type: 'string', format: 'uri' }, required: true } },
    },
  };
  return {
    operationId: method === 'GET' ? 'download' : 'headDownload',
    summary:
      method === 'GET'
        ? 'Download an attachment, a file or an agreement document through a signed link'
        : 'The headers of a download, without its bytes',
    tags: ['Downloads'],
    description:
      'The `link` of a download-link answer (a ticket attachment, a file, an agreement document): it needs no Authorization, as its signature (HMAC-SHA256 over every other part) is its authorization. Any instance holding the signing keys serves it.',
    parameters: [
      pathParameter(
        'id',
        "The attachment (`tca_…`), file (`fsf_…`) or document (`agd_…`, also for the document's completed copy) id, as the link carries it.",
      ),
      queryParameter('account', 'The account the link was made in.', { type: 'string', minLength: 1 }, true),
      queryParameter('ticket', "The ticket id: on an attachment's link only.", { type: 'string', minLength: 1 }),
      queryParameter('message', "The message id: on an attachment's link only.", { type: 'string', minLength: 1 }),
      queryParameter('agreement', "The agreement id: on a document's link only.", { type: 'string', minLength: 1 }),
      queryParameter('copy', "`signed` on the link of a document's completed copy only.", v.picklist(['signed'])),
      queryParameter(
        'expires',
        'Unix seconds from which the link is refused.',
        v.pipe(v.string(), v.regex(UNIX_SECONDS)),
        true,
      ),
      queryParameter(
        'signature',
        'base64url HMAC-SHA256 of the other parts.',
        v.pipe(v.string(), v.regex(/^[A-Za-z0-9_-]{43}$/)),
        true,
      ),
      {
        name: 'Range',
        in: 'header',
        required: false,
        description: 'One byte range (`bytes=0-99`, `bytes=100-`, `bytes=-500`).',
        schema: { type: 'string' },
      },
      {
        name: 'If-Range',
        in: 'header',
        required: false,
        description: 'The range is honoured only when this names the ETag.',
        schema: { type: 'string' },
      },
    ],
    responses: {
      200: {
        description: 'The whole attachment, with its stored media type.',
        headers: { ...REQUEST_ID_HEADER, ...BYTES_HEADERS },
        ...bytes,
      },
      206: {
        description: 'The one range asked for.',
        headers: { ...REQUEST_ID_HEADER, ...BYTES_HEADERS, 'Content-Range': header('Content-Range') },
        ...bytes,
      },
      ...(method === 'GET' ? redirect : {}),
      400: failure('A query parameter no link carries.'),
      403: failure('The link is incomplete, altered, or signed with a key this server does not hold.'),
      404: failure('The attachment, file or document was removed after the link was made.'),
      410: failure('The link has expired.'),
      416: failure('The range starts past the end of the bytes.', { 'Content-Range': header('Content-Range') }),
    },
  };
}
