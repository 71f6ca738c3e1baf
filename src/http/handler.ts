import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import FindMyWay from 'find-my-way';
import type { HTTPMethod } from 'find-my-way';
import { PortalError, describeError } from '../errors.js';
import type { Logger } from '../shared/logger.js';
import { answerEarly } from './answer-early.js';
import { type Authenticator, Refused, bearerToken } from './auth.js';
import type { PortalSessionScope } from '../records.js';
import { type SessionGrant, isSessionToken } from '../domain/portal-sessions.js';
import { Exchange, type Origin, type RequestContext } from './context.js';
import { type Reply, contractHeaders, writeJson } from './reply.js';
import { renderError } from './render-error.js';
import type { Page } from './page.js';
import { noTelemetry, type Telemetry } from '../shared/telemetry.js';
import { type Operation, queryNames } from './route-doc.js';

/** A route answers with a `Reply`, throws a `PortalError`, or answers nothing when it wrote `res` itself. */
type RouteHandler = (context: RequestContext) => Promise<Reply | void> | Reply | void;

/**
 * What a route belongs to: a portal session reaches a route only when its scopes include the area
 * (`webhooks`, `agreements`, `files`); `tickets`, `downloads` and `sessions` it never reaches;
 * `account` (the account's branding) every session may read.
 */
export type RouteArea = PortalSessionScope | 'tickets' | 'downloads' | 'sessions' | 'account';

export interface Route {
  method: HTTPMethod | HTTPMethod[];
  /** Its area, for portal sessions' scopes; set by the route table. */
  area?: RouteArea;
  /** find-my-way pattern, relative to the base path: `/webhooks/:webhookId`. */
  path: string;
  handler: RouteHandler;
  /**
   * Its operation in the OpenAPI document, which is built from the route table. The query
   * parameters it lists are the only ones the route takes: any other is refused with 400. `null`
   * for a page of the portal (HTML for a browser), which is not part of the API.
   */
  doc: Operation | null;
  /** The HEAD's operation, where it is not the GET's without bodies. */
  headDoc?: Operation;
  /**
   * Beyond the Customer Portal API spec: marked in the document, and not served with
   * `extensions: false`, unless `'served-always'` (a link the portal handed out keeps working).
   */
  extension?: true | 'served-always';
  /** Served without `Authorization` (the signed download route checks its own signature). */
  public?: boolean;
  /**
   * The route writes to `res` itself (a stream, a header of its own): the contract's headers are
   * set on `res` before it runs, so that whatever it writes carries them. Every other route's
   * answer goes out with all its headers in one `writeHead`.
   */
  writesResponse?: boolean;
  /**
   * The route streams a large request body: an error while the body still arrives is answered at
   * once, with `Connection: close` (see `answerEarly`), instead of after the body. Such an answer
   * is written on `res` directly, so the contract's headers are set on it first, as for `writesResponse`.
   */
  streamsBody?: boolean;
}

/** A route as served: the query parameters it takes read from its operation once, at build time. */
interface ServedRoute extends Route {
  query: readonly string[];
}

interface RouteStore {
  route: ServedRoute;
  /** `METHOD /pattern`, for logs. */
  name: string;
  /** The pattern under the base path (`/v1/webhooks/:webhookId`): telemetry's `http.route`. */
  template: string;
}

export type NodeHandler = (req: IncomingMessage, res: ServerResponse, next?: (error?: unknown) => void) => void;

export interface HandlerOptions extends Origin {
  routes: Route[];
  authenticate: Authenticator;
  logger: Logger;
  logRequests: boolean;
  /** The customer portal page (the `ui` option), served at its own path outside `basePath`. */
  page?: Page;
  /** Spans and durations of requests (`noTelemetry` without `@opentelemetry/api`). */
  telemetry?: Telemetry;
  /** What a portal session's token may do (`null`: no live session has it); without it, no session is accepted. */
  sessions?: (token: string) => Promise<SessionGrant | null>;
}

/** Whether an `Authorization` header may carry a session token (`Bearer pts_…`): a prefix test first (hot path). */
const mayCarrySession = (header: string | undefined): header is string =>
  header !== undefined && header.startsWith('pts_', 7) && isSessionToken(header.slice(7).trim());

/** Methods that change nothing: all a read-only session may send. */
const READS = new Set(['GET', 'HEAD']);

/** Why `grant` may not reach `route` with `method`, or `null` when it may. */
function sessionRefusal(grant: SessionGrant, route: Route, method: string): PortalError | null {
  const area = route.area ?? 'sessions';
  // The account's own look (its branding) is every session's to read.
  if (area !== 'account' && !(grant.scopes as readonly string[]).includes(area))
    return new PortalError('PORTAL_SESSION_SCOPE', area, grant.scopes);
  if (grant.readOnly && !READS.has(method)) return new PortalError('PORTAL_SESSION_READ_ONLY', method);
  return null;
}

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,200}$/;
const ALLOW_CANDIDATES: HTTPMethod[] = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE'];

/**
 * Builds the `(req, res, next?)` handler: base-path check, routing, request id, auth, and every
 * error through `renderError`. Everything that can be decided at build time is; the request path
 * only looks things up.
 */
export function createHandler(options: HandlerOptions): NodeHandler {
  const { basePath, authenticate, logger, page, sessions } = options;
  const telemetry = options.telemetry ?? noTelemetry;
  const origin: Origin = { basePath, publicUrl: options.publicUrl, trustProxy: options.trustProxy };
  // find-my-way answers a path it cannot decode, or a too-long segment, with a handle whose store
  // is null; the dispatcher sets the contract's headers on `res` before calling it.
  const answerWith = (error: PortalError) => (_path: string, _req: IncomingMessage, res: ServerResponse) =>
    writeJson(res, error.status, renderError(error, logger, '').body, null);
  const router = FindMyWay({
    ignoreTrailingSlash: true,
    caseSensitive: true,
    maxParamLength: 500,
    onBadUrl: answerWith(new PortalError('PATH_NOT_DECODABLE')),
    onMaxParamLength: answerWith(new PortalError('PATH_SEGMENT_TOO_LONG')),
  });
  for (const declared of options.routes) {
    const route: ServedRoute = { ...declared, query: queryNames(declared.doc) };
    const methods = Array.isArray(route.method) ? route.method : [route.method];
    for (const method of methods) {
      const store: RouteStore = { route, name: `${method} ${route.path}`, template: basePath + route.path };
      router.on(method, route.path, route.handler as never, store);
    }
  }

  function allowedMethods(path: string): string[] {
    return ALLOW_CANDIDATES.filter((method) => {
      const found = router.find(method, path);
      return found !== null && found.store !== null;
    });
  }

  /** The request id for an answer's contract headers; `null` when they are on `res` already. */
  const head = (context: Exchange): string | null => (context.headersSet ? null : context.requestId);

  function fail(context: Exchange, error: unknown, route?: ServedRoute): void {
    const { req, res, requestId } = context;
    if (res.headersSent) {
      // A stream broke after the status line went out: all that is left is to cut the connection.
      logger.error({ requestId, err: describeError(error) }, 'response failed after headers were sent');
      res.destroy();
      return;
    }
    if (route?.streamsBody === true && !req.complete) {
      // The client went away: there is no one to answer.
      if (req.destroyed) return;
      return answerEarly(req, res, renderError(error, logger, requestId));
    }
    const rendered = renderError(error, logger, requestId);
    writeJson(res, rendered.status, rendered.body, head(context), rendered.headers);
  }

  /**
   * Authenticates, runs the route and writes its answer. Not an async function: a route that answers
   * at once (a refusal before any await, every 401) is written without a promise, and an async
   * route's promise is followed by one `then` instead of an awaiting frame and a promise of its own.
   * Hot path: with `Refused` (auth.ts), a 401 and a 404 each cost fewer instructions (`npm run
   * bench:instructions`, 401 and 404; the figures in docs/performance.md, "Figures behind the code": refusals returned, not thrown).
   */
  function run(context: Exchange, route: ServedRoute): Promise<void> | undefined {
    if (route.public === true) return answer(context, route);
    const header = context.req.headers.authorization;
    if (sessions !== undefined && mayCarrySession(header)) return runAsSession(context, route, header);
    return runWithKey(context, route, header);
  }

  /** Authenticates `header` as an API key (or by the auth function), then answers. */
  function runWithKey(context: Exchange, route: ServedRoute, header: string | undefined): Promise<void> | undefined {
    let account: ReturnType<Authenticator>;
    try {
      account = authenticate(header);
    } catch (error) {
      fail(context, error, route);
      return undefined;
    }
    if (typeof account !== 'string') {
      if (account instanceof Refused) {
        // A route still receiving a large body answers at once (`fail` → `answerEarly`).
        if (route.streamsBody === true) fail(context, account.error, route);
        else send(context, route, account.reply);
        return undefined;
      }
      return account.then(
        (accountId) => {
          context.accountId = accountId;
          return answer(context, route);
        },
        (error: unknown) => fail(context, error, route),
      );
    }
    context.accountId = account;
    return answer(context, route);
  }

  /**
   * A request whose token has a session token's form: a live session's grant, checked against the
   * route's area and method; else the token goes to the API keys (a key may have that form too),
   * which refuse it with 401 when it is none.
   */
  function runAsSession(context: Exchange, route: ServedRoute, header: string): Promise<void> {
    return sessions!(bearerToken(header) as string).then(
      (grant) => {
        if (grant === null) return runWithKey(context, route, header);
        const refused = sessionRefusal(grant, route, context.req.method ?? 'GET');
        if (refused !== null) return fail(context, refused, route);
        context.accountId = grant.accountId;
        return answer(context, route);
      },
      (error: unknown) => fail(context, error, route),
    );
  }

  function answer(context: Exchange, route: ServedRoute): Promise<void> | undefined {
    let reply: ReturnType<RouteHandler>;
    try {
      // A misspelt parameter (`?dir=` for `?directoryId=`) would otherwise be ignored: wrong data, no error.
      for (const name in context.query) {
        if (!route.query.includes(name)) throw new PortalError('QUERY_UNKNOWN', name, route.query);
      }
      reply = route.handler(context);
    } catch (error) {
      fail(context, error, route);
      return undefined;
    }
    if (reply instanceof Promise)
      return reply.then(
        (settled) => send(context, route, settled),
        (error: unknown) => fail(context, error, route),
      );
    send(context, route, reply);
    return undefined;
  }

  /** Writes a route's `Reply`; a route that wrote `res` itself answers `undefined`. */
  function send(context: Exchange, route: ServedRoute, reply: Reply | void): void {
    if (reply === undefined) return;
    try {
      const { status, body, json } = reply;
      const payload = status === 204 ? undefined : (json ?? (body === undefined ? undefined : JSON.stringify(body)));
      writeJson(context.res, status, payload, head(context), reply.headers);
    } catch (error) {
      fail(context, error, route);
    }
  }

  /** For a route that writes `res` itself, and for find-my-way's own answers. */
  function setContractHeaders(context: Exchange): void {
    const list = contractHeaders(context.requestId);
    for (let i = 0; i < list.length; i += 2) context.res.setHeader(list[i] as string, list[i + 1]!);
    context.headersSet = true;
  }

  return function handler(req, res, next) {
    const url = req.url ?? '/';
    const inside = isUnder(url, basePath);
    const forPage = !inside && page !== undefined && page.owns(url);
    if (!inside && !forPage && next !== undefined) return next();
    const header = req.headers['x-request-id'];
    const requestId = typeof header === 'string' && REQUEST_ID.test(header) ? header : randomUUID();

    const started = options.logRequests ? performance.now() : 0;
    const method = req.method ?? 'GET';
    const path = url.slice(basePath.length) || '/';
    const found = inside ? router.find(method as HTTPMethod, path) : null;
    const context = new Exchange(
      req,
      res,
      requestId,
      found?.params ?? {},
      (found?.searchParams as RequestContext['query']) ?? {},
      origin,
    );
    let routeName = 'unmatched';

    // The span is the parent of whatever the request does, and ends with its answer (or its client gone).
    const observed = telemetry.enabled
      ? telemetry.request(req, found?.store ? (found.store as RouteStore).template : forPage ? `${page!.path}/*` : null)
      : null;
    if (observed === null) return dispatch();
    res.once('close', () => observed.end(res.writableFinished ? res.statusCode : null));
    return observed.within(dispatch);

    function dispatch(): void {
      if (forPage) {
        routeName = 'page';
        try {
          page!.serve(req, res, requestId);
        } catch (error) {
          fail(context, error);
        }
      } else if (found === null) {
        const allow = inside ? allowedMethods(path) : [];
        fail(
          context,
          allow.length > 0
            ? new PortalError('METHOD_NOT_ALLOWED', method, allow)
            : new PortalError('ROUTE_NOT_FOUND', method, truncate(url.split('?')[0]!)),
        );
      } else if (found.store === null) {
        setContractHeaders(context);
        found.handler(req, res, {}, undefined, {});
      } else {
        const store = found.store as RouteStore;
        routeName = store.name;
        if (store.route.writesResponse === true || store.route.streamsBody === true) setContractHeaders(context);
        const pending = run(context, store.route);
        if (options.logRequests) {
          if (pending === undefined) logRequest();
          else pending.then(logRequest);
        }
        return;
      }
      if (options.logRequests) logRequest();
    }

    /** One line a request, once its answer is out or its client gone (a cut upload, a download left unread). */
    function logRequest() {
      const finish = () => {
        const line = {
          requestId,
          method,
          route: routeName,
          durationMs: Math.round((performance.now() - started) * 10) / 10,
          accountId: context.accountId || undefined,
        };
        if (res.writableFinished) logger.info({ ...line, status: res.statusCode }, 'request');
        // Nothing was stored from a body that did not arrive whole; the line says whether it did.
        else logger.warn({ ...line, bodyComplete: req.complete }, 'request aborted by the client');
      };
      if (res.writableFinished || res.destroyed) finish();
      else res.once('close', finish);
    }
  };
}

/** Whether `url` is `basePath` itself or below it (`/v1`, `/v1/…`, `/v1?…`; not `/v10`). */
function isUnder(url: string, basePath: string): boolean {
  if (!url.startsWith(basePath)) return false;
  const next = url.charCodeAt(basePath.length);
  return Number.isNaN(next) || next === 47 /* / */ || next === 63 /* ? */;
}

function truncate(text: string): string {
  return text.length > 200 ? text.slice(0, 200) + '…' : text;
}
