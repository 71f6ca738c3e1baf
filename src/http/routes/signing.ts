import { REQUEST_ID_HEADER, agreementIdParameter, response, failure, json, pathParameter } from '../route-doc.js';
import type { IncomingMessage } from 'node:http';
import type { SigningService } from '../../domain/signing.js';
import type { Route } from '../handler.js';
import { SIGNATURE_MAX_LENGTH } from '../../domain/signature-data.js';
import { readOptionalJson } from '../json-body.js';
import { bearerToken } from '../auth.js';

/** `{"signature": "data:…"}` with the largest image a signature may be, and room for the JSON around it. */
const SIGN_BODY_LIMIT = SIGNATURE_MAX_LENGTH + 1024;

/** The signing token of `Authorization: Bearer <token>` (`bearerToken`), or `null` (the service answers 401). */
function bearer(req: IncomingMessage): string | null {
  const token = bearerToken(req.headers.authorization);
  return typeof token === 'string' ? token : null;
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
      extension: true,
      doc: {
        operationId: 'createSigningLink',
        summary: 'A signing link for one signer',
        parameters: [agreementIdParameter, pathParameter('signerId', 'The signer id (`ags_…`).')],
        tags: ['Signing'],
        description: `The link opens the signing page with the signer's token in its fragment. A new link replaces every older link of the signer. With \`accessCode\` the signer must give that code (sent to them by another channel; stored only as an scrypt hash) before seeing the documents; with \`send: true\` the notifier mails them the link. A signer with \`shouldIdentify\` must identify in any case: by a mailed code, or by the access code when there is no notifier. Recorded in the audit trail.`,
        requestBody: { required: false, content: json('SigningLinkInput') },
        responses: {
          201: response(
            'The link and when it expires (72 hours unless `expiresInSeconds` says otherwise).',
            'SigningLink',
          ),
          400: failure(
            '`expiresInSeconds` outside 60 … 2,592,000, an `accessCode` outside 4 … 64 characters, an unknown field, a malformed body.',
          ),
          404: failure('No such agreement in this account, or no such signer on it.'),
          409: failure(
            'The signer has signed or declined, the agreement is signed or closed, or the signer has been sent 40 links already (one for each of the 30 reminder rounds, and ten more); `send: true`, or a `shouldIdentify` signer without an `accessCode`, with no notifier configured.',
          ),
          413: failure('The body is over 64 KiB.'),
          415: failure('A body that is not `application/json`.'),
        },
      },
      async handler({ req, accountId, params, baseUrl, client }) {
        const input = await readOptionalJson(req);
        return {
          status: 201,
          body: await signing.issueLink(accountId, params.agreementId!, params.signerId!, input, baseUrl, client),
        };
      },
    },
    {
      method: ['GET', 'HEAD'],
      path: '/agreements/:agreementId/audit',
      extension: true,
      doc: {
        operationId: 'getAgreementAudit',
        summary: 'The audit trail of an agreement',
        parameters: [agreementIdParameter],
        tags: ['Signing'],
        description: `Every step (created, link issued, viewed, signed, declined, expired, reminder) with its time, actor, IP, user agent and the documents' hashes, each entry hashed over the one before.`,
        responses: {
          200: response('The trail, oldest first, and whether its chain verifies.', 'AuditTrail'),
          404: failure('No such agreement in this account.'),
        },
      },
      async handler({ accountId, params }) {
        return { status: 200, body: await signing.audit(accountId, params.agreementId!) };
      },
    },
    {
      method: ['GET', 'HEAD'],
      path: '/agreements/:agreementId/certificate',
      extension: true,
      doc: {
        operationId: 'getAgreementCertificate',
        summary: 'The certificate of completion of an agreement',
        parameters: [agreementIdParameter],
        tags: ['Signing'],
        description: `A PDF: the agreement, each document's name, size and SHA-256, each signer's name, e-mail, time, IP and signature image, the audit trail and its final hash, and whether the chain verifies. Made once the agreement is signed or closed.`,
        responses: {
          200: {
            description: 'The certificate.',
            headers: {
              ...REQUEST_ID_HEADER,
              'Content-Disposition': {
                description: '`attachment; filename="certificate-<agreementId>.pdf"`',
                schema: { type: 'string' },
                required: true,
              },
            },
            content: { 'application/pdf': { schema: { type: 'string', contentMediaType: 'application/pdf' } } },
          },
          404: failure('No such agreement in this account.'),
          409: failure('The agreement still awaits signatures.'),
        },
      },
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
      extension: true,
      doc: {
        operationId: 'getSigning',
        summary: 'What a signer sees',
        tags: ['Signing'],
        signer: true,
        description: `Authorized by the signing token (\`Authorization: Bearer <token>\`), not an API key. The first \`GET\` records the signer's \`viewedAt\` and sends \`agreement-viewed\` (a \`HEAD\` does not). Other signers are shown by name and outcome only: no e-mail, no decline reason.`,
        responses: {
          200: response(
            'The agreement without signature images, the signer, and a download link to each document.',
            'SigningView',
          ),
          410: failure('The signing link has expired.'),
        },
      },
      public: true,
      async handler({ req, baseUrl, client }) {
        return { status: 200, body: await signing.view(bearer(req), baseUrl, client, req.method !== 'HEAD') };
      },
    },
    {
      method: 'POST',
      path: '/signing/identify/email-code',
      extension: true,
      doc: {
        operationId: 'requestIdentificationCode',
        summary: 'Mail the signer a code to identify with',
        tags: ['Signing'],
        signer: true,
        description: `For a signer who must identify (\`identification.methods\` holds \`email-code\`): a one-time code of 6 digits, valid 10 minutes, is mailed to the signer through the notifier; a new code voids the one before. Recorded in the audit trail (\`identification-code-sent\`), never the code.`,
        responses: {
          202: response('The code is queued for mail; it works until `expiresAt`.', 'IdentificationCodeSent'),
          409: failure(
            'The signer need not identify, has identified already, or may not use an e-mail code (no notifier is configured, or the link takes the access code the sender gave).',
          ),
          410: failure('The signing link has expired.'),
          429: failure('Five codes were sent to this signer in the last hour; `Retry-After` says when another may be.'),
        },
      },
      public: true,
      async handler({ req, client }) {
        return { status: 202, body: await signing.requestEmailCode(bearer(req), client) };
      },
    },
    {
      method: 'POST',
      path: '/signing/identify',
      extension: true,
      doc: {
        operationId: 'identify',
        summary: 'Identify with a code',
        tags: ['Signing'],
        signer: true,
        description: `The code mailed to the signer, or the access code the sender gave them, checked in constant time. A wrong code costs one of the link's 5 tries (\`identification-failed\`); the fifth revokes the link (\`identification-locked\`; \`401\` from then on). An expired code costs nothing. A match records \`identified\` with its method, and the view then holds the documents.`,
        requestBody: { required: true, content: json('IdentifyInput') },
        responses: {
          200: response('The view, with the documents.', 'SigningView'),
          400: failure('No `code`, a code over 64 characters, an unknown field, a malformed body.'),
          401: failure('The fifth wrong code revoked the link (and any later use of it), or the token is not valid.'),
          403: failure('A wrong or expired code, or none outstanding; the message says how many tries are left.'),
          409: failure('The signer need not identify.'),
          410: failure('The signing link has expired.'),
          413: failure('The body is over 64 KiB.'),
          415: failure('A body that is not `application/json`.'),
        },
      },
      public: true,
      async handler({ req, baseUrl, client }) {
        const token = bearer(req);
        return { status: 200, body: await signing.identify(token, await readOptionalJson(req), baseUrl, client) };
      },
    },
    {
      method: 'POST',
      path: '/signing/sign',
      extension: true,
      doc: {
        operationId: 'sign',
        summary: "Sign as the token's signer",
        tags: ['Signing'],
        signer: true,
        description: `The signature is a data-URL checked as \`signerSignatureData\` at creation. With \`consent\` (the disclosure's version as the view gave it) the trail records \`consented\` and the disclosure's SHA-256 before \`signed\`. Sends \`agreement-signer-signed\`, and with the last signer \`agreement-signed\` (and, with a notifier, \`agreement-completed\` mail to every signer).`,
        requestBody: { required: true, content: json('SignInput') },
        responses: {
          200: response('The view after signing.', 'SigningView'),
          400: failure('The signature is missing or not an acceptable image; an unknown field; a malformed body.'),
          403: failure('The signer must identify first.'),
          409: failure(
            'The signer has signed or declined, the agreement is signed or closed, (sequential order) a signer before has not signed yet, or `consent.disclosureVersion` is not the disclosure in force.',
          ),
          410: failure('The signing link has expired.'),
          413: failure('The body is larger than the largest signature allows.'),
          415: failure('A body that is not `application/json`.'),
        },
      },
      public: true,
      async handler({ req, baseUrl, client }) {
        const token = bearer(req);
        return {
          status: 200,
          body: await signing.sign(token, await readOptionalJson(req, SIGN_BODY_LIMIT), baseUrl, client),
        };
      },
    },
    {
      method: 'POST',
      path: '/signing/decline',
      extension: true,
      doc: {
        operationId: 'decline',
        summary: "Decline as the token's signer",
        tags: ['Signing'],
        signer: true,
        description: `The agreement closes (\`closedReason: declined\`) and \`agreement-declined\` is sent.`,
        requestBody: { required: false, content: json('DeclineInput') },
        responses: {
          200: response('The view after declining.', 'SigningView'),
          400: failure(
            'A reason over 1,000 characters or with control characters; an unknown field; a malformed body.',
          ),
          403: failure('The signer must identify first.'),
          409: failure('The signer has signed or declined, or the agreement is signed or closed.'),
          410: failure('The signing link has expired.'),
          413: failure('The body is over 64 KiB.'),
          415: failure('A body that is not `application/json`.'),
        },
      },
      public: true,
      async handler({ req, baseUrl, client }) {
        const token = bearer(req);
        return { status: 200, body: await signing.decline(token, await readOptionalJson(req), baseUrl, client) };
      },
    },
  ];
}
