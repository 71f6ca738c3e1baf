import { readAgreementForm } from '../agreement-form.js';
import type { Route } from '../handler.js';
import { PortalError } from '../../errors.js';
import type { AgreementService, DocumentSink } from '../../domain/agreements.js';
import type { Agreement } from '../../records.js';
import { idempotencyKeyOf, idempotentReply } from '../idempotent-reply.js';
import { wholeNumber } from '../query-number.js';

/**
 * `POST /agreements` (multipart/form-data, streamed into the blob store), and, as extensions,
 * `GET /agreements` (a page of them, newest first) and `GET /agreements/{agreementId}`: the
 * address the `Location` of a created agreement names.
 */
export function agreementRoutes(agreements: AgreementService, options: { extensions: boolean }): Route[] {
  const routes: Route[] = [
    {
      method: 'POST',
      path: '/agreements',
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
  ];
  if (options.extensions) {
    routes.push({
      method: ['GET', 'HEAD'],
      path: '/agreements',
      query: ['limit', 'cursor'],
      async handler({ accountId, query }) {
        const { limit, cursor } = query;
        if (Array.isArray(limit)) throw new PortalError('QUERY_REPEATED', 'limit');
        if (Array.isArray(cursor)) throw new PortalError('QUERY_REPEATED', 'cursor');
        const count = limit === undefined ? undefined : wholeNumber(limit);
        return { status: 200, body: await agreements.list(accountId, { limit: count, cursor }) };
      },
    });
    routes.push({
      method: ['GET', 'HEAD'],
      path: '/agreements/:agreementId',
      async handler({ accountId, params }) {
        const agreement = await agreements.get(accountId, params.agreementId!);
        if (agreement === null) throw new PortalError('AGREEMENT_NOT_FOUND', params.agreementId!);
        return { status: 200, body: agreement };
      },
    });
    routes.push({
      method: ['GET', 'HEAD'],
      path: '/agreements/:agreementId/documents/:documentId/download',
      async handler({ accountId, params, baseUrl }) {
        const link = await agreements.documentDownloadLink(accountId, params.agreementId!, params.documentId!, baseUrl);
        return { status: 200, body: link };
      },
    });
  }
  return routes;
}
