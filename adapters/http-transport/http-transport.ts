import dns from 'node:dns';
import type { LookupFunction } from 'node:net';
import { LRUCache } from 'lru-cache';
import type { Pool } from 'undici';
import type { WebhookTransport } from '../../src/ports.js';
import type { Logger } from '../../src/shared/logger.js';
import { RefusedAddressError, refusalOf, refusedHostMessage, type RefusalReport } from './address-guard.js';
import { CallHandler, MAX_HEAD_BYTES } from './call-handler.js';

export { MAX_RESPONSE_BYTES } from './call-handler.js';
import type { createConnector } from './connector.js';
import { createPools } from './pools.js';

export type { RefusalReport } from './address-guard.js';

export interface HttpTransportOptions {
  /** The longest one call may take, connect to last byte read (default 15000); `send` may ask for less. */
  timeoutMs?: number;
  /** Call loopback, private, link-local and other non-public addresses too (default `false`). */
  allowPrivateNetworks?: boolean;
  /**
   * An egress proxy (`http://host:port` or `https://host:port`, credentials in the URL if it wants
   * them): every call goes through a `CONNECT` tunnel it opens to the receiver. With the guard on,
   * the tunnel is asked for the address the guard passed (`CONNECT 93.184.215.14:443`), so the proxy
   * never resolves the name to another; TLS and `Host` still name the receiver. With
   * `allowPrivateNetworks`, `CONNECT` names the host and the proxy resolves it.
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

/**
 * Idle keep-alive sockets are closed after this long when the receiver does not say how long it
 * keeps them: shorter than Node's own server default (5 s) so the transport, not the receiver,
 * closes an idle socket, and a call rarely meets a reset one.
 */
const IDLE_SOCKET_MS = 4000;
/**
 * A receiver that says how long it keeps an idle connection (`Keep-Alive: timeout=N`) has its
 * sockets kept that long less undici's 2 s margin, up to this: a receiver called every few seconds
 * is not reconnected to (and TLS-handshaked) each time. What all receivers together can make the
 * transport keep open is bounded by the pools' `maxConnections`, whatever they ask.
 */
const IDLE_SOCKET_HINT_MAX_MS = 60_000;

/** The resolver's answers for a name that has no address. */
const NO_SUCH_NAME = new Set(['ENOTFOUND', 'ENODATA', 'EAI_NONAME', 'EAI_NODATA']);

/**
 * Wraps `lookup` so that only addresses the guard allows come back. Node connects to what lookup
 * answers, so the address checked is the address connected to: a DNS answer that changes between a
 * check and the call (rebinding) cannot slip past. A refusal names the host only; what it resolved
 * to goes to `report`.
 */
export function guardedLookup(lookup: LookupFunction, report: RefusalReport = () => {}): LookupFunction {
  return (hostname, options, callback) => {
    lookup(hostname, { ...options, all: true }, (error, answer) => {
      // A name that does not resolve is refused in the same words as one that resolves only to
      // refused addresses: which of the two an inside name is stays with the operator's log.
      if (error && NO_SUCH_NAME.has((error as NodeJS.ErrnoException).code ?? '')) {
        report({ hostname, addresses: [], reasons: [`does not resolve (${(error as NodeJS.ErrnoException).code})`] });
        return callback(new RefusedAddressError(refusedHostMessage(hostname)), '', 0);
      }
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

interface Open {
  connector: ReturnType<typeof createConnector>;
  pools: ReturnType<typeof createPools>;
}

/**
 * undici and the connector, loaded with the first call: an instance that never calls a webhook does
 * not carry them in its heap, where every full collection would mark them again (docs/performance.md,
 * "The portal's heap").
 */
const loadConnector = () => import('./connector.js');

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
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    return `refused: ${url.protocol} URLs are not called, only http and https`;
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
const OWN_HEADERS = new Set([
  'host',
  'content-length',
  'transfer-encoding',
  'connection',
  'keep-alive',
  'upgrade',
  'expect',
]);

/** The headers to send, or why the call's headers cannot be sent. */
function requestHeaders(headers: Record<string, string>): Record<string, string> | string {
  let own = false;
  for (const name in headers) {
    if (!HTTP_TOKEN.test(name) || !HEADER_VALUE.test(headers[name]!))
      return `refused: the header ${JSON.stringify(name)} is not a valid HTTP header`;
    if (OWN_HEADERS.has(name.toLowerCase())) own = true;
  }
  if (!own) return headers;
  return Object.fromEntries(Object.entries(headers).filter(([name]) => !OWN_HEADERS.has(name.toLowerCase())));
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
 * origin, so no answer can reach another account's call, and at most 256 connections stay open
 * across the pools (idle pools beyond it close, least recently called first).
 */
export function httpTransport(options: HttpTransportOptions = {}): WebhookTransport {
  const defaultTimeoutMs = options.timeoutMs ?? 15_000;
  const allowPrivateNetworks = options.allowPrivateNetworks ?? false;
  const baseLookup = options.lookup ?? (dns.lookup as LookupFunction);
  const report: RefusalReport = ({ hostname, addresses, reasons }) =>
    options.logger?.warn(
      { hostname, addresses, reasons },
      'webhook call refused: the host resolves only to addresses the guard refuses',
    );
  const proxy = options.proxy === undefined ? undefined : proxyUrl(options.proxy);
  const connectorOptions = {
    lookup: allowPrivateNetworks ? baseLookup : guardedLookup(baseLookup, report),
    checkPeer: !allowPrivateNetworks,
    report,
    proxy,
    connectTimeoutMs: defaultTimeoutMs,
  };
  /** The connector (with its TLS session cache) and the pools, made for the first call; dropped whole by `close`. */
  let open: Open | undefined;
  let opening: Promise<Open> | undefined;
  const opened = (): Promise<Open> => {
    if (opening !== undefined) return opening;
    const attempt: Promise<Open> = loadConnector().then(
      ({ createConnector, createPool }) => {
        const connector = createConnector(connectorOptions);
        const poolOptions: Pool.Options = {
          connect: connector.connect,
          keepAliveTimeout: IDLE_SOCKET_MS,
          keepAliveMaxTimeout: IDLE_SOCKET_HINT_MAX_MS,
          maxHeaderSize: MAX_HEAD_BYTES,
          headersTimeout: defaultTimeoutMs,
          bodyTimeout: defaultTimeoutMs,
        };
        const made = { connector, pools: createPools((origin) => createPool(origin, poolOptions)) };
        // A close() that came while undici loaded has dropped this attempt and closes what it made:
        // the next call opens afresh rather than using what is closed.
        if (opening === attempt) open = made;
        return made;
      },
      (error: unknown) => {
        // The next call tries again; this one fails as its attempt.
        if (opening === attempt) opening = undefined;
        throw error;
      },
    );
    return (opening = attempt);
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
      const headers = requestHeaders(call.headers);
      if (typeof headers === 'string') return { statusCode: null, headers: {}, error: headers };
      const limit = Math.min(timeoutMs, defaultTimeoutMs);
      const pools = (open ?? (await opened())).pools;
      // After the first call's wait for undici: a signal that fired meanwhile has no event left to send.
      if (signal?.aborted) return { statusCode: null, headers: {}, error: 'aborted' };
      const pool = pools.get(call.accountId, checked.origin);
      return new Promise((resolve) => {
        const handler = new CallHandler(resolve, limit, signal);
        pool.dispatch({ path: checked.path, method: 'POST', headers, body: call.body }, handler);
      });
    },
    async close() {
      const closing = opening;
      open = undefined;
      opening = undefined;
      const was = await closing?.catch(() => undefined);
      await was?.pools.close();
      await was?.connector.close();
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
