import type { PortalSessionService } from '../../domain/portal-sessions.js';
import type { Route } from '../handler.js';
import { readOptionalJson } from '../json-body.js';
import { failure, json, pathParameter, response } from '../route-doc.js';

/**
 * Beyond the spec: portal sessions, which a host's backend asks for with the API key to hand one of
 * its customers the portal page (`pageUrl` of a request: the page's address, or `null` without one).
 * A session's own token cannot reach these routes (the handler refuses the `sessions` area).
 */
export function portalSessionRoutes(
  sessions: PortalSessionService,
  pageUrl: (baseUrl: string) => string | null,
): Route[] {
  return [
    {
      method: 'POST',
      path: '/portal-sessions',
      extension: true,
      doc: {
        operationId: 'createPortalSession',
        summary: 'Make a portal session',
        tags: ['Portal sessions'],
        description:
          "A link that opens the portal page for this account without the API key, and the token it carries: a Bearer credential for the API as this account within `scopes` (default all three; `403` outside them, and for any change when `readOnly`), until `expiresAt` (`ttlSeconds`: 60 to 86,400, an hour by default) or `DELETE /portal-sessions/{id}`; then `401`. A session's token cannot make or revoke sessions. Only a hash of the token is kept: the answer is the one place it is shown. An account holds at most 1,000 live sessions (neither expired nor revoked).",
        requestBody: { required: false, content: json('PortalSessionInput') },
        responses: {
          201: response('The session.', 'PortalSession'),
          400: failure('A field is not valid (named in the message).'),
          409: failure(
            'The account holds 1,000 live sessions already, the most it may have: revoke some or wait for them to expire. Nothing was stored.',
          ),
        },
      },
      async handler(context) {
        const body = await readOptionalJson(context.req);
        const made = await sessions.create(context.accountId, body, pageUrl(context.baseUrl));
        return { status: 201, body: made };
      },
    },
    {
      method: 'DELETE',
      path: '/portal-sessions/:sessionId',
      extension: true,
      doc: {
        operationId: 'revokePortalSession',
        summary: 'Revoke a portal session',
        tags: ['Portal sessions'],
        parameters: [pathParameter('sessionId', 'The session id (`pts_…`).')],
        description: 'Every later request with its token is refused with `401`. Revoking twice is a `204` too.',
        responses: {
          204: response('Revoked; no body.'),
          404: failure('No such session in this account.'),
        },
      },
      async handler({ accountId, params }) {
        await sessions.revoke(accountId, params.sessionId!);
        return { status: 204 };
      },
    },
  ];
}
