import dns from 'node:dns';
import type { LookupFunction } from 'node:net';
import type { WebhookCall, WebhookCallResult, WebhookTransport } from '../../src/ports.js';
import { errorMessage } from '../../src/errors.js';
import type { Logger } from '../../src/shared/logger.js';
import { refusalOf } from './address-guard.js';
import { createConnectionPool, type Origin } from './connections.js';
import { HTTP_TOKEN, ResponseParser } from './response-parser.js';

export interface HttpTransportOptions {
  /** The longest one call may take, connect to last byte read (default 15000); `send` may ask for less. */
  timeoutMs?: number;
  /** Call loopback, private, link-local and other non-public addresses too (default `false`). */
  allowPrivateNetworks?: boolean;
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
/**
 * Idle keep-alive sockets are closed after this long: shorter than Node's own server default (5 s)
 * so the transport, not the receiver, closes an idle socket, and a call rarely meets a reset one.
 */
const IDLE_SOCKET_MS = 4000;

class RefusedAddressError extends Error {
  readonly code = 'ERR_WEBHOOK_ADDRESS_REFUSED';
}

/** What the tenant reads when a host name resolves only to addresses the guard refuses: no address, no kind. */
export const refusedHostMessage = (hostname: string) => `refused to call ${hostname}: its address is not allowed (allowPrivateNetworks is off)`;

/** A refusal's details for the operator's log: never part of the attempt's error. */
export type RefusalReport = (details: { hostname: string; addresses: string[]; reasons: string[] }) => void;

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

/** The URL, or why it may not be called. */
function checkUrl(target: string, allowPrivateNetworks: boolean): URL | string {
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
  return url;
}


/** A header value with no line break or NUL (and a token for a name): nothing can be smuggled into the request. */
const HEADER_VALUE = /^[^\r\n\0]*$/;
/** Headers the transport writes itself, from the URL and the body. */
const OWN_HEADERS = new Set(['host', 'content-length', 'transfer-encoding', 'connection']);

/** The request's bytes before the body, or why the call's headers cannot be sent. */
function requestHead(url: URL, call: WebhookCall, bodyBytes: number): string {
  let head = `POST ${url.pathname}${url.search} HTTP/1.1\r\nHost: ${url.host}\r\n`;
  for (const name in call.headers) {
    const value = call.headers[name]!;
    if (!HTTP_TOKEN.test(name) || !HEADER_VALUE.test(value)) throw new TypeError(`refused: the header ${JSON.stringify(name)} is not a valid HTTP header`);
    if (!OWN_HEADERS.has(name.toLowerCase())) head += `${name}: ${value}\r\n`;
  }
  return `${head}Content-Length: ${bodyBytes}\r\n\r\n`;
}

/**
 * Webhook calls as HTTP/1.1 POSTs over kept-alive connections, behind an SSRF guard: http and https
 * only, no credentials, no redirects followed (a 3xx is answered as it came), the resolved address
 * checked at connect time, the body read to 64 KiB and dropped, one deadline for the whole call.
 * `send` resolves for every outcome.
 *
 * The requests are written and their answers read here (connections.ts, response-parser.ts) instead
 * of by `http.request`: a webhook call is one POST whose answer is a status, and Node's client paid
 * for generality on every call (an OutgoingMessage, an IncomingMessage stream, agent bookkeeping,
 * listeners added and removed on the socket). The row `webhook transport: CPU a call` of
 * `webhook-delivery.bench.js` replays 5,000 signed calls 32 at a time to a receiver in another
 * process: 18.6–23 µs of CPU a call against 78.6–84 µs with `http.request` and a keep-alive agent.
 */
export function httpTransport(options: HttpTransportOptions = {}): WebhookTransport {
  const defaultTimeoutMs = options.timeoutMs ?? 15_000;
  const allowPrivateNetworks = options.allowPrivateNetworks ?? false;
  const baseLookup = options.lookup ?? (dns.lookup as LookupFunction);
  const report: RefusalReport = ({ hostname, addresses, reasons }) =>
    options.logger?.warn({ hostname, addresses, reasons }, 'webhook call refused: the host resolves only to addresses the guard refuses');
  const lookup = allowPrivateNetworks ? baseLookup : guardedLookup(baseLookup, report);
  const pool = createConnectionPool({
    lookup,
    idleMs: IDLE_SOCKET_MS,
    // Second line behind the lookup: whatever the route to the socket, its peer must pass too.
    // This listener comes before the request's write, which waits for the same event.
    onSocket: allowPrivateNetworks
      ? undefined
      : (socket, origin) =>
          socket.once('connect', () => {
            const refusal = socket.remoteAddress === undefined ? null : refusalOf(socket.remoteAddress);
            if (refusal === null) return;
            report({ hostname: origin.hostname, addresses: [socket.remoteAddress!], reasons: [refusal] });
            socket.destroy(new RefusedAddressError(refusedHostMessage(origin.hostname)));
          }),
  });

  interface Attempt {
    origin: Origin;
    bytes: string;
    timeoutMs: number;
    deadline: number;
    signal: AbortSignal | undefined;
    retried: boolean;
  }

  function attempt(job: Attempt): Promise<WebhookCallResult> {
    const { signal } = job;
    return new Promise((resolve) => {
      const connection = pool.take(job.origin);
      const parser = new ResponseParser();
      let settled = false;
      const settle = () => {
        settled = true;
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
      };
      const finish = (result: WebhookCallResult, reusable: boolean) => {
        if (settled) return;
        settle();
        if (reusable) pool.release(connection);
        else connection.destroy();
        resolve(result);
      };
      /** The status arrived: that decides the call, whatever happens to the rest of the body. */
      const answered = (reusable = false) => finish({ statusCode: parser.statusCode, headers: parser.headers, error: null }, reusable);
      const fail = (error: string) => (parser.statusCode === null ? finish({ statusCode: null, headers: {}, error }, false) : answered());
      /** A kept-alive connection the receiver closed as the request went out: Node's advice is to retry once. */
      const retry = () => {
        settle();
        connection.destroy();
        resolve(attempt({ ...job, retried: true }));
      };
      const mayRetry = () => !job.retried && connection.reused && !parser.started;

      connection.attach({
        data(chunk) {
          const progress = parser.push(chunk);
          if (progress.state === 'done') answered(progress.reusable);
          else if (progress.state === 'error') fail(`invalid response: ${progress.message}`);
          else if (parser.bodyBytes > MAX_RESPONSE_BYTES) answered();
        },
        end() {
          if (settled) return;
          if (mayRetry()) return retry();
          const progress = parser.end();
          if (progress.state === 'done') answered();
          else fail(progress.message);
        },
        error(error) {
          if (settled) return;
          if (mayRetry() && (error.code === 'ECONNRESET' || error.code === 'EPIPE')) return retry();
          fail(errorMessage(error));
        },
      });
      const timer = setTimeout(() => fail(`timed out after ${job.timeoutMs} ms`), Math.max(0, job.deadline - Date.now()));
      timer.unref();
      const onAbort = () => fail('aborted');
      signal?.addEventListener('abort', onAbort, { once: true });
      connection.socket.write(job.bytes);
    });
  }

  return {
    async send(call, { timeoutMs, signal }) {
      const checked = checkUrl(call.url, allowPrivateNetworks);
      if (typeof checked === 'string') return { statusCode: null, headers: {}, error: checked };
      if (signal?.aborted) return { statusCode: null, headers: {}, error: 'aborted' };
      let head: string;
      try {
        head = requestHead(checked, call, Buffer.byteLength(call.body));
      } catch (error) {
        return { statusCode: null, headers: {}, error: errorMessage(error) };
      }
      const protocol = checked.protocol as Origin['protocol'];
      const origin: Origin = {
        protocol,
        hostname: checked.hostname.startsWith('[') ? checked.hostname.slice(1, -1) : checked.hostname,
        port: checked.port === '' ? (protocol === 'https:' ? 443 : 80) : Number(checked.port),
      };
      const limit = Math.min(timeoutMs, defaultTimeoutMs);
      return attempt({ origin, bytes: head + call.body, timeoutMs: limit, deadline: Date.now() + limit, signal, retried: false });
    },
    async close() {
      pool.close();
    },
  };
}
