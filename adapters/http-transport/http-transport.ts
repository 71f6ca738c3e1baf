import dns from 'node:dns';
import http from 'node:http';
import https from 'node:https';
import type { LookupFunction, Socket } from 'node:net';
import type { WebhookCall, WebhookCallResult, WebhookTransport } from '../../src/ports.js';
import { errorMessage } from '../../src/errors.js';
import type { Logger } from '../../src/shared/logger.js';
import { refusalOf } from './address-guard.js';

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


/**
 * Webhook calls over `node:http` / `node:https` with keep-alive agents, behind an SSRF guard:
 * http and https only, no credentials, no redirects followed (a 3xx is answered as it came), the
 * resolved address checked at connect time, the body read to 64 KiB and dropped, one deadline for
 * the whole call. `send` resolves for every outcome.
 */
export function httpTransport(options: HttpTransportOptions = {}): WebhookTransport {
  const defaultTimeoutMs = options.timeoutMs ?? 15_000;
  const allowPrivateNetworks = options.allowPrivateNetworks ?? false;
  const baseLookup = options.lookup ?? (dns.lookup as LookupFunction);
  const report: RefusalReport = ({ hostname, addresses, reasons }) =>
    options.logger?.warn({ hostname, addresses, reasons }, 'webhook call refused: the host resolves only to addresses the guard refuses');
  const lookup = allowPrivateNetworks ? baseLookup : guardedLookup(baseLookup, report);
  const agentOptions = { keepAlive: true, timeout: IDLE_SOCKET_MS, scheduling: 'lifo' as const };
  const agents = { 'http:': new http.Agent(agentOptions), 'https:': new https.Agent(agentOptions) };

  interface Attempt {
    url: URL;
    call: WebhookCall;
    timeoutMs: number;
    deadline: number;
    signal: AbortSignal | undefined;
    retried: boolean;
  }

  function attempt(job: Attempt): Promise<WebhookCallResult> {
    const { url, call, signal } = job;
    return new Promise((resolve) => {
      let settled = false;
      let response: http.IncomingMessage | undefined;
      const settle = () => {
        settled = true;
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
      };
      const finish = (result: WebhookCallResult) => {
        if (settled) return;
        settle();
        resolve(result);
      };
      /** The status arrived: that decides the call, whatever happens to the rest of the body. */
      const answered = () => finish({ statusCode: response!.statusCode ?? null, headers: response!.headers, error: null });
      const fail = (error: string) => (response === undefined ? finish({ statusCode: null, headers: {}, error }) : answered());

      const protocol = url.protocol as 'http:' | 'https:';
      const req = (protocol === 'https:' ? https : http).request({
        protocol,
        hostname: url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname,
        port: url.port,
        path: url.pathname + url.search,
        method: 'POST',
        headers: { ...call.headers, 'Content-Length': String(Buffer.byteLength(call.body)) },
        agent: agents[protocol],
        lookup,
      });
      const timer = setTimeout(() => {
        fail(`timed out after ${job.timeoutMs} ms`);
        req.destroy();
      }, Math.max(0, job.deadline - Date.now()));
      timer.unref();
      const onAbort = () => {
        fail('aborted');
        req.destroy();
      };
      signal?.addEventListener('abort', onAbort, { once: true });

      if (!allowPrivateNetworks) {
        // Second line behind the lookup: whatever the route to the socket, its peer must pass too.
        req.on('socket', (socket: Socket) => {
          if (!socket.connecting) return;
          socket.once('connect', () => {
            const refusal = socket.remoteAddress === undefined ? null : refusalOf(socket.remoteAddress);
            if (refusal === null) return;
            report({ hostname: url.hostname, addresses: [socket.remoteAddress!], reasons: [refusal] });
            req.destroy(new RefusedAddressError(refusedHostMessage(url.hostname)));
          });
        });
      }
      req.on('response', (res) => {
        response = res;
        let read = 0;
        res.on('data', (chunk: Buffer) => {
          read += chunk.length;
          if (read > MAX_RESPONSE_BYTES) {
            res.destroy();
            answered();
          }
        });
        res.on('end', answered);
        res.on('error', answered);
        res.on('close', answered);
      });
      req.on('error', (error: NodeJS.ErrnoException) => {
        if (settled) return;
        // A kept-alive socket the receiver closed as the request went out: Node's advice is to retry once.
        if (!job.retried && response === undefined && req.reusedSocket && error.code === 'ECONNRESET') {
          settle();
          resolve(attempt({ ...job, retried: true }));
          return;
        }
        fail(errorMessage(error));
      });
      req.end(call.body);
    });
  }

  return {
    async send(call, { timeoutMs, signal }) {
      const checked = checkUrl(call.url, allowPrivateNetworks);
      if (typeof checked === 'string') return { statusCode: null, headers: {}, error: checked };
      if (signal?.aborted) return { statusCode: null, headers: {}, error: 'aborted' };
      const limit = Math.min(timeoutMs, defaultTimeoutMs);
      return attempt({ url: checked, call, timeoutMs: limit, deadline: Date.now() + limit, signal, retried: false });
    },
    async close() {
      agents['http:'].destroy();
      agents['https:'].destroy();
    },
  };
}
