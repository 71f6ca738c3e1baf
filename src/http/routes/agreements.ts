import { MAX_FORM_BYTES } from '../multipart.js';
import * as v from 'valibot';
import { idPattern } from '../../shared/ids.js';
import {
  RETRY_AFTER,
  agreementIdParameter,
  response,
  created,
  failure,
  idempotencyKeyParameter,
  keyInProgress,
  keyReused,
  json,
  pathParameter,
  ref,
  queryParameter,
} from '../route-doc.js';
import { readAgreementForm } from '../agreement-form.js';
import { readBody, readJson } from '../json-body.js';
import type { Route } from '../handler.js';
import { PortalError } from '../../errors.js';
import type { AgreementService, DocumentSink } from '../../domain/agreements.js';
import type { Agreement } from '../../records.js';
import { idempotencyKeyOf, idempotentReply } from '../idempotent-reply.js';
import { wholeNumber } from '../query-number.js';

/** The largest PDF `POST /verify` reads: 25 MiB (DESIGN §12). */
const VERIFY_LIMIT = 25 * 1024 * 1024;
/**
 * PDFs read for `/verify` at once, in this process: each is held whole (up to 25 MiB) until the
 * PDF worker has read its seal, so their number bounds the memory the route can be made to hold.
 */
const MAX_VERIFYING = 4;

/**
 * `POST /agreements` (multipart/form-data, streamed into the blob store), and, as extensions,
 * `GET /agreements` (a page of them, newest first) and `GET /agreements/{agreementId}`: the
 * address the `Location` of a created agreement names.
 */
export function agreementRoutes(agreements: AgreementService): Route[] {
  let verifying = 0;
  return [
    {
      method: 'POST',
      path: '/agreements',
      doc: {
        operationId: 'createAgreement',
        summary: 'Create an agreement',
        tags: ['Agreements'],
        description:
          'Documents are streamed: hashed and stored as they arrive. A failed or aborted request leaves no record and no stored bytes.',
        parameters: [idempotencyKeyParameter],
        requestBody: {
          required: true,
          content: {
            'multipart/form-data': {
              schema: ref('AgreementForm'),
              encoding: {
                signers: { contentType: 'application/json' },
                documents: { contentType: 'application/octet-stream' },
              },
            },
          },
        },
        responses: {
          201: response(
            'The agreement made: status `sent`, no signer has signed. With `Idempotent-Replayed: true`, the first answer to this `Idempotency-Key`, given again.',
            'Agreement',
            created,
          ),
          400: failure(
            'A part missing, invalid, unknown or repeated; more than 5 signers or 5 documents; a malformed body; a malformed `Idempotency-Key`.',
          ),
          409: failure(`Answered before the body is read: ${keyInProgress}.`, {
            'Retry-After': { ...RETRY_AFTER, required: true },
          }),
          413: failure(
            `The documents are over 5 MiB (5,242,880 bytes) in total, or the body over ${MAX_FORM_BYTES} bytes.`,
          ),
          415: failure('The body is not `multipart/form-data`, or is compressed.'),
          422: keyReused,
        },
      },
      // A refusal (413, 400) is answered while the body still arrives, with `Connection: close`.
      streamsBody: true,
      async handler({ req, accountId, baseUrl, client }) {
        const readForm = (documents: DocumentSink) => readAgreementForm(req, documents);
        const key = idempotencyKeyOf(req);
        if (key !== undefined) {
          const answer = (agreement: Agreement) => ({
            status: 201,
            body: JSON.stringify(agreement),
            location: `${baseUrl}/agreements/${agreement.id}`,
          });
          return idempotentReply(await agreements.createIdempotent(accountId, readForm, { key, answer }, client));
        }
        const agreement = await agreements.create(accountId, readForm, client);
        return { status: 201, body: agreement, headers: { Location: `${baseUrl}/agreements/${agreement.id}` } };
      },
    },
    {
      method: ['GET', 'HEAD'],
      path: '/agreements',
      extension: true,
      doc: {
        operationId: 'listAgreements',
        summary: 'List agreements',
        tags: ['Agreements'],
        description: `The account's agreements, newest first (by \`createdAt\`, those of one second the last made first), a page at a time, without signature images (as \`AgreementEventData\`: \`GET /agreements/{agreementId}\` has them). Each page after the first starts right after the last agreement of the page before, so agreements created meanwhile do not shift a page: they come first in a new listing.`,
        parameters: [
          queryParameter(
            'limit',
            'How many agreements a page holds: 1–100, 50 when not given.',
            v.pipe(v.number(), v.integer(), v.minValue(1), v.maxValue(100)),
          ),
          queryParameter(
            'cursor',
            'The `nextCursor` of the page before; without it, the first page.',
            v.pipe(v.string(), v.regex(idPattern('agr'))),
          ),
        ],
        responses: {
          200: response('A page of agreements, and the cursor of the next one.', 'AgreementList'),
          400: failure(
            '`limit` is not a whole number from 1 to 100, `cursor` is not one a list of this account gave, or either is given more than once.',
          ),
        },
      },
      async handler({ accountId, query }) {
        const { limit, cursor } = query;
        if (Array.isArray(limit)) throw new PortalError('QUERY_REPEATED', 'limit');
        if (Array.isArray(cursor)) throw new PortalError('QUERY_REPEATED', 'cursor');
        const count = limit === undefined ? undefined : wholeNumber(limit);
        return { status: 200, body: await agreements.list(accountId, { limit: count, cursor }) };
      },
    },
    {
      method: ['GET', 'HEAD'],
      path: '/agreements/:agreementId',
      extension: true,
      doc: {
        operationId: 'getAgreement',
        summary: 'Get an agreement',
        parameters: [agreementIdParameter],
        tags: ['Agreements'],
        description: `The address the \`Location\` of a created agreement names. The whole agreement, signature images included: the \`agreement-created\` and \`agreement-signed\` webhook events carry it without them (\`AgreementEventData\`), and a receiver that needs the images fetches them here.`,
        responses: {
          200: response('The agreement, signature images included.', 'Agreement'),
          404: failure('No such agreement in this account.'),
        },
      },
      async handler({ accountId, params }) {
        const agreement = await agreements.get(accountId, params.agreementId!);
        if (agreement === null) throw new PortalError('AGREEMENT_NOT_FOUND', params.agreementId!);
        return { status: 200, body: agreement };
      },
    },
    {
      method: ['GET', 'HEAD'],
      path: '/agreements/:agreementId/documents/:documentId/download',
      extension: true,
      doc: {
        operationId: 'getDocumentDownloadLink',
        summary: 'A download link for an agreement document',
        parameters: [
          agreementIdParameter,
          pathParameter('documentId', "The document id (`agd_…`), one of the agreement's `documents`."),
        ],
        tags: ['Agreements'],
        description: `The link serves for 5 minutes without Authorization, like an attachment's. A document is served as \`application/pdf\` when its name ends in \`.pdf\`, else as \`application/octet-stream\`.`,
        responses: {
          200: response('The link and when it expires.', 'DownloadLink'),
          404: failure('No such agreement in this account, or no such document in it.'),
        },
      },
      async handler({ accountId, params, baseUrl }) {
        const link = await agreements.documentDownloadLink(accountId, params.agreementId!, params.documentId!, baseUrl);
        return { status: 200, body: link };
      },
    },
    {
      method: ['GET', 'HEAD'],
      path: '/agreements/:agreementId/documents/:documentId/signed',
      extension: true,
      doc: {
        operationId: 'getSignedCopyLink',
        summary: "A download link for a document's completed copy",
        parameters: [
          agreementIdParameter,
          pathParameter('documentId', "The document id (`agd_…`), one of the agreement's `documents`."),
        ],
        tags: ['Agreements'],
        description: `Once the agreement is signed, each PDF document gets a completed copy: each signer's values stamped into their fields (or, for a PDF with no field, a signature page appended) by an incremental update (the original bytes stay its prefix), then, with \`sealing\`, a PAdES seal over the whole file (\`B-T\` with a timestamp authority, else \`B-B\`). Its SHA-256 is the document's \`signedFileHash\`. The link serves for 5 minutes, as \`application/pdf\`.`,
        responses: {
          200: response('The link and when it expires.', 'DownloadLink'),
          404: failure('No such agreement in this account, or no such document in it.'),
          409: failure(
            'The agreement is not signed, the copy is still being made, or the document is not a PDF (it has no copy).',
          ),
        },
      },
      async handler({ accountId, params, baseUrl }) {
        return {
          status: 200,
          body: await agreements.signedCopyLink(accountId, params.agreementId!, params.documentId!, baseUrl),
        };
      },
    },
    {
      method: 'DELETE',
      path: '/agreements/:agreementId',
      extension: true,
      doc: {
        operationId: 'deleteAgreement',
        summary: 'Remove an agreement',
        parameters: [agreementIdParameter],
        tags: ['Agreements'],
        description:
          'Removes the agreement, whatever its state, with its signers, documents, completed copies, certificate and audit trail: the record first, then the bytes (what a crash leaves is removed by the orphan sweep). Its signing links stop working. Events already published about it are kept with the other events, for their retention; on the filesystem store, the removed record leaves its append-only log at the next compaction.',
        responses: {
          204: response('Removed.'),
          404: failure('No such agreement in this account.'),
        },
      },
      async handler({ accountId, params }) {
        if (!(await agreements.delete(accountId, params.agreementId!)))
          throw new PortalError('AGREEMENT_NOT_FOUND', params.agreementId!);
        return { status: 204 };
      },
    },
    {
      method: 'POST',
      path: '/agreements/:agreementId/void',
      extension: true,
      doc: {
        operationId: 'voidAgreement',
        summary: 'Void an open agreement',
        parameters: [agreementIdParameter],
        tags: ['Agreements'],
        description:
          'Closes the agreement (`closedReason: voided`): every signing link answers `401` from now on, the reason is recorded in the audit trail, `agreement-voided` is published, and with a notifier each signer who had a link is mailed that it was voided. The certificate of completion is made as for any closed agreement.',
        requestBody: { required: true, content: json('VoidInput') },
        responses: {
          200: response('The agreement, closed.', 'Agreement'),
          400: failure('A `reason` missing, empty or over 1,000 characters; an unknown field.'),
          404: failure('No such agreement in this account.'),
          409: failure('The agreement is signed, or already closed (declined, expired or voided).'),
          413: failure('The body is over 64 KiB.'),
          415: failure('A body that is not `application/json`.'),
        },
      },
      async handler({ req, accountId, params, client }) {
        const input = await readJson(req);
        return { status: 200, body: await agreements.voidAgreement(accountId, params.agreementId!, input, client) };
      },
    },
    {
      method: 'PATCH',
      path: '/agreements/:agreementId/signers/:signerId',
      extension: true,
      doc: {
        operationId: 'correctSigner',
        summary: "Correct a signer's name or e-mail",
        parameters: [agreementIdParameter, pathParameter('signerId', 'The signer id (`ags_…`).')],
        tags: ['Agreements'],
        description:
          "While the agreement is open and the signer has not signed. The signer's signing link is revoked (a link sent to a wrong address stops working; issue a new one), mail still owed to them is dropped, and the audit trail records which fields changed.",
        requestBody: { required: true, content: json('SignerCorrectionInput') },
        responses: {
          200: response('The agreement, the signer corrected.', 'Agreement'),
          400: failure('No field given, a field invalid or unknown.'),
          404: failure('No such agreement in this account, or no such signer on it.'),
          409: failure('The signer has signed, or the agreement is signed or closed.'),
          413: failure('The body is over 64 KiB.'),
          415: failure('A body that is not `application/json`.'),
        },
      },
      async handler({ req, accountId, params, client }) {
        const input = await readJson(req);
        return {
          status: 200,
          body: await agreements.correctSigner(accountId, params.agreementId!, params.signerId!, input, client),
        };
      },
    },
    {
      method: 'POST',
      path: '/agreements/:agreementId/erase-personal-data',
      extension: true,
      doc: {
        operationId: 'erasePersonalData',
        summary: "Erase the signers' personal data",
        parameters: [agreementIdParameter],
        tags: ['Agreements'],
        description:
          'For a signed or closed agreement (void an open one first). Replaces the signers\' names, e-mails and decline reasons, and every audit entry\'s IP address, user agent and detail, with `"[erased]"`: in the agreement, in its stored events (a redelivery sends them erased) and in a kept idempotent answer; the certificate of completion is made again from what is left. The documents, their completed copies and the signature images are kept as the evidence (remove the agreement to remove them). The audit trail keeps every `hash` and `previousHash`, ends with an `erased` entry, and stays `verified` (docs/signing.md, Erasure). Calling it again answers the same agreement and finishes what a crash may have cut short.',
        responses: {
          200: response('The agreement, its personal data erased.', 'Agreement'),
          404: failure('No such agreement in this account.'),
          409: failure('The agreement is still open: void it first.'),
        },
      },
      async handler({ accountId, params, client }) {
        return { status: 200, body: await agreements.erasePersonalData(accountId, params.agreementId!, client) };
      },
    },
    {
      method: 'POST',
      path: '/verify',
      extension: true,
      doc: {
        operationId: 'verifyDocument',
        summary: 'Verify a PDF: sealed, at which level, and a completed copy this account issued, unchanged',
        tags: ['Agreements'],
        description:
          "`intact` compares the bytes with every completed copy of this account (by SHA-256): one byte changed, added or taken away, and it is `false`. `sealed` checks the PDF's own signatures against the bytes they cover, whoever made them; it says nothing of trust in the signer's certificate, which a validator (pdfsig, Adobe, the EU DSS) decides against its trust list.",
        requestBody: {
          required: true,
          content: { 'application/pdf': { schema: { type: 'string', format: 'binary', maxLength: VERIFY_LIMIT } } },
        },
        responses: {
          200: response('What the PDF is.', 'Verification'),
          400: failure('The body is empty or not a PDF (it does not start with `%PDF-`).'),
          413: failure('The body is over 25 MiB (26,214,400 bytes).'),
          415: failure('The body is not `application/pdf`.'),
          429: failure('Four PDFs are being verified already in this process; try again after `Retry-After` seconds.', {
            'Retry-After': { ...RETRY_AFTER, required: true },
          }),
        },
      },
      // A PDF over the limit is refused while it still arrives, with `Connection: close`.
      streamsBody: true,
      async handler({ req, accountId }) {
        const type = (req.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
        if (type !== 'application/pdf') throw new PortalError('VERIFY_CONTENT_TYPE');
        if (verifying === MAX_VERIFYING) throw new PortalError('VERIFY_BUSY', MAX_VERIFYING);
        verifying++;
        try {
          const bytes = await readBody(req, VERIFY_LIMIT, () => new PortalError('VERIFY_TOO_LARGE'));
          return { status: 200, body: await agreements.verify(accountId, bytes) };
        } finally {
          verifying--;
        }
      },
    },
  ];
}
