import { readAgreementForm } from '../agreement-form.js';
import { answerEarly } from '../answer-early.js';
import type { Route } from '../handler.js';
import { HttpError } from '../../errors.js';
import { errorReply } from '../reply.js';
import type { BlobStore } from '../../ports.js';
import type { AgreementService } from '../../domain/agreements.js';

/**
 * `POST /agreements` (multipart/form-data, streamed into the blob store), and, as an extension,
 * `GET /agreements/{agreementId}`: the address the `Location` of a created agreement names.
 */
export function agreementRoutes(agreements: AgreementService, options: { blobs: BlobStore; extensions: boolean }): Route[] {
  const routes: Route[] = [
    {
      method: 'POST',
      path: '/agreements',
      // An early answer (413 while the body still arrives) and `Connection: close` are written here.
      writesResponse: true,
      async handler({ req, res, accountId, baseUrl }) {
        let form;
        try {
          form = await readAgreementForm(req, options.blobs);
        } catch (error) {
          if (req.complete) throw error;
          // The client went away: there is no one to answer.
          if (req.destroyed) return;
          if (error instanceof HttpError) return answerEarly(req, res, error.status, error.message);
          res.setHeader('Connection', 'close');
          throw error;
        }
        const agreement = await agreements.create(accountId, form);
        return { status: 201, body: agreement, headers: { Location: `${baseUrl}/agreements/${agreement.id}` } };
      },
    },
  ];
  if (options.extensions) {
    routes.push({
      method: ['GET', 'HEAD'],
      path: '/agreements/:agreementId',
      async handler({ accountId, params }) {
        const agreement = await agreements.get(accountId, params.agreementId!);
        if (agreement === null) return errorReply(404, `No agreement ${params.agreementId} in this account.`);
        return { status: 200, body: agreement };
      },
    });
  }
  return routes;
}
