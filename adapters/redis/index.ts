import type { WebhookCall, WebhookDestination } from '../../src/ports.js';
import {
  type BrokerConnection,
  type UrlProblem,
  pathNameOf,
  peer,
  pooledDestination,
  withDeadline,
} from '../shared/broker.js';

/** What the destination asks of a client. */
interface StreamClient {
  readonly isReady: boolean;
  destroy(): void;
  xAddNoMkStream(stream: string, id: string, entry: Record<string, string>): Promise<string | null>;
}

export interface RedisDestinationOptions {
  /** A connection no call used for this long is closed (default 60000). */
  idleMs?: number;
}

/** The databases a URL may pick with `?db=N`: Redis's own bound is its `databases` setting (16 by default). */
const MAX_DB = 65_535;
/** A stream's name is the URL's path; Redis keys may be long, a webhook URL may not. */
const MAX_STREAM_LENGTH = 512;

const load = peer('the package @redis/client is', () => import('@redis/client'));

/** Where a `redis://` URL publishes: the stream its path names, in the database `?db=N` picks. */
interface Target {
  stream: string;
  db: number;
}

/** The stream and database of a URL, or what is wrong with it. */
function targetOf(url: URL): Target | UrlProblem {
  const stream = pathNameOf(url, 'stream', MAX_STREAM_LENGTH, 'redis://host:6379/stream');
  if (typeof stream !== 'string') return stream;
  let db = 0;
  for (const [name, value] of url.searchParams) {
    if (name !== 'db') return { problem: `must not carry the option ${name}: only db is known` };
    if (!/^\d{1,5}$/.test(value) || Number(value) > MAX_DB)
      return { problem: `must pick a database from 0 to ${MAX_DB} with db` };
    db = Number(value);
  }
  if (url.hash !== '') return { problem: 'must not carry a fragment' };
  return { stream, db };
}

/** The fields of a stream entry: `body` first, then one per header, then `ordering-key` when the event has one. */
function entryOf(call: WebhookCall): Record<string, string> {
  const entry: Record<string, string> = { body: call.body, ...call.headers };
  if (call.orderingKey !== undefined) entry['ordering-key'] = call.orderingKey;
  return entry;
}

class RedisConnection implements BrokerConnection {
  constructor(readonly client: StreamClient) {}
  get usable(): boolean {
    return this.client.isReady;
  }
  async close(): Promise<void> {
    this.client.destroy();
  }
}

/**
 * A destination that appends each call to a Redis stream (`XADD`), for webhook URLs
 * `redis://user:pass@host:6379/stream?db=N` and `rediss://` (TLS). The entry holds `body` (the HTTP
 * body, byte for byte) and one field per header (`webhook-id`, `webhook-timestamp`,
 * `webhook-signature`, …), and `ordering-key` when the event has one; `XADD`'s answer is the
 * acknowledgement. The stream must exist (`NOMKSTREAM`): a missing one is a failed attempt naming
 * it. Needs the optional peer `@redis/client`.
 */
export function redisDestination(options: RedisDestinationOptions = {}): WebhookDestination {
  return pooledDestination<Target, RedisConnection>({
    kind: 'redis',
    schemes: ['redis', 'rediss'],
    targetOf,
    connectionKey: (url, target) => `${url.protocol}//${url.username}:${url.password}@${url.host}/${target.db}`,
    defaultPort: () => 6379,
    async connect(url, target, address, connectMs) {
      const { createClient } = await load();
      const client = createClient({
        socket: {
          host: address.host,
          port: address.port,
          connectTimeout: connectMs,
          // A dropped connection is not redialled in the background: the next call opens another.
          reconnectStrategy: false,
          ...(url.protocol === 'rediss:' ? { tls: true as const, servername: address.servername } : {}),
        },
        ...(url.username === '' ? {} : { username: decodeURIComponent(url.username) }),
        ...(url.password === '' ? {} : { password: decodeURIComponent(url.password) }),
        database: target.db,
        disableOfflineQueue: true,
        commandsQueueMaxLength: 10_000,
      });
      // Every failure reaches the command that meets it; the event would otherwise end the process.
      client.on('error', () => {});
      try {
        // The handshake too (HELLO, AUTH, SELECT): a server that accepts and stays silent must not hold the connection open.
        await withDeadline(client.connect(), connectMs, 'for Redis to accept the connection');
      } catch (error) {
        client.destroy();
        throw error;
      }
      return new RedisConnection(client);
    },
    async publish(connection, target, call) {
      const id = await connection.client.xAddNoMkStream(target.stream, '*', entryOf(call));
      if (id === null) throw new Error(`the stream ${target.stream} does not exist`);
    },
    waitingFor: 'for Redis to append the entry',
    ...(options.idleMs === undefined ? {} : { idleMs: options.idleMs }),
  });
}
