import type { JetStreamClient } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import type { WebhookDestination } from '../../src/ports.js';
import {
  type BrokerConnection,
  type UrlProblem,
  pathNameOf,
  peer,
  pooledDestination,
  subjectToken,
  withDeadline,
} from '../shared/broker.js';

const load = peer('the packages @nats-io/transport-node and @nats-io/jetstream are', () =>
  Promise.all([import('@nats-io/transport-node'), import('@nats-io/jetstream')]),
);
type Modules = Awaited<ReturnType<typeof load>>;

export interface NatsDestinationOptions {
  /** A connection no call used for this long is closed (default 60000). */
  idleMs?: number;
}

/** A subject's tokens: no wildcards, no whitespace, no empty token. */
const SUBJECT = /^[^\s.*>]+(\.[^\s.*>]+)*$/;
const MAX_SUBJECT = 255;

/** The subject a `nats://host:port/subject` URL publishes to, or what is wrong with it. */
function subjectOf(url: URL): string | UrlProblem {
  const subject = pathNameOf(url, 'subject', MAX_SUBJECT, 'nats://host:4222/orders.events');
  if (typeof subject !== 'string') return subject;
  if (!SUBJECT.test(subject)) return { problem: 'must name a subject without wildcards, spaces or empty tokens' };
  if (url.search !== '' || url.hash !== '') return { problem: 'must not carry a query or a fragment' };
  return subject;
}

class NatsConnectionEntry implements BrokerConnection {
  readonly js: JetStreamClient;
  constructor(
    readonly connection: NatsConnection,
    jetstream: Modules[1]['jetstream'],
  ) {
    this.js = jetstream(connection);
  }
  get usable(): boolean {
    return !this.connection.isClosed();
  }
  async close(): Promise<void> {
    await this.connection.close().catch(() => {});
  }
}

/**
 * A destination that publishes each call to NATS JetStream, for webhook URLs
 * `nats://user:pass@host:4222/subject` (or `nats://token@host:4222/subject`). The message is the HTTP
 * body with the call's headers as NATS headers; `Nats-Msg-Id` is the event id (`webhook-id`), so a
 * retry after a lost acknowledgement is dropped by the stream's duplicate window. An ordering key
 * is a last subject token (`subject.key`, percent-encoded where NATS would read it as a wildcard or
 * separator). The JetStream acknowledgement is the only success; a subject no stream takes is a
 * failed attempt naming it. Streams are never created. Needs the optional peers
 * `@nats-io/transport-node` and `@nats-io/jetstream`.
 */
export function natsDestination(options: NatsDestinationOptions = {}): WebhookDestination {
  return pooledDestination<string, NatsConnectionEntry>({
    kind: 'nats',
    schemes: ['nats'],
    targetOf: subjectOf,
    connectionKey: (url) => `${url.username}:${url.password}@${url.host}`,
    defaultPort: () => 4222,
    async connect(url, _subject, address, connectMs) {
      const [nats, jetstream] = await load();
      const user = decodeURIComponent(url.username);
      const pass = decodeURIComponent(url.password);
      const opening = nats.connect({
        servers: `${address.host.includes(':') ? `[${address.host}]` : address.host}:${address.port}`,
        // nats://token@host, and nats://:token@host as some clients write it.
        ...(user !== '' && pass === '' ? { token: user } : {}),
        ...(user === '' && pass !== '' ? { token: pass } : {}),
        ...(user !== '' && pass !== '' ? { user, pass } : {}),
        name: 'customer-portal',
        timeout: connectMs,
        // One server, the one the guard passed: no redial in the background, no server the cluster gossips.
        reconnect: false,
        ignoreClusterUpdates: true,
        noEcho: true,
      });
      const connection = await withDeadline(opening, connectMs, 'for the NATS server to accept the connection').catch(
        (error: unknown) => {
          void opening.then((late) => late.close()).catch(() => {});
          throw error;
        },
      );
      return new NatsConnectionEntry(connection, jetstream.jetstream);
    },
    async publish(entry, subject, call, timeoutMs) {
      const [nats] = await load();
      const carried = nats.headers();
      for (const [name, value] of Object.entries(call.headers)) carried.set(name, value);
      const target = call.orderingKey === undefined ? subject : `${subject}.${subjectToken(call.orderingKey)}`;
      try {
        await entry.js.publish(target, call.body, {
          // The webhook and the event: two webhooks of an account may publish one event into one stream.
          msgID: `${call.webhookId}:${call.headers['webhook-id']}`,
          headers: carried,
          timeout: timeoutMs,
          retries: 0,
        });
      } catch (error) {
        // Nothing answers a publish no stream captures: the client calls that "jetstream is not enabled".
        const name = (error as Error).name;
        if (error instanceof nats.NoRespondersError || name === 'NoRespondersError' || name === 'JetStreamNotEnabled')
          throw new Error(`no JetStream stream takes the subject ${target}`);
        throw error;
      }
    },
    waitingFor: 'for JetStream to acknowledge the message',
    ...(options.idleMs === undefined ? {} : { idleMs: options.idleMs }),
  });
}
