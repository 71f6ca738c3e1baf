import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import FindMyWay from 'find-my-way';
import type { HTTPMethod } from 'find-my-way';
import type { Authenticator } from './auth.js';
import { HttpError } from '../errors.js';
import type { Logger } from '../shared/logger.js';
import { type HeaderList, type Reply, contractHeaders, errorBody, writeJson } from './reply.js';

/** What a route gets: the request, its params and query, who is asking, and where the API lives. */
export interface RequestContext {
  req: IncomingMessage;
  res: ServerResponse;
  params: Record<string, string | undefined>;
  query: Record<string, string | string[] | undefined>;
  requestId: string;
  /** The authenticated account; `''` on a public route. */
  accountId: string;
  /** The absolute URL of the API root for this request (`publicUrl`, or derived from the request); worked out when read. */
  readonly baseUrl: string;
}

/**
 * A route answers with a `Reply` (`errorReply` for a refusal as common as a 404), throws an
 * `HttpError`, or answers nothing when it wrote `res` itself.
 */
export type RouteHandler = (context: RequestContext) => Promise<Reply | void> | Reply | void;

export interface Route {
  method: HTTPMethod | HTTPMethod[];
  /** find-my-way pattern, relative to the base path: `/webhooks/:webhookId`. */
  path: string;
  handler: RouteHandler;
  /** Served without `Authorization` (the signed download route checks its own signature). */
  public?: boolean;
  /**
   * The route writes to `res` itself (a stream, an early answer, a header of its own): the
   * contract's headers are set on `res` before it runs, so that whatever it writes carries them.
   * Every other route's answer goes out with all its headers in one `writeHead`.
   */
  writesResponse?: boolean;
}

interface RouteStore {
  route: Route;
  /** `METHOD /pattern`, for logs. */
  name: string;
}

export type NodeHandler = (req: IncomingMessage, res: ServerResponse, next?: (error?: unknown) => void) => void;

export interface HandlerOptions {
  basePath: string;
  routes: Route[];
  authenticate: Authenticator;
  logger: Logger;
  logRequests: boolean;
  publicUrl: string | undefined;
  trustProxy: boolean;
}

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,200}$/;
const HOST = /^[A-Za-z0-9.\-:[\]]{1,255}$/;
const ALLOW_CANDIDATES: HTTPMethod[] = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE'];
const INTERNAL_ERROR = errorBody('Internal error');
/**
 * find-my-way answers a path it cannot decode, or a too-long segment, with a handle whose store is
 * null; the dispatcher sets the contract's headers on `res` before calling it.
 */
const BAD_URL = errorBody('The request path is not valid percent-encoding.');
const LONG_PARAM = errorBody('A path segment is too long.');
const badUrl = (_path: string, _req: IncomingMessage, res: ServerResponse) => writeJson(res, 400, BAD_URL, []);
const longParam = (_path: string, _req: IncomingMessage, res: ServerResponse) => writeJson(res, 400, LONG_PARAM, []);

/**
 * Builds the `(req, res, next?)` handler: base-path check, routing, request id, auth, one error
 * renderer. Everything that can be decided at build time is; the request path only looks things up.
 */
export function createHandler(options: HandlerOptions): NodeHandler {
  const { basePath, authenticate, logger } = options;
  const router = FindMyWay({
    ignoreTrailingSlash: true,
    caseSensitive: true,
    maxParamLength: 500,
    onBadUrl: badUrl,
    onMaxParamLength: longParam,
  });
  for (const route of options.routes) {
    const methods = Array.isArray(route.method) ? route.method : [route.method];
    for (const method of methods) {
      const store: RouteStore = { route, name: `${method} ${route.path}` };
      router.on(method, route.path, route.handler as never, store);
    }
  }

  function allowedMethods(path: string): string[] {
    return ALLOW_CANDIDATES.filter((method) => {
      const found = router.find(method, path);
      return found !== null && found.store !== null;
    });
  }

  function baseUrlOf(req: IncomingMessage): string {
    if (options.publicUrl !== undefined) return options.publicUrl;
    let proto = (req.socket as { encrypted?: boolean }).encrypted ? 'https' : 'http';
    let host = req.headers.host;
    if (options.trustProxy) {
      const forwardedProto = firstForwarded(req.headers['x-forwarded-proto']);
      const forwardedHost = firstForwarded(req.headers['x-forwarded-host']);
      if (forwardedProto === 'http' || forwardedProto === 'https') proto = forwardedProto;
      if (forwardedHost !== undefined) host = forwardedHost;
    }
    if (host === undefined || !HOST.test(host)) host = 'localhost';
    return `${proto}://${host}${basePath}`;
  }

  /**
   * A request in flight: what its route sees, and whether the contract's headers are on `res` yet.
   * A class, so that every request's context has one shape and nothing is made for `baseUrl`
   * until a route reads it (hot path).
   */
  class Exchange implements RequestContext {
    params: Record<string, string | undefined>;
    query: Record<string, string | string[] | undefined>;
    accountId = '';
    headersSet = false;

    constructor(
      readonly req: IncomingMessage,
      readonly res: ServerResponse,
      readonly requestId: string,
      found: ReturnType<typeof router.find>,
    ) {
      this.params = found?.params ?? {};
      this.query = (found?.searchParams as RequestContext['query']) ?? {};
    }

    get baseUrl(): string {
      return baseUrlOf(this.req);
    }
  }

  /** The start of an answer's header list: the contract's headers, unless they are on `res` already. */
  const head = (context: Exchange): HeaderList => (context.headersSet ? [] : contractHeaders(context.requestId));

  function fail(context: Exchange, error: unknown): void {
    const { res } = context;
    if (res.headersSent) {
      // A stream broke after the status line went out: all that is left is to cut the connection.
      logger.error({ requestId: context.requestId, err: describe(error) }, 'response failed after headers were sent');
      res.destroy();
      return;
    }
    if (error instanceof HttpError) {
      // A 503 is the backend's fault, not the caller's: the operator wants to see what happened.
      if (error.status >= 500) logger.warn({ requestId: context.requestId, err: describe(error.cause ?? error) }, error.message);
      writeJson(res, error.status, error.body, head(context), error.headers);
      return;
    }
    logger.error({ requestId: context.requestId, err: describe(error) }, 'unexpected error');
    writeJson(res, 500, INTERNAL_ERROR, head(context));
  }

  async function run(context: Exchange, store: RouteStore): Promise<void> {
    try {
      if (store.route.public !== true) {
        let account = authenticate(context.req.headers.authorization);
        if (typeof account !== 'string' && !(account instanceof HttpError)) account = await account;
        if (account instanceof HttpError) return fail(context, account);
        context.accountId = account;
      }
      const reply = await store.route.handler(context);
      if (reply === undefined) return;
      const { status, body, json } = reply;
      const payload = status === 204 ? undefined : json ?? (body === undefined ? undefined : JSON.stringify(body));
      writeJson(context.res, status, payload, head(context), reply.headers);
    } catch (error) {
      fail(context, error);
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
    if (!inside && next !== undefined) return next();
    const header = req.headers['x-request-id'];
    const requestId = typeof header === 'string' && REQUEST_ID.test(header) ? header : randomUUID();

    const started = options.logRequests ? performance.now() : 0;
    const method = req.method ?? 'GET';
    const path = url.slice(basePath.length) || '/';
    const found = inside ? router.find(method as HTTPMethod, path) : null;
    const context = new Exchange(req, res, requestId, found);
    let routeName = 'unmatched';

    if (found === null) {
      const allow = inside ? allowedMethods(path) : [];
      if (allow.length > 0) {
        writeJson(res, 405, errorBody(`Method ${method} is not allowed here; allowed: ${allow.join(', ')}.`), head(context), {
          Allow: allow.join(', '),
        });
      } else {
        writeJson(res, 404, errorBody(`No route matches ${method} ${truncate(url.split('?')[0]!)}.`), head(context));
      }
    } else if (found.store === null) {
      setContractHeaders(context);
      found.handler(req, res, {}, undefined, {});
    } else {
      const store = found.store as RouteStore;
      routeName = store.name;
      if (store.route.writesResponse === true) setContractHeaders(context);
      const pending = run(context, store);
      if (options.logRequests) pending.then(() => logRequest());
      return;
    }
    if (options.logRequests) logRequest();

    function logRequest() {
      const finish = () =>
        logger.info(
          {
            requestId,
            method,
            route: routeName,
            status: res.statusCode,
            durationMs: Math.round((performance.now() - started) * 10) / 10,
            accountId: context.accountId || undefined,
          },
          'request',
        );
      if (res.writableFinished) finish();
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

function firstForwarded(value: string | string[] | undefined): string | undefined {
  const first = (Array.isArray(value) ? value[0] : value)?.split(',')[0]?.trim();
  return first === '' ? undefined : first;
}

function truncate(text: string): string {
  return text.length > 200 ? text.slice(0, 200) + '…' : text;
}

/** An error as a log field: name, message and stack, never the request. */
export function describe(error: unknown): { name: string; message: string; stack?: string } {
  if (error instanceof Error) return { name: error.name, message: error.message, stack: error.stack };
  return { name: 'NonError', message: String(error) };
}
