import type { BrandingOf } from '../../domain/branding.js';
import type { Route } from '../handler.js';
import { response } from '../route-doc.js';

/**
 * `GET /branding` (an extension): the account's branding, which the portal page shows. Any portal
 * session may read it, whatever its scopes (the `account` area): it is how the page looks.
 */
export function brandingRoutes(brandingOf: BrandingOf): Route[] {
  return [
    {
      method: ['GET', 'HEAD'],
      path: '/branding',
      extension: true,
      doc: {
        operationId: 'getBranding',
        summary: "The account's branding",
        tags: ['Portal sessions'],
        description:
          'The company the portal speaks for in this account (option `branding`): its name, logo, accent colour and support address, as the signing page, the portal page, the certificate and mails show them; `branding: null` without one. Readable with the API key and with any portal session.',
        responses: { 200: response('The branding, or `null`.', 'BrandingAnswer') },
      },
      async handler({ accountId }) {
        return { status: 200, body: { branding: await brandingOf(accountId) } };
      },
    },
  ];
}
