import type { IncomingMessage } from 'node:http';
import type { SigningService } from '../../domain/signing.js';
import type { Route } from '../handler.js';
import { SIGNATURE_MAX_LENGTH } from '../../domain/signature-data.js';
import { readOptionalJson } from '../json-body.js';

/** `{"signature": "data:…"}` with the largest image a signature may be, and room for the JSON around it. */
const SIGN_BODY_LIMIT = SIGNATURE_MAX_LENGTH + 1024;

/** The signing token of `Authorization: Bearer <token>`, or `null` (the service answers 401). */
function bearer(req: IncomingMessage): string | null {
  const match = /^Bearer +([A-Za-z0-9_.-]{1,2048})$/.exec(req.headers.authorization ?? '');
  return match === null ? null : match[1]!;
}

/**
 * Signing (extension routes): the host makes a signer's link and reads an agreement's audit trail
 * with the API key; the signer reads, signs and declines with the link's token, no API key.
 */
export function signingRoutes(signing: SigningService): Route[] {
  return [
    {
      method: 'POST',
      path: '/agreements/:agreementId/signers/:signerId/signing-link',
      async handler({ req, accountId, params, baseUrl, client }) {
        const input = await readOptionalJson(req);
        return { status: 201, body: await signing.issueLink(accountId, params.agreementId!, params.signerId!, input, baseUrl, client) };
      },
    },
    {
      method: ['GET', 'HEAD'],
      path: '/agreements/:agreementId/audit',
      async handler({ accountId, params }) {
        return { status: 200, body: await signing.audit(accountId, params.agreementId!) };
      },
    },
    {
      method: ['GET', 'HEAD'],
      path: '/agreements/:agreementId/certificate',
      // Bytes, not JSON: written here, after the contract's headers the dispatcher set on `res`.
      writesResponse: true,
      async handler({ req, res, accountId, params }) {
        const { pdf, agreementId } = await signing.certificate(accountId, params.agreementId!);
        res.writeHead(200, {
          'Content-Type': 'application/pdf',
          'Content-Length': pdf.length,
          'Content-Disposition': `attachment; filename="certificate-${agreementId}.pdf"`,
        });
        res.end(req.method === 'HEAD' ? undefined : pdf);
      },
    },
    {
      method: ['GET', 'HEAD'],
      path: '/signing',
      public: true,
      async handler({ req, baseUrl, client }) {
        return { status: 200, body: await signing.view(bearer(req), baseUrl, client) };
      },
    },
    {
      method: 'POST',
      path: '/signing/sign',
      public: true,
      async handler({ req, baseUrl, client }) {
        const token = bearer(req);
        return { status: 200, body: await signing.sign(token, await readOptionalJson(req, SIGN_BODY_LIMIT), baseUrl, client) };
      },
    },
    {
      method: 'POST',
      path: '/signing/decline',
      public: true,
      async handler({ req, baseUrl, client }) {
        const token = bearer(req);
        return { status: 200, body: await signing.decline(token, await readOptionalJson(req), baseUrl, client) };
      },
    },
  ];
}
