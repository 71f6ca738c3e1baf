import type { LookupAddress } from 'node:dns';
import type { LookupFunction, Socket } from 'node:net';
import { buildConnector, Pool } from 'undici';
import { RefusedAddressError, refusalOf, refusedHostMessage, type RefusalReport } from './address-guard.js';

/**
 * The most an answer may put on the wire (status lines, heads, interim answers, chunk framing,
 * trailers and body together) before its call is decided. A call decides at the 64 KiB body cap
 * long before this; only an answer that pads its framing (chunk extensions, endless interim heads)
 * reaches it, and its connection is closed there.
 */
export const MAX_ANSWER_WIRE_BYTES = 256 * 1024;

/**
 * The egress proxy refused or failed the tunnel. `local` when the proxy itself is at fault (it
 * cannot be reached, or wants other credentials: `407`): the call never left the portal. A
 * proxy's other answers (`403` a denied host, `502`/`503` an upstream it could not reach) speak of
 * the receiver.
 */
class ProxyError extends Error {
  readonly code = 'ERR_WEBHOOK_PROXY';
  constructor(
    message: string,
    readonly local: boolean,
  ) {
    super(message);
  }
}

/** The errors of a connection to the proxy itself that never opened. */
const UNREACHABLE = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
  'UND_ERR_CONNECT_TIMEOUT',
]);

/** An answer that broke one of the transport's bounds; its message names which. */
class AnswerBoundError extends Error {
  readonly code = 'ERR_WEBHOOK_ANSWER_BOUND';
}

export interface ConnectorOptions {
  /** Resolves the receivers' host names; guarded unless private networks are allowed. */
  lookup: LookupFunction;
  /** Whether the peer's address is checked again once connected (off with `allowPrivateNetworks`). */
  checkPeer: boolean;
  report: RefusalReport;
  /** An egress proxy every connection is tunnelled through (`CONNECT host:port`). */
  proxy: URL | undefined;
  connectTimeoutMs: number;
}

export type Connect = buildConnector.connector;

/** undici's pool of connections to one origin, for the transport that loads this module with its first call. */
export const createPool = (origin: string, options: Pool.Options): Pool => new Pool(origin, options);

/**
 * Opens the sockets undici's pools use: straight to the receiver (the guarded lookup picks the
 * address, and the peer is checked again once connected, so the address checked is the address
 * connected to), or through a CONNECT tunnel of the egress proxy. Every socket carries the answer
 * budget. `close` drops the proxy's pool and the TLS session cache with it.
 */
export function createConnector(options: ConnectorOptions): { connect: Connect; close(): Promise<void> } {
  const timeout = options.connectTimeoutMs;
  const direct = buildConnector({ lookup: options.lookup, timeout });
  const proxy = options.proxy === undefined ? undefined : createTunnels(options.proxy, timeout);

  const connect: Connect = (target, callback) => {
    const done: buildConnector.Callback = (error, socket) => {
      if (error !== null) return callback(error, null);
      if (options.checkPeer && proxy === undefined) {
        // Second line behind the lookup: whatever the route to the socket, its peer must pass too.
        const refusal = socket.remoteAddress === undefined ? null : refusalOf(socket.remoteAddress);
        if (refusal !== null) {
          options.report({ hostname: target.hostname, addresses: [socket.remoteAddress!], reasons: [refusal] });
          socket.destroy();
          return callback(new RefusedAddressError(refusedHostMessage(target.hostname)), null);
        }
      }
      budgetAnswers(socket);
      dropIfUnused(socket);
      callback(null, socket);
    };
    if (proxy === undefined) return direct(target, done);
    // Without the guard the proxy resolves the name and decides. With it, the tunnel is asked for the
    // address the guard passed: a proxy left to resolve the name itself could get another answer
    // (a name with a public and a loopback address, a rebinding name) and connect there.
    if (!options.checkPeer) return proxy.open(target, target.hostname, done);
    options.lookup(target.hostname, { all: true }, (error, addresses) => {
      if (error) return callback(error, null);
      proxy.open(target, (addresses as LookupAddress[])[0]!.address, done);
    });
  };
  return { connect, close: async () => proxy?.close() };
}

/**
 * Tunnels through an `http://` or `https://` proxy with CONNECT, for http and https receivers alike:
 * each tunnel reaches one receiver, so every bound and the no-stray-bytes rule hold end to end.
 * `CONNECT` names `host` (the address the guard checked, or the receiver's name when private
 * networks are allowed); TLS inside the tunnel is to the receiver's name, its certificate checked
 * against it, and the request's `Host` stays the receiver's.
 */
function createTunnels(proxy: URL, timeout: number) {
  const headers: Record<string, string> = {};
  if (proxy.username !== '' || proxy.password !== '') {
    const credentials = `${decodeURIComponent(proxy.username)}:${decodeURIComponent(proxy.password)}`;
    headers['proxy-authorization'] = `Basic ${Buffer.from(credentials).toString('base64')}`;
  }
  const where = `${proxy.protocol}//${proxy.host}`;
  const pool = new Pool(where, { connect: buildConnector({ timeout }) });
  const tls = buildConnector({ timeout });

  function open(target: buildConnector.Options, host: string, callback: buildConnector.Callback): void {
    const port = target.port !== '' ? target.port : target.protocol === 'https:' ? '443' : '80';
    // undici hands the host name over unbracketed; an authority brackets an IPv6 address.
    const authorityOf = (name: string) => `${name.includes(':') ? `[${name}]` : name}:${port}`;
    const authority = authorityOf(host);
    pool.connect({ path: authority, headers: { ...headers, host: authority } }).then(
      ({ statusCode, socket }) => {
        if (statusCode !== 200) {
          socket.destroy();
          // Named by the receiver's host, as the tenant wrote it: the address it resolved to stays with the operator.
          return callback(
            new ProxyError(
              `the proxy ${where} answered ${statusCode} to CONNECT ${authorityOf(target.hostname)}`,
              statusCode === 407,
            ),
            null,
          );
        }
        if (target.protocol !== 'https:') return callback(null, socket as Socket);
        tls({ ...target, httpSocket: socket as Socket }, callback);
      },
      (error: Error & { code?: string }) =>
        callback(
          new ProxyError(
            `the proxy ${where} could not open a tunnel: ${error.message}`,
            UNREACHABLE.has(error.code ?? ''),
          ),
          null,
        ),
    );
  }
  return { open, close: () => pool.close() };
}

/** How long a new connection may stay without a request written on it. */
const UNUSED_SOCKET_MS = 100;

/**
 * Closes a new connection nothing was written on soon after it opened. undici connects again at once
 * when a call decided early (its deadline, an abort) has its socket destroyed, while that call still
 * counts as pending; nothing is sent on the new connection, which would otherwise stay open for the
 * keep-alive time (128 calls cut at their deadline kept 128 sockets for seconds). A connection opened
 * for a request has it written on the next turn of the event loop.
 */
function dropIfUnused(socket: Socket): void {
  // What the handshakes wrote (TLS, a proxy's CONNECT) is not a request.
  const handshake = socket.bytesWritten;
  setTimeout(() => {
    if (socket.bytesWritten === handshake && !socket.destroyed) socket.destroy();
  }, UNUSED_SOCKET_MS).unref();
}

/**
 * Closes the socket once an answer has put more than `MAX_ANSWER_WIRE_BYTES` on the wire since
 * the request was written. undici reads the socket on `readable`; this listener runs first, so
 * the bytes past the budget are never parsed. A request is one write burst (pipelining is off),
 * so a change of `bytesWritten` marks the next answer's start.
 */
function budgetAnswers(socket: Socket): void {
  let written = socket.bytesWritten;
  let start = socket.bytesRead;
  let seen = start;
  socket.prependListener('readable', () => {
    if (socket.bytesWritten !== written) {
      written = socket.bytesWritten;
      start = seen;
    }
    seen = socket.bytesRead;
    if (seen - start > MAX_ANSWER_WIRE_BYTES) {
      socket.destroy(
        new AnswerBoundError(
          `invalid response: its framing passed ${MAX_ANSWER_WIRE_BYTES / 1024} KiB before the answer was complete`,
        ),
      );
    }
  });
}
