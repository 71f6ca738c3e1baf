import { readAgreementForm } from '../agreement-form.js';
import type { Route } from '../handler.js';
import { PortalError } from '../../errors.js';
import type { AgreementService } from '../../domain/agreements.js';

/**
 * `POST /agreements` (multipart/form-data, streamed into the blob store), and, as an extension,
 * `GET /agreements/{agreementId}`: the address the `Location` of a created agreement names.
 */
export function agreementRoutes(agreements: AgreementService, options: { extensions: boolean }): Route[] {
  const routes: Route[] = [
    {
      method: 'POST',
      path: '/agreements',
      // A refusal (413, 400) is answered while the body still arrives, with `Connection: close`.
      streamsBody: true,
      async handler({ req, accountId, baseUrl }) {
        const agreement = await agreements.create(accountId, (documents) => readAgreementForm(req, documents));
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
        if (agreement === null) throw new PortalError('AGREEMENT_NOT_FOUND', params.agreementId!);
        return { status: 200, body: agreement };
      },
    });
  }
  return routes;
}
