import dns from 'node:dns';
import type { LookupFunction } from 'node:net';
import { LRUCache } from 'lru-cache';
import { Pool, type Dispatcher } from 'undici';
import type { WebhookCallResult, WebhookTransport } from '../../src/ports.js';
import { errorMessage } from '../../src/errors.js';
import type { Logger } from '../../src/shared/logger.js';
import { refusalOf } from './address-guard.js';
import { createConnector, RefusedAddressError, refusedHostMessage, type RefusalReport } from './connector.js';
import { createPools } from './pools.js';

export { refusedHostMessage, type RefusalReport } from './connector.js';

export interface HttpTransportOptions {
  /** The longest one call may take, connect to last byte read (default 15000); `send` may ask for less. */
  timeoutMs?: number;
  /** Call loopback, private, link-local and other non-public addresses too (default `false`). */
  allowPrivateNetworks?: boolean;
  /**
   * An egress proxy (`http://host:port` or `https://host:port`, credentials in the URL if it wants
   * them): every call goes through a `CONNECT` tunnel it opens to the receiver. The guard checks
   * what the receiver's host resolves to before the tunnel is asked for; the proxy resolves it again.
   */
  proxy?: string;
  /**
   * Resolves host names (default `dns.lookup`). Every address it answers passes the guard before a
   * connection is made, so a custom resolver cannot open a way around it.
   */
  lookup?: LookupFunction;
  /**
   * Where a refused call's details go (default: nowhere): the host name, the addresses it resolved
   * to and why each was refused, logged at `warn`. These are the operator's to see; the attempt's
   * error, which the tenant reads in the delivery log, says only that the address is not allowed,
   * so the delivery log cannot be used to map the network the portal runs in.
   */
  logger?: Logger;
}

/** At most this much of a response body is read, then dropped: a receiver's answer is never kept. */
export const MAX_RESPONSE_BYTES = 64 * 1024;
/** The most a response head (or its trailers) may take. */
export const MAX_HEAD_BYTES = 16 * 1024;
/** Interim (1xx) answers read before the final one; past this the call fails. */
export const MAX_INTERIM_ANSWERS = 8;
/**
 * Idle keep-alive sockets are closed after this long: shorter than Node's own server default (5 s)
 * so the transport, not the receiver, closes an idle socket, and a call rarely meets a reset one.
 */
const IDLE_SOCKET_MS = 4000;

/**
 * Wraps `lookup` so that only addresses the guard allows come back. Node connects to what lookup
 * answers, so the address checked is the address connected to: a DNS answer that changes between a
 * check and the call (rebinding) cannot slip past. A refusal names the host only; what it resolved
 * to goes to `report`.
 */
export function guardedLookup(lookup: LookupFunction, report: RefusalReport = () => {}): LookupFunction {
  return (hostname, options, callback) => {
    lookup(hostname, { ...options, all: true }, (error, answer) => {
      if (error) return callback(error, '', 0);
      const addresses = Array.isArray(answer) ? answer : [{ address: answer, family: options.family === 6 ? 6 : 4 }];
      const allowed = addresses.filter((entry) => refusalOf(entry.address) === null);
      if (allowed.length === 0) {
        report({
          hostname,
          addresses: addresses.map((entry) => entry.address),
          reasons: addresses.length === 0 ? ['no address'] : addresses.map((entry) => refusalOf(entry.address)!),
        });
        return callback(new RefusedAddressError(refusedHostMessage(hostname)), '', 0);
      }
      if (options.all) return callback(null, allowed);
      callback(null, allowed[0]!.address, allowed[0]!.family);
    });
  };
}

/** Where a call goes: the pool's origin and the request's path. */
interface Target {
  origin: string;
  path: string;
}

/** The URL's origin and path, or why it may not be called. */
function checkUrl(target: string, allowPrivateNetworks: boolean): Target | string {
  if (!URL.canParse(target)) return 'refused: the webhook URL is not an absolute URL';
  // The WHATWG parser has already turned odd IPv4 spellings (127.1, 0x7f000001, 2130706433) into dotted quads.
  const url = new URL(target);
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return `refused: ${url.protocol} URLs are not called, only http and https`;
  if (url.username !== '' || url.password !== '') return 'refused: the webhook URL carries credentials';
  if (!allowPrivateNetworks) {
    const host = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
    // A literal address is never looked up, so the guard checks it here.
    if (/^[\d.]+$/.test(host) || host.includes(':')) {
      const refusal = refusalOf(host);
      if (refusal !== null) return refusal;
    }
  }
  return { origin: url.origin, path: url.pathname + url.search };
}

/**
 * Checked URLs, most recently called kept: a webhook's URL is called again and again, and parsing
 * it was a tenth of the transport's own CPU a call (the row `webhook transport: CPU a call`).
 */
const CHECKED_URLS = 1000;


/** A header name is an RFC 9110 token; a value holds no line break or NUL: nothing can be smuggled into the request. */
const HTTP_TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
const HEADER_VALUE = /^[^\r\n\0]*$/;
/** Headers undici writes itself, from the URL and the body (it refuses some of them from a caller). */
const OWN_HEADERS = new Set(['host', 'content-length', 'transfer-encoding', 'connection', 'keep-alive', 'upgrade', 'expect']);

/** The headers to send, or why the call's headers cannot be sent. */
function requestHeaders(headers: Record<string, string>): Record<string, string> | string {
  let own = false;
  for (const name in headers) {
    if (!HTTP_TOKEN.test(name) || !HEADER_VALUE.test(headers[name]!)) return `refused: the header ${JSON.stringify(name)} is not a valid HTTP header`;
    if (OWN_HEADERS.has(name.toLowerCase())) own = true;
  }
  if (!own) return headers;
  return Object.fromEntries(Object.entries(headers).filter(([name]) => !OWN_HEADERS.has(name.toLowerCase())));
}

/** What the tenant reads for an error undici reports: the bound or the fault, in words. */
function describe(error: Error & { code?: string }, timeoutMs: number): string {
  switch (error.code) {
    case 'UND_ERR_HEADERS_OVERFLOW':
      return `invalid response: its head or trailers are over ${MAX_HEAD_BYTES / 1024} KiB`;
    case 'UND_ERR_CONNECT_TIMEOUT':
      return `timed out after ${timeoutMs} ms`;
    case 'UND_ERR_RES_CONTENT_LENGTH_MISMATCH':
      // Also what undici reports for two different Content-Length headers.
      return 'invalid response: its body does not match its Content-Length';
    case 'UND_ERR_SOCKET':
      // undici refuses a 100 Continue the request did not ask for, and bytes that answer no request.
      if (error.message === 'bad response') return 'invalid response: an answer that does not fit the request (an unrequested 100 Continue)';
      if (error.message === 'other side closed' || error.message === 'closed') return 'the receiver closed the connection before answering';
      return error.message;
  }
  if (error.name === 'HTTPParserError') return `invalid response: ${error.message.replace(/^Response does not match the HTTP\/1\.1 protocol \((.*)\)$/, '$1')}`;
  return errorMessage(error);
}

/**
 * Webhook calls as HTTP/1.1 POSTs on undici's kept-alive pools, behind an SSRF guard: http and https
 * only, no credentials, no redirects followed (a 3xx is answered as it came), the resolved address
 * checked at connect time, the body read to 64 KiB and dropped, one deadline for the whole call.
 * `send` resolves for every outcome.
 *
 * Bounds a receiver cannot get around: a 16 KiB head (and trailers), at most 8 interim answers, and
 * `MAX_ANSWER_WIRE_BYTES` on the wire for the whole answer (chunk framing included). A call is sent
 * at most once: undici never resends a POST that reached a socket; a pooled socket found closed
 * before the request was written (undici checks an idle socket for a FIN or stray bytes before
 * reusing it) is replaced, which sends nothing twice. Connections are pooled per account and
 * origin, so no answer can reach another account's call.
 */
export function httpTransport(options: HttpTransportOptions = {}): WebhookTransport {
  const defaultTimeoutMs = options.timeoutMs ?? 15_000;
  const allowPrivateNetworks = options.allowPrivateNetworks ?? false;
  const baseLookup = options.lookup ?? (dns.lookup as LookupFunction);
  const report: RefusalReport = ({ hostname, addresses, reasons }) =>
    options.logger?.warn({ hostname, addresses, reasons }, 'webhook call refused: the host resolves only to addresses the guard refuses');
  const proxy = options.proxy === undefined ? undefined : proxyUrl(options.proxy);
  const connectorOptions = {
    lookup: allowPrivateNetworks ? baseLookup : guardedLookup(baseLookup, report),
    checkPeer: !allowPrivateNetworks,
    report,
    proxy,
    connectTimeoutMs: defaultTimeoutMs,
  };
  /** The connector (with its TLS session cache) and the pools; dropped whole by `close`. */
  let open: { connector: ReturnType<typeof createConnector>; pools: ReturnType<typeof createPools> } | undefined;
  const opened = () => {
    if (open !== undefined) return open;
    const connector = createConnector(connectorOptions);
    const poolOptions: Pool.Options = {
      connect: connector.connect,
      keepAliveTimeout: IDLE_SOCKET_MS,
      keepAliveMaxTimeout: IDLE_SOCKET_MS,
      maxHeaderSize: MAX_HEAD_BYTES,
      headersTimeout: defaultTimeoutMs,
      bodyTimeout: defaultTimeoutMs,
    };
    return (open = { connector, pools: createPools((origin) => new Pool(origin, poolOptions)) });
  };

  const checkedUrls = new LRUCache<string, Target | string>({ max: CHECKED_URLS });
  const check = (url: string) => {
    let checked = checkedUrls.get(url);
    if (checked === undefined) checkedUrls.set(url, (checked = checkUrl(url, allowPrivateNetworks)));
    return checked;
  };

  return {
    async send(call, { timeoutMs, signal }) {
      const checked = check(call.url);
      if (typeof checked === 'string') return { statusCode: null, headers: {}, error: checked };
      if (signal?.aborted) return { statusCode: null, headers: {}, error: 'aborted' };
      const headers = requestHeaders(call.headers);
      if (typeof headers === 'string') return { statusCode: null, headers: {}, error: headers };
      const limit = Math.min(timeoutMs, defaultTimeoutMs);
      const pool = opened().pools.get(call.accountId, checked.origin);
      return exchange(pool, { path: checked.path, headers, body: call.body }, limit, signal);
    },
    async close() {
      const closing = open;
      open = undefined;
      await closing?.pools.close();
      await closing?.connector.close();
    },
  };
}

/** The proxy option as a URL, refused at construction when it cannot be one. */
function proxyUrl(text: string): URL {
  const url = URL.canParse(text) ? new URL(text) : undefined;
  if (url === undefined || (url.protocol !== 'http:' && url.protocol !== 'https:')) {
    throw new TypeError('httpTransport: proxy must be an http:// or https:// URL');
  }
  return url;
}

interface Request {
  path: string;
  headers: Record<string, string>;
  body: string;
}

/** Sends one POST on `pool` and resolves what came of it, once, by the deadline at the latest. */
function exchange(pool: Dispatcher, request: Request, timeoutMs: number, signal: AbortSignal | undefined): Promise<WebhookCallResult> {
  return new Promise((resolve) => {
    let controller: Dispatcher.DispatchController | undefined;
    let statusCode: number | null = null;
    let answerHeaders: WebhookCallResult['headers'] = {};
    let interim = 0;
    let bodyBytes = 0;
    let settled = false;
    /** undici has finished with the request (answered whole, or failed): nothing left to abort. */
    let completed = false;

    const finish = (result: WebhookCallResult) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      resolve(result);
      // A call decided before its answer was whole leaves nothing on its connection: undici closes it.
      if (controller !== undefined && !completed) controller.abort(new Error('the call was decided'));
    };
    /** The status arrived: that decides the call, whatever happens to the rest of the body. */
    const answered = () => finish({ statusCode, headers: answerHeaders, error: null });
    const fail = (error: string) => (statusCode === null ? finish({ statusCode: null, headers: {}, error }) : answered());
    const refuse = (error: string) => finish({ statusCode: null, headers: {}, error });

    const timer = setTimeout(() => fail(`timed out after ${timeoutMs} ms`), timeoutMs);
    timer.unref();
    const onAbort = () => fail('aborted');
    signal?.addEventListener('abort', onAbort, { once: true });

    pool.dispatch(
      { path: request.path, method: 'POST', headers: request.headers, body: request.body },
      {
        onRequestStart(started) {
          controller = started;
          // Decided while it waited for a connection (deadline, abort): it is not sent at all.
          if (settled) started.abort(new Error('the call was decided'));
        },
        onResponseStart(started, status, headers) {
          if (status < 100 || status > 599) return refuse(`invalid response: ${status} is not an HTTP status code (100–599)`);
          if (status < 200) {
            if (++interim > MAX_INTERIM_ANSWERS) refuse(`invalid response: more than ${MAX_INTERIM_ANSWERS} interim (1xx) answers`);
            return;
          }
          statusCode = status;
          answerHeaders = headers;
        },
        onResponseData(started, chunk) {
          bodyBytes += chunk.length;
          if (bodyBytes > MAX_RESPONSE_BYTES) answered();
        },
        onResponseEnd() {
          completed = true;
          answered();
        },
        onResponseError(started, error) {
          completed = true;
          const message = describe(error, timeoutMs);
          // An answer that broke a bound or the protocol is no answer, whatever status it began with.
          if (message.startsWith('invalid response:')) finish({ statusCode: null, headers: {}, error: message });
          else fail(message);
        },
      },
    );
  });
}
