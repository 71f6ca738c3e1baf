import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type * as v from 'valibot';
import { PortalError } from '../errors.js';
import type { Storage } from '../ports.js';
import type { PortalSessionRecord, PortalSessionScope } from '../records.js';
import type * as answers from '../shapes/answers.js';
import { atom } from '../shared/time.js';
import { PORTAL_SESSION_SECONDS, checkAccountId, parseInput, portalSessionInput } from './inputs.js';

/**
 * Live sessions (unrevoked, unexpired) one account may hold. Each is a record kept until it expires,
 * up to a day, in memory on the memory and fs stores: without a bound, an API key could fill them.
 */
const MAX_LIVE_SESSIONS_PER_ACCOUNT = 1_000;

/** Every scope, in the order the API names them: a session made without `scopes` has them all. */
const PORTAL_SESSION_SCOPES: readonly PortalSessionScope[] = ['webhooks', 'agreements', 'files'];

/**
 * A session token: its id (`pts_` and 22 base64url characters, 128 random bits) and, after a dot,
 * its secret (43 base64url characters, 256 random bits). The id finds the record; only the secret's
 * SHA-256 is kept, compared in constant time.
 */
const SESSION_TOKEN = /^(pts_[A-Za-z0-9_-]{22})\.([A-Za-z0-9_-]{43})$/;
const SESSION_ID = /^pts_[A-Za-z0-9_-]{22}$/;

/** Whether a bearer token has a session token's form (an API key may have it too: it is tried next). */
export const isSessionToken = (token: string): boolean => SESSION_TOKEN.test(token);

const sha256 = (text: string) => createHash('sha256').update(text).digest();

/** What `POST /portal-sessions` takes: a lifetime (60 to 86,400 s; an hour), scopes (all three), `readOnly` (false). */
export interface PortalSessionOptions {
  ttlSeconds?: number;
  scopes?: PortalSessionScope[];
  readOnly?: boolean;
}

/** What a request made with a live session's token may do. */
export interface SessionGrant {
  accountId: string;
  scopes: readonly PortalSessionScope[];
  readOnly: boolean;
}

/** `POST /portal-sessions`'s answer: the link that opens the portal page, and the token it carries. */
export interface PortalSessionLink extends v.InferOutput<typeof answers.portalSession> {}

/**
 * Portal sessions: short-lived, scoped, revocable credentials a host's backend asks for, to hand one
 * of its customers the portal page for their account without the account's API key.
 */
export function createPortalSessionService(deps: { storage: Storage; clock: () => Date }) {
  const { storage, clock } = deps;
  return {
    /**
     * A new session for `accountId` (`input`: `ttlSeconds`, 60 to 86,400, an hour by default;
     * `scopes`, all three by default; `readOnly`). `pageUrl` is the portal page's address, or
     * `null` when there is none: the link is `<pageUrl>#session=<token>&scopes=<scopes>`, and
     * `&readOnly=1` after it for a read-only session.
     * Refused (`PORTAL_SESSION_LIMIT`, nothing stored) while the account holds 1,000 live sessions.
     */
    async create(accountId: string, input: unknown, pageUrl: string | null): Promise<PortalSessionLink> {
      checkAccountId(accountId);
      const {
        ttlSeconds = PORTAL_SESSION_SECONDS.default,
        scopes = [...PORTAL_SESSION_SCOPES],
        readOnly = false,
      } = parseInput(portalSessionInput, input === undefined ? {} : input, 'the portal session');
      const now = clock();
      const id = `pts_${randomBytes(16).toString('base64url')}`;
      const secret = randomBytes(32).toString('base64url');
      const session: PortalSessionRecord = {
        id,
        accountId,
        secretHash: sha256(secret).toString('hex'),
        // In the API's order, whatever the order asked.
        scopes: PORTAL_SESSION_SCOPES.filter((scope) => scopes.includes(scope)),
        readOnly,
        createdAt: atom(now),
        expiresAt: atom(new Date(now.getTime() + ttlSeconds * 1000)),
        revokedAt: null,
      };
      if (!(await storage.insertPortalSession(session, { maxLive: MAX_LIVE_SESSIONS_PER_ACCOUNT })))
        throw new PortalError('PORTAL_SESSION_LIMIT', MAX_LIVE_SESSIONS_PER_ACCOUNT);
      const token = `${id}.${secret}`;
      // The scopes and readOnly ride in the fragment too, for the page to show only those sections
      // and, read-only, no control that changes anything (the API refuses those requests anyway).
      const fragment = `session=${token}&scopes=${session.scopes.join(',')}${readOnly ? '&readOnly=1' : ''}`;
      const url = pageUrl === null ? null : `${pageUrl}#${fragment}`;
      return { id, url, token, expiresAt: session.expiresAt };
    },

    /** Revokes the account's session: every later request with its token is refused. 404 when absent. */
    async revoke(accountId: string, sessionId: string): Promise<void> {
      checkAccountId(accountId);
      if (!SESSION_ID.test(sessionId)) throw new PortalError('PORTAL_SESSION_NOT_FOUND', sessionId);
      const revoked = await storage.revokePortalSession(accountId, sessionId, atom(clock()));
      if (revoked === null) throw new PortalError('PORTAL_SESSION_NOT_FOUND', sessionId);
    },

    /** What `token` may do: `null` unless it is a session's token, unrevoked and unexpired. */
    async verify(token: string): Promise<SessionGrant | null> {
      const parts = SESSION_TOKEN.exec(token);
      if (parts === null) return null;
      const session = await storage.getPortalSession(parts[1]!);
      if (session === null) return null;
      const stored = Buffer.from(session.secretHash, 'hex');
      const presented = sha256(parts[2]!);
      if (stored.length !== presented.length || !timingSafeEqual(stored, presented)) return null;
      if (session.revokedAt !== null || session.expiresAt <= atom(clock())) return null;
      return {
        accountId: session.accountId,
        scopes: session.scopes,
        readOnly: session.readOnly,
      };
    },
  };
}

export type PortalSessionService = ReturnType<typeof createPortalSessionService>;
