import type { IncomingMessage, ServerResponse } from 'node:http';

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
  /** The client's address (`X-Forwarded-For`'s first with `trustProxy`) and user agent, as an audit trail records them. */
  readonly client: { ip: string | null; userAgent: string | null };
}

/** Where the API is served, for absolute URLs (`Location`, links). */
export interface Origin {
  basePath: string;
  publicUrl: string | undefined;
  trustProxy: boolean;
}

const HOST = /^[A-Za-z0-9.\-:[\]]{1,255}$/;

/**
 * A request in flight: what its route sees, and whether the contract's headers are on `res` yet.
 * A class, so that every request's context has one shape and nothing is made for `baseUrl` until a
 * route reads it (hot path).
 */
export class Exchange implements RequestContext {
  accountId = '';
  headersSet = false;

  constructor(
    readonly req: IncomingMessage,
    readonly res: ServerResponse,
    readonly requestId: string,
    public params: Record<string, string | undefined>,
    public query: Record<string, string | string[] | undefined>,
    private readonly origin: Origin,
  ) {}

  get baseUrl(): string {
    return baseUrlOf(this.req, this.origin);
  }

  get client(): { ip: string | null; userAgent: string | null } {
    // The address the proxy in front saw is the one it appended, last: what comes before it is
    // whatever the client sent, and a client can write anything there.
    const forwarded = this.origin.trustProxy ? lastForwarded(this.req.headers['x-forwarded-for']) : undefined;
    const agent = this.req.headers['user-agent'];
    return {
      ip: (forwarded ?? this.req.socket.remoteAddress ?? null)?.slice(0, 64) ?? null,
      // Kept as sent, cut to what any real browser sends: a trail entry is not a place for 8 KiB.
      userAgent: agent === undefined || agent === '' ? null : agent.slice(0, 512),
    };
  }
}

/** `publicUrl`, or `<scheme>://<Host><basePath>` of the request (forwarded headers only with `trustProxy`). */
function baseUrlOf(req: IncomingMessage, origin: Origin): string {
  if (origin.publicUrl !== undefined) return origin.publicUrl;
  let proto = (req.socket as { encrypted?: boolean }).encrypted ? 'https' : 'http';
  let host = req.headers.host;
  if (origin.trustProxy) {
    const forwardedProto = firstForwarded(req.headers['x-forwarded-proto']);
    const forwardedHost = firstForwarded(req.headers['x-forwarded-host']);
    if (forwardedProto === 'http' || forwardedProto === 'https') proto = forwardedProto;
    if (forwardedHost !== undefined) host = forwardedHost;
  }
  if (host === undefined || !HOST.test(host)) host = 'localhost';
  return `${proto}://${host}${mountPath(req)}${origin.basePath}`;
}

const MOUNT_PATH = /^(?:\/[A-Za-z0-9._~!$&'()*+,;=:@%-]+)+$/;

/**
 * Where a connect-style host mounted the handler: Express's `app.use('/api', handler)` strips `/api`
 * from `req.url` and keeps it in `req.baseUrl`; connect keeps the whole path in `req.originalUrl`.
 * `''` when the handler was not mounted under a prefix (or the prefix is not a plain path).
 */
function mountPath(req: IncomingMessage): string {
  const { baseUrl, originalUrl } = req as { baseUrl?: unknown; originalUrl?: unknown };
  let mount = '';
  if (typeof baseUrl === 'string') mount = baseUrl;
  else if (typeof originalUrl === 'string' && req.url !== undefined && originalUrl.endsWith(req.url)) {
    mount = originalUrl.slice(0, originalUrl.length - req.url.length);
  }
  return MOUNT_PATH.test(mount) ? mount : '';
}

function lastForwarded(value: string | string[] | undefined): string | undefined {
  const last = (Array.isArray(value) ? value.at(-1) : value)?.split(',').at(-1)?.trim();
  return last === '' ? undefined : last;
}

function firstForwarded(value: string | string[] | undefined): string | undefined {
  const first = (Array.isArray(value) ? value[0] : value)?.split(',')[0]?.trim();
  return first === '' ? undefined : first;
}
