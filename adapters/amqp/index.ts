import type { ChannelModel, ConfirmChannel, Message } from 'amqplib';
import type { WebhookCall, WebhookDestination } from '../../src/ports.js';
import {
  type BrokerConnection,
  type UrlProblem,
  fittedKey,
  pathNameOf,
  peer,
  pooledDestination,
  withDeadline,
} from '../shared/broker.js';

const load = peer('the package amqplib is', () => import('amqplib'));

export interface AmqpDestinationOptions {
  /** A connection no call used for this long is closed (default 60000). */
  idleMs?: number;
}

/** The largest frame the broker may send this client (AMQP's own minimum is 4096): a hostile broker cannot make it buffer more at once. */
const FRAME_MAX = 131_072;
/** Channels one connection keeps, one per exchange published to; past it the least recently used closes. */
const CHANNELS_PER_CONNECTION = 16;
/** Names AMQP 0-9-1 bounds (short strings). */
const MAX_NAME = 255;

/** Where an `amqp://` URL publishes: the exchange (`''`, the default exchange, routes by queue name) and the routing key. */
interface Target {
  vhost: string;
  exchange: string;
  routingKey: string;
}

function targetOf(url: URL): Target | UrlProblem {
  const vhost = pathNameOf(url, 'vhost', MAX_NAME);
  if (typeof vhost !== 'string') return vhost;
  let exchange = '';
  let routingKey = '';
  for (const [name, value] of url.searchParams) {
    if (name === 'exchange') exchange = value;
    else if (name === 'routingKey') routingKey = value;
    else return { problem: `must not carry the option ${name}: only exchange and routingKey are known` };
  }
  if (exchange === '' && routingKey === '')
    return { problem: 'must name an exchange, a routing key or both: amqp://host/vhost?exchange=X&routingKey=Y' };
  for (const [what, value] of [
    ['exchange', exchange],
    ['routingKey', routingKey],
  ] as const) {
    const most = what === 'routingKey' ? MAX_URL_ROUTING_KEY : MAX_NAME;
    if (Buffer.byteLength(value) > most) return { problem: `must name a ${what} of at most ${most} bytes` };
  }
  if (url.hash !== '') return { problem: 'must not carry a fragment' };
  return { vhost: vhost === '' ? '/' : vhost, exchange, routingKey };
}

/** A routing key the URL names: short enough to leave room for an ordering key after it. */
const MAX_URL_ROUTING_KEY = 128;

/**
 * The routing key of a call: the URL's, with the ordering key after a dot, so a topic binding can
 * split keys across queues. A key that would take the routing key past AMQP's 255 bytes is sent as
 * its hash (`fittedKey`).
 */
function routingKeyOf(target: Target, call: WebhookCall): string {
  if (call.orderingKey === undefined) return target.routingKey;
  if (target.routingKey === '') return fittedKey(call.orderingKey, MAX_NAME);
  return `${target.routingKey}.${fittedKey(call.orderingKey, MAX_NAME - Buffer.byteLength(target.routingKey) - 1)}`;
}

/** A connection with a confirm channel per exchange: a channel error (a missing exchange) closes one exchange's channel, not the others'. */
class AmqpConnection implements BrokerConnection {
  #open = true;
  readonly #channels = new Map<string, Promise<ConfirmChannel>>();
  /** Publishes awaiting their confirm, by signature: only their returns are kept. */
  readonly #outstanding = new Map<string, number>();
  /** Those of them the broker returned as unroutable: their confirm is then no delivery. */
  readonly #returned = new Set<string>();
  /** Why the broker closed a channel, for the publishes it failed. */
  readonly #closedBy = new WeakMap<ConfirmChannel, Error>();

  constructor(readonly model: ChannelModel) {
    model.on('error', () => {});
    model.on('close', () => {
      this.#open = false;
    });
  }

  get usable(): boolean {
    return this.#open;
  }

  async publish(target: Target, call: WebhookCall): Promise<void> {
    const channel = await this.#channel(target.exchange);
    const routingKey = routingKeyOf(target, call);
    const mark = call.headers['webhook-signature'] ?? '';
    this.#outstanding.set(mark, (this.#outstanding.get(mark) ?? 0) + 1);
    /** Whether the broker returned it; what was kept for it goes once no publish of the mark waits. */
    const settle = (): boolean => {
      const returned = this.#returned.has(mark);
      const left = (this.#outstanding.get(mark) ?? 1) - 1;
      if (left > 0) this.#outstanding.set(mark, left);
      else {
        this.#outstanding.delete(mark);
        this.#returned.delete(mark);
      }
      return returned;
    };
    await new Promise<void>((resolve, reject) => {
      channel.publish(
        target.exchange,
        routingKey,
        Buffer.from(call.body),
        {
          // Returned (basic.return, before the confirm) when no queue is bound for the key: not delivered.
          mandatory: true,
          persistent: true,
          contentType: 'application/json',
          messageId: call.headers['webhook-id'],
          timestamp: Number(call.headers['webhook-timestamp']),
          headers: call.headers,
        },
        (error: unknown) => {
          // The broker's reason (404 NOT_FOUND - no exchange …) reaches the channel's error event,
          // which may come after this callback hears only that the channel closed.
          const returned = settle();
          if (error) return setImmediate(() => reject(this.#closedBy.get(channel) ?? error));
          if (returned)
            return reject(
              new Error(
                `no queue is bound to the exchange ${target.exchange || '(default)'} for the routing key ${routingKey}`,
              ),
            );
          resolve();
        },
      );
    });
  }

  #channel(exchange: string): Promise<ConfirmChannel> {
    let channel = this.#channels.get(exchange);
    if (channel !== undefined) {
      // Most recently used last, so the first is the one to close.
      this.#channels.delete(exchange);
      this.#channels.set(exchange, channel);
      return channel;
    }
    if (this.#channels.size >= CHANNELS_PER_CONNECTION) {
      const [oldest, closing] = this.#channels.entries().next().value as [string, Promise<ConfirmChannel>];
      this.#channels.delete(oldest);
      void closing.then((one) => one.close()).catch(() => {});
    }
    channel = this.model.createConfirmChannel().then((made) => {
      made.on('error', (error: Error) => this.#closedBy.set(made, error));
      made.on('close', () => {
        if (this.#channels.get(exchange) === channel) this.#channels.delete(exchange);
      });
      made.on('return', (message: Message) => {
        // amqplib gives a header's string as a string or as bytes, as the broker encoded it.
        const header: unknown = message.properties.headers?.['webhook-signature'];
        const signature = Buffer.isBuffer(header) ? header.toString('utf8') : header;
        // A return for no publish of ours is the broker's to keep: nothing is held for it.
        if (typeof signature === 'string' && this.#outstanding.has(signature)) this.#returned.add(signature);
      });
      return made;
    });
    channel.catch(() => {
      if (this.#channels.get(exchange) === channel) this.#channels.delete(exchange);
    });
    this.#channels.set(exchange, channel);
    return channel;
  }

  async close(): Promise<void> {
    this.#open = false;
    await this.model.close().catch(() => {});
  }
}

/**
 * A destination that publishes each call to a RabbitMQ (AMQP 0-9-1) exchange, for webhook URLs
 * `amqp://user:pass@host:5672/vhost?exchange=X&routingKey=Y` and `amqps://` (TLS). The message is
 * the HTTP body with the call's headers as AMQP headers (`webhook-id`, `webhook-timestamp`,
 * `webhook-signature`, …), persistent, `messageId` the event id; an ordering key is appended to the
 * routing key (`Y.key`). The publisher confirm is the acknowledgement; a message no queue takes
 * (`mandatory`) and a missing exchange are failed attempts naming why. The exchange must exist: it
 * is never declared. Needs the optional peer `amqplib`.
 */
export function amqpDestination(options: AmqpDestinationOptions = {}): WebhookDestination {
  return pooledDestination<Target, AmqpConnection>({
    kind: 'amqp',
    schemes: ['amqp', 'amqps'],
    targetOf,
    connectionKey: (url, target) => `${url.protocol}//${url.username}:${url.password}@${url.host}/${target.vhost}`,
    defaultPort: (url) => (url.protocol === 'amqps:' ? 5671 : 5672),
    async connect(url, target, address, connectMs) {
      const tls = url.protocol === 'amqps:';
      const amqp = await load();
      const opening = amqp.connect(
        {
          protocol: tls ? 'amqps' : 'amqp',
          hostname: address.host,
          port: address.port,
          username: url.username === '' ? 'guest' : decodeURIComponent(url.username),
          password: url.password === '' ? 'guest' : decodeURIComponent(url.password),
          vhost: target.vhost,
          frameMax: FRAME_MAX,
          heartbeat: 30,
          channelMax: CHANNELS_PER_CONNECTION + 1,
        },
        { timeout: connectMs, ...(tls ? { servername: address.servername } : {}) },
      );
      // The handshake is bounded too: a broker that accepts and stays silent holds nothing open.
      const model = await withDeadline(opening, connectMs, 'for the AMQP broker to accept the connection').catch(
        (error: unknown) => {
          void opening.then((late) => late.close()).catch(() => {});
          throw error;
        },
      );
      return new AmqpConnection(model);
    },
    publish: (connection, target, call) => connection.publish(target, call),
    waitingFor: 'for the AMQP broker to confirm the message',
    ...(options.idleMs === undefined ? {} : { idleMs: options.idleMs }),
  });
}
