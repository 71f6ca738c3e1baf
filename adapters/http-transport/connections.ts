import net, { type LookupFunction, type Socket } from 'node:net';
import tls from 'node:tls';

/** Where a connection goes: the scheme, the host (an IPv6 address without brackets) and port. */
export interface Origin {
  protocol: 'http:' | 'https:';
  hostname: string;
  port: number;
}

/** Where a connection's socket events go while a request is on it. */
export interface Exchange {
  data(chunk: Buffer): void;
  /** The peer closed the connection (or it was closed under the exchange without an error). */
  end(): void;
  error(error: NodeJS.ErrnoException): void;
}

/** One socket to an origin, carrying one request at a time. */
export class Connection {
  /** When it last became idle; 0 while it has carried no request. */
  idleSince = 0;
  private exchange: Exchange | undefined;

  constructor(
    readonly socket: Socket,
    readonly key: string,
    onGone: (connection: Connection) => void,
  ) {
    // The listeners stay for the socket's life; each request only swaps `exchange`.
    socket.on('data', (chunk: Buffer) => (this.exchange === undefined ? socket.destroy() : this.exchange.data(chunk)));
    // An idle connection the peer closed is dropped at once, not handed to the next call.
    socket.on('end', () => (this.exchange === undefined ? socket.destroy() : this.exchange.end()));
    socket.on('error', (error: NodeJS.ErrnoException) => this.exchange?.error(error));
    socket.on('close', () => {
      onGone(this);
      this.exchange?.end();
    });
  }

  /** Whether it has carried a request: a reset on it may be the peer closing it idle. */
  get reused(): boolean {
    return this.idleSince !== 0;
  }

  attach(exchange: Exchange): void {
    this.exchange = exchange;
  }

  detach(): void {
    this.exchange = undefined;
  }

  /** Closes it without telling the exchange that was on it. */
  destroy(): void {
    this.exchange = undefined;
    this.socket.destroy();
  }
}

export interface ConnectionPoolOptions {
  lookup: LookupFunction;
  /** Idle connections are closed after this long. */
  idleMs: number;
  /** Called on each new socket before it connects (the SSRF guard's check of the peer). */
  onSocket?: (socket: Socket, origin: Origin) => void;
}

/**
 * Kept-alive connections by origin, the most recently used taken first (as `scheduling: 'lifo'` in
 * Node's agent): under light load the idle rest age out instead of each being kept warm. TLS
 * sessions are kept per origin, so a new connection resumes instead of a full handshake.
 */
export function createConnectionPool(options: ConnectionPoolOptions) {
  const idle = new Map<string, Connection[]>();
  const all = new Set<Connection>();
  const sessions = new Map<string, Buffer>();

  const gone = (connection: Connection) => {
    all.delete(connection);
    const list = idle.get(connection.key);
    const at = list?.indexOf(connection) ?? -1;
    if (at !== -1) list!.splice(at, 1);
  };

  // One sweep for every idle connection instead of a timer per socket re-armed on each request.
  const sweeper = setInterval(() => {
    const stale = Date.now() - options.idleMs;
    for (const list of idle.values()) {
      while (list.length > 0 && list[0]!.idleSince <= stale) list.shift()!.destroy();
    }
  }, Math.max(100, options.idleMs / 4));
  sweeper.unref();

  function open(origin: Origin, key: string): Connection {
    const { hostname, port } = origin;
    const socket =
      origin.protocol === 'https:'
        ? tls.connect({
            host: hostname,
            port,
            servername: net.isIP(hostname) === 0 ? hostname : undefined,
            lookup: options.lookup,
            ALPNProtocols: ['http/1.1'],
            session: sessions.get(key),
          })
        : net.connect({ host: hostname, port, lookup: options.lookup, noDelay: true });
    if (origin.protocol === 'https:') {
      socket.setNoDelay(true);
      socket.on('session', (session: Buffer) => sessions.set(key, session));
    }
    options.onSocket?.(socket, origin);
    const connection = new Connection(socket, key, gone);
    all.add(connection);
    return connection;
  }

  return {
    /** An idle connection to `origin`, or a new one. */
    take(origin: Origin): Connection {
      const key = `${origin.protocol}//${origin.hostname}:${origin.port}`;
      const list = idle.get(key);
      const stale = Date.now() - options.idleMs;
      while (list !== undefined && list.length > 0) {
        const connection = list.pop()!;
        if (connection.idleSince > stale && connection.socket.writable) return connection;
        connection.destroy();
      }
      return open(origin, key);
    },
    /** Back to the idle ones, after an answer that leaves it reusable. */
    release(connection: Connection): void {
      connection.detach();
      connection.idleSince = Date.now();
      const list = idle.get(connection.key);
      if (list === undefined) idle.set(connection.key, [connection]);
      else list.push(connection);
    },
    close(): void {
      clearInterval(sweeper);
      for (const connection of all) connection.destroy();
      all.clear();
      idle.clear();
    },
  };
}
