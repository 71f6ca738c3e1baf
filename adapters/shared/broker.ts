import { createHash } from 'node:crypto';
import dns from 'node:dns';
import net, { isIP } from 'node:net';
import type {
  DestinationContext,
  WebhookCall,
  WebhookCallResult,
  WebhookDestination,
  WebhookTransport,
} from '../../src/ports.js';
import { RefusedAddressError, refusalOf, refusedHostMessage } from '../http-transport/address-guard.js';
import { guardedLookup } from '../http-transport/http-transport.js';

// What the destinations beyond HTTP share: where a broker may be reached (the SSRF guard, as for
// HTTP), one connection per account and broker kept while used, and an attempt bounded in time
// whose error never shows the tenant's password.

/** The longest a connection to a broker may take to open, whatever the call's own time left. */
const CONNECT_TIMEOUT_MS = 10_000;
/** A connection no call used for this long is closed. */
const IDLE_CLOSE_MS = 60_000;
/** How long a polite close waits for the broker before its sockets are ended. */
const CLOSE_WAIT_MS = 2000;
/** Brokers one account may hold connections to at once (in one instance); past it the least recently used idle one goes. */
const CONNECTIONS_PER_ACCOUNT = 8;

/** Where to connect: an address the guard passed (or the host itself with `allowPrivateNetworks`), and the name TLS checks. */
export interface BrokerAddress {
  host: string;
  port: number;
  /** The URL's host name, for TLS's server name and certificate check. */
  servername: string;
}

/** The URL's host as the HTTP parser writes it: a broker URL's host is opaque to WHATWG, so `127.1` stays `127.1` there. */
function hostOf(url: URL): string {
  const host = new URL(`http://${url.host}`).hostname;
  return host.startsWith('[') ? host.slice(1, -1) : host;
}

/**
 * The address a broker URL's host may be reached at. Unless `allowPrivateNetworks`, a literal
 * address must be public and a name must resolve to one; the connection is then made to that
 * address, so a DNS answer that changes later cannot lead elsewhere. Rejects with the refusal in
 * the tenant's words; the operator's log gets what the name resolved to.
 */
export async function brokerAddress(
  url: URL,
  defaultPort: number,
  context: DestinationContext,
): Promise<BrokerAddress> {
  const servername = hostOf(url);
  const port = url.port === '' ? defaultPort : Number(url.port);
  if (context.allowPrivateNetworks) return { host: servername, port, servername };
  if (isIP(servername) !== 0) {
    if (refusalOf(servername) !== null) throw new RefusedAddressError(refusedHostMessage(servername));
    return { host: servername, port, servername };
  }
  const lookup = guardedLookup(dns.lookup, (details) =>
    context.logger?.warn({ ...details }, 'destination: refused a broker address'),
  );
  const host = await new Promise<string>((resolve, reject) =>
    lookup(servername, {}, (error, address) => (error ? reject(error) : resolve(address as string))),
  );
  return { host, port, servername };
}

/** A URL's secret, as written and decoded: its password, or a user without one, which is a token (`nats://token@…`). */
function secretsOf(url: URL): string[] {
  const secret = url.password !== '' ? url.password : url.username;
  if (secret === '') return [];
  try {
    return [secret, decodeURIComponent(secret)];
  } catch {
    return [secret];
  }
}

/** An error's message with the URL's secret (raw and percent-encoded) replaced by `***`. */
function maskedMessage(error: unknown, url: URL): string {
  let message = error instanceof Error ? error.message || error.name : String(error);
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code === 'string' && !message.includes(code)) message = `${message} (${code})`;
  for (const secret of secretsOf(url)) message = message.split(secret).join('***');
  return message.slice(0, 1000);
}

/** What the worker records of a publish: the broker's acknowledgement, or the error that stopped it. */
export const acknowledged = (): WebhookCallResult => ({ statusCode: null, headers: {}, error: null });
export const failed = (kind: string, error: unknown, url: URL): WebhookCallResult => ({
  statusCode: null,
  headers: {},
  error: `${kind}: ${maskedMessage(error, url)}`,
});

/** An error that says the broker did not answer in time. */
class BrokerTimeoutError extends Error {
  readonly code = 'ETIMEDOUT';
}

/**
 * `work`, or a rejection once `ms` have passed (`what` says what was waited for) or `signal` aborts:
 * an attempt never waits on a broker that hangs. `work` itself goes on; its result is dropped.
 */
export function withDeadline<T>(work: Promise<T>, ms: number, what: string, signal?: AbortSignal): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(new BrokerTimeoutError(`timed out after ${ms} ms ${what}`)), ms);
    const abort = () => reject(new BrokerTimeoutError(`abandoned ${what}`));
    signal?.addEventListener('abort', abort, { once: true });
    work.then(
      (value) => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', abort);
        resolve(value);
      },
      (error: unknown) => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', abort);
        reject(error);
      },
    );
  });
}

/** An open connection to a broker, as the pool keeps it. */
export interface BrokerConnection {
  /** `false` once the broker dropped it or it failed: the next call opens another. */
  readonly usable: boolean;
  /** Why its relay ended it (`boundedRelay`), which says more than the client's "connection closed". */
  readonly failure?: Error | undefined;
  close(): Promise<void>;
}

interface Entry<C> {
  accountId: string;
  opening: Promise<C>;
  opened?: C;
  inUse: number;
  lastUsed: number;
}

/**
 * Connections to brokers, one per account and broker key (the adapter's: host, port, user, vhost or
 * database), opened on first use, shared by that account's calls, closed when idle for
 * `IDLE_CLOSE_MS` or no longer usable. One account holds at most `CONNECTIONS_PER_ACCOUNT`: one more
 * closes its least recently used idle connection, or fails the attempt when all are in use. Never
 * does one account's connection carry another's call, whatever their URLs.
 */
export class BrokerConnections<C extends BrokerConnection> {
  readonly #entries = new Map<string, Entry<C>>();
  readonly #sweep: NodeJS.Timeout;
  #closed = false;

  constructor(readonly idleMs = IDLE_CLOSE_MS) {
    this.#sweep = setInterval(() => this.#closeIdle(performance.now() - this.idleMs), Math.max(1000, idleMs / 2));
    this.#sweep.unref();
  }

  /** Runs `work` on the account's connection for `key`, opening it with `open` when there is none usable. */
  async use<T>(
    accountId: string,
    key: string,
    open: () => Promise<C>,
    work: (connection: C) => Promise<T>,
  ): Promise<T> {
    if (this.#closed) throw new Error('the destination is closed');
    const mapKey = `${accountId}\n${key}`;
    let entry = this.#entries.get(mapKey);
    if (entry?.opened !== undefined && !entry.opened.usable) {
      this.#drop(mapKey, entry);
      entry = undefined;
    }
    if (entry === undefined) {
      this.#makeRoom(accountId);
      const opening = open();
      const made: Entry<C> = { accountId, opening, inUse: 0, lastUsed: performance.now() };
      entry = made;
      this.#entries.set(mapKey, made);
      opening.then(
        (connection) => {
          made.opened = connection;
          // Closed, or replaced, while it opened: it is no one's.
          if (this.#entries.get(mapKey) !== made) void connection.close().catch(() => {});
        },
        () => {
          if (this.#entries.get(mapKey) === made) this.#entries.delete(mapKey);
        },
      );
    }
    entry.inUse++;
    try {
      return await work(await entry.opening);
    } finally {
      entry.inUse--;
      entry.lastUsed = performance.now();
    }
  }

  /** Closes every connection; later calls fail. */
  async close(): Promise<void> {
    this.#closed = true;
    clearInterval(this.#sweep);
    const entries = [...this.#entries.entries()];
    this.#entries.clear();
    await Promise.allSettled(
      entries.map(([, entry]) =>
        withDeadline(entry.opening, CLOSE_WAIT_MS, 'for a connection to open').then((connection) => connection.close()),
      ),
    );
  }

  /** How many connections the pool holds (open or opening): for tests and metrics. */
  get size(): number {
    return this.#entries.size;
  }

  #makeRoom(accountId: string): void {
    let count = 0;
    let idlest: [string, Entry<C>] | undefined;
    for (const pair of [...this.#entries]) {
      if (pair[1].accountId !== accountId) continue;
      // One its broker dropped, or an attempt's deadline ended, goes now, in use or not.
      if (pair[1].opened !== undefined && !pair[1].opened.usable) {
        this.#drop(...pair);
        continue;
      }
      count++;
      if (
        pair[1].inUse === 0 &&
        pair[1].opened !== undefined &&
        (idlest === undefined || pair[1].lastUsed < idlest[1].lastUsed)
      )
        idlest = pair;
    }
    if (count < CONNECTIONS_PER_ACCOUNT) return;
    if (idlest === undefined)
      throw new Error(`the account already has ${CONNECTIONS_PER_ACCOUNT} broker connections in use`);
    this.#drop(...idlest);
  }

  #drop(mapKey: string, entry: Entry<C>): void {
    if (this.#entries.get(mapKey) === entry) this.#entries.delete(mapKey);
    void entry.opening.then((connection) => connection.close()).catch(() => {});
  }

  #closeIdle(before: number): void {
    for (const [mapKey, entry] of this.#entries)
      if (entry.inUse === 0 && entry.opened !== undefined && (entry.lastUsed < before || !entry.opened.usable))
        this.#drop(mapKey, entry);
  }
}

/**
 * An ordering key as one token of a subject or topic level: the bytes NATS and MQTT would read as a
 * separator, a wildcard or whitespace (`.`, `/`, `*`, `>`, `+`, `#`, `%`, spaces) percent-encoded,
 * as a consumer's `decodeURIComponent` reads back. A key of letters, digits, `-` and `_` stays as it is.
 */
export const subjectToken = (key: string): string =>
  key.replace(/[^A-Za-z0-9_\-~!$&'()=,;:@]/gu, (character) =>
    [...Buffer.from(character)].map((byte) => `%${byte.toString(16).toUpperCase().padStart(2, '0')}`).join(''),
  );

/** What is wrong with a URL, in the words of the `400` that refuses it. */
export interface UrlProblem {
  problem: string;
}

/** A broker reached over connections of its own (AMQP, NATS, MQTT, Redis): what `pooledDestination` asks of it. */
export interface PooledBroker<Target, Connection extends BrokerConnection> {
  /** The destination's name, which starts each error of its attempts (`amqp: …`). */
  kind: string;
  schemes: readonly string[];
  /** The broker's port when the URL names none (`5671` for `amqps:`). */
  defaultPort(url: URL): number;
  /** Where a URL publishes, or what is wrong with it. */
  targetOf(url: URL): Target | UrlProblem;
  /** The connection a URL's calls share, beside the account: host, port, user and password, vhost or database. */
  connectionKey(url: URL, target: Target): string;
  /**
   * Opens a connection to `endpoint`, the handshake done within `connectMs`: the loopback end of a
   * `boundedRelay` to the address the guard passed, with the URL's host name for TLS.
   */
  connect(url: URL, target: Target, endpoint: BrokerAddress, connectMs: number): Promise<Connection>;
  /** Publishes the call and resolves once the broker acknowledged it; rejects with why it did not. */
  publish(connection: Connection, target: Target, call: WebhookCall, timeoutMs: number): Promise<void>;
  /** What an attempt waits for, in its timeout's words (`for JetStream to acknowledge the message`). */
  waitingFor: string;
  /** A connection no call used for this long is closed (default `IDLE_CLOSE_MS`). */
  idleMs?: number;
}

const isProblem = (value: unknown): value is UrlProblem =>
  typeof value === 'object' && value !== null && 'problem' in value;

/** A client's connection and the relay it goes through, kept together by the pool. */
class Relayed<Connection extends BrokerConnection> implements BrokerConnection {
  constructor(
    readonly inner: Connection,
    private readonly relay: Relay,
  ) {}
  get usable(): boolean {
    return !this.relay.closed && this.inner.usable;
  }
  get failure(): Error | undefined {
    return this.relay.failure;
  }
  /** Closes the client politely, for at most `CLOSE_WAIT_MS`, and the relay's sockets in any case: a broker cannot hold them open. */
  async close(): Promise<void> {
    try {
      await withDeadline(this.inner.close(), CLOSE_WAIT_MS, 'for the broker to close the connection').catch(() => {});
    } finally {
      this.relay.close();
    }
  }
  /** Ends the connection at once (an attempt's deadline passed on it): what waits on it fails, and the pool replaces it. */
  end(): void {
    this.relay.close();
  }
}

/**
 * A destination whose calls share connections kept per account and broker: each attempt checks its
 * URL, takes (or opens, through the guard and a `boundedRelay`) the account's connection, publishes,
 * and ends by `timeoutMs` with the broker's acknowledgement or the error that stopped it, its
 * password masked.
 */
export function pooledDestination<Target, Connection extends BrokerConnection>(
  broker: PooledBroker<Target, Connection>,
): WebhookDestination {
  /**
   * The URL's target, once what every attempt reads of it is readable: the user and password, which
   * each adapter decodes, and the host, which `brokerAddress` reads as the HTTP parser does (an opaque
   * host such as `a%zz` parses as a broker URL, and as nothing there).
   */
  const targetOf = (url: URL): Target | UrlProblem => {
    try {
      decodeURIComponent(url.username);
      decodeURIComponent(url.password);
    } catch {
      return { problem: 'must percent-encode its user and password in UTF-8' };
    }
    if (url.host !== '' && !URL.canParse(`http://${url.host}`)) return { problem: 'must name a valid host' };
    return broker.targetOf(url);
  };
  return {
    schemes: broker.schemes,
    check(url) {
      const target = targetOf(url);
      return isProblem(target) ? target.problem : null;
    },
    open(context: DestinationContext): WebhookTransport {
      const connections = new BrokerConnections<Relayed<Connection>>(broker.idleMs ?? IDLE_CLOSE_MS);

      async function connect(url: URL, target: Target, connectMs: number): Promise<Relayed<Connection>> {
        const address = await withDeadline(
          brokerAddress(url, broker.defaultPort(url), context),
          connectMs,
          "for the broker's name to resolve",
        );
        const relay = await boundedRelay(address, connectMs);
        try {
          const endpoint = { host: relay.host, port: relay.port, servername: address.servername };
          return new Relayed(await broker.connect(url, target, endpoint, connectMs), relay);
        } catch (error) {
          relay.close();
          throw relay.failure ?? error;
        }
      }

      return {
        async send(call, { timeoutMs, signal }) {
          const url = new URL(call.url);
          const target = targetOf(url);
          if (isProblem(target)) return failed(broker.kind, new Error(`the URL ${target.problem}`), url);
          const connectMs = Math.min(CONNECT_TIMEOUT_MS, timeoutMs);
          try {
            await withDeadline(
              connections.use(
                call.accountId,
                broker.connectionKey(url, target),
                () => connect(url, target, connectMs),
                (connection) => {
                  const published = broker.publish(connection.inner, target, call, timeoutMs);
                  // A publish the broker never answers is ended with its connection at the deadline:
                  // otherwise it would hold the connection (and the call's body) in use for good.
                  const ending = setTimeout(() => connection.end(), timeoutMs);
                  const abort = () => connection.end();
                  signal?.addEventListener('abort', abort, { once: true });
                  return published
                    .catch((error: unknown) => {
                      throw connection.failure ?? error;
                    })
                    .finally(() => {
                      clearTimeout(ending);
                      signal?.removeEventListener('abort', abort);
                    });
                },
              ),
              timeoutMs,
              broker.waitingFor,
              signal,
            );
            return acknowledged();
          } catch (error) {
            return failed(broker.kind, error, url);
          }
        },
        close: () => connections.close(),
      };
    },
  };
}

/**
 * An optional peer, imported on first use and kept; a missing one fails the attempt naming what to
 * install, and is looked for again on the next.
 */
export function peer<T>(names: string, importer: () => Promise<T>): () => Promise<T> {
  let loaded: Promise<T> | undefined;
  return () =>
    (loaded ??= importer().catch((error: unknown) => {
      loaded = undefined;
      throw new Error(`${names} not installed (${(error as Error).message})`);
    }));
}

/** What a broker may send a connection beyond what the client wrote to it: more, and the connection ends. */
export const MAX_UNASKED_BYTES = 1024 * 1024;

/** A relay's local end: where the client connects instead of the broker. */
export interface Relay {
  host: string;
  port: number;
  /** Why the relay ended the connection, when it was its bound. */
  readonly failure: Error | undefined;
  /** Whether it was closed (by either side, its bound, or `close`). */
  readonly closed: boolean;
  close(): void;
}

/**
 * A relay on loopback between a client library and the broker, for one connection: it bounds what
 * the broker can make the process hold, which the clients themselves do not (a Redis bulk reply, a
 * NATS message, an MQTT packet may announce any size). The broker may send at most
 * `MAX_UNASKED_BYTES` more than the client has written, the credit never above that bound; past it
 * both sockets end, and the client's call fails with `failure`. A reply that the broker drips never
 * ends its attempt either: the deadline ends the connection. The broker is connected to first (within `connectMs`), so a refusal names itself; the
 * relay then accepts one connection and listens no more. TLS passes through it untouched.
 */
export async function boundedRelay(address: BrokerAddress, connectMs: number): Promise<Relay> {
  const broker = net.connect({ host: address.host, port: address.port, noDelay: true });
  broker.pause();
  try {
    await withDeadline(
      new Promise<void>((resolve, reject) => {
        broker.once('connect', resolve);
        broker.once('error', reject);
      }),
      connectMs,
      'for the broker to accept the connection',
    );
  } catch (error) {
    broker.destroy();
    throw error;
  }
  const server = net.createServer({ noDelay: true });
  let client: net.Socket | undefined;
  let failure: Error | undefined;
  let closed = false;
  const close = () => {
    closed = true;
    server.close();
    broker.destroy();
    client?.destroy();
  };
  broker.on('error', close);
  broker.on('close', close);
  server.on('error', close);
  server.once('connection', (socket) => {
    server.close();
    client = socket;
    let budget = MAX_UNASKED_BYTES;
    socket.on('data', (chunk: Buffer) => {
      // Credit, not a reset: a reply of any size cannot be fed in through the client's heartbeats.
      budget = Math.min(MAX_UNASKED_BYTES, budget + chunk.length);
      if (!broker.write(chunk)) socket.pause();
    });
    broker.on('drain', () => socket.resume());
    broker.on('data', (chunk: Buffer) => {
      budget -= chunk.length;
      if (budget < 0) {
        failure = new Error(`the broker sent more than ${MAX_UNASKED_BYTES} bytes that were not asked for`);
        return close();
      }
      if (!socket.write(chunk)) broker.pause();
    });
    socket.on('drain', () => broker.resume());
    socket.on('error', close);
    socket.on('close', close);
    broker.resume();
  });
  await new Promise<void>((resolve, reject) => {
    server.once('listening', resolve);
    server.once('error', reject);
    server.listen(0, '127.0.0.1');
  });
  return {
    host: '127.0.0.1',
    port: (server.address() as net.AddressInfo).port,
    get failure() {
      return failure;
    },
    get closed() {
      return closed;
    },
    close,
  };
}

/**
 * An ordering key as a broker field of at most `maxBytes` (and of `allowed` characters, where the
 * broker restricts them): the key itself when it fits, else `h` and the SHA-256 hex of it, the same
 * for the same key, so a key too long for the field still keeps its own order.
 */
export function fittedKey(key: string, maxBytes: number, allowed?: RegExp): string {
  if (Buffer.byteLength(key) <= maxBytes && (allowed === undefined || allowed.test(key))) return key;
  return `h${createHash('sha256').update(key).digest('hex')}`;
}

/**
 * The name a broker URL's path holds (a stream, a subject, a topic, a vhost), decoded; or what is
 * wrong with it. `example` shows a URL naming one, where one is required.
 */
export function pathNameOf(url: URL, what: string, maxBytes: number, example?: string): string | UrlProblem {
  if (url.host === '') return { problem: 'must name the broker host' };
  let name: string;
  try {
    name = decodeURIComponent(url.pathname.slice(1));
  } catch {
    return { problem: `must name its ${what} in percent-encoded UTF-8` };
  }
  if (name === '' && example !== undefined) return { problem: `must name the ${what} as its path: ${example}` };
  if (Buffer.byteLength(name) > maxBytes) return { problem: `must name a ${what} of at most ${maxBytes} bytes` };
  return name;
}
