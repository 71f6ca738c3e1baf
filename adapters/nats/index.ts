import type { JetStreamClient } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import type { DestinationContext, WebhookCall, WebhookDestination, WebhookTransport } from '../../src/ports.js';
import {
  type BrokerConnection,
  BrokerConnections,
  CONNECT_TIMEOUT_MS,
  IDLE_CLOSE_MS,
  acknowledged,
  brokerAddress,
  failed,
  subjectToken,
  withDeadline,
} from '../shared/broker.js';

type Modules = [typeof import('@nats-io/transport-node'), typeof import('@nats-io/jetstream')];

export interface NatsDestinationOptions {
  /** A connection no call used for this long is closed (default 60000). */
  idleMs?: number;
}

/** A subject's tokens: no wildcards, no whitespace, no empty token. */
const SUBJECT = /^[^\s.*>]+(\.[^\s.*>]+)*$/;
const MAX_SUBJECT = 255;

/** The subject a `nats://host:port/subject` URL publishes to, or what is wrong with it. */
function subjectOf(url: URL): string | { problem: string } {
  if (url.host === '') return { problem: 'must name the NATS server host' };
  let subject: string;
  try {
    subject = decodeURIComponent(url.pathname.slice(1));
  } catch {
    return { problem: 'must name its subject in percent-encoded UTF-8' };
  }
  if (subject === '') return { problem: 'must name the subject as its path: nats://host:4222/orders.events' };
  if (subject.length > MAX_SUBJECT) return { problem: `must name a subject of at most ${MAX_SUBJECT} characters` };
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
  let loaded: Promise<Modules> | undefined;
  const load = () =>
    (loaded ??= Promise.all([import('@nats-io/transport-node'), import('@nats-io/jetstream')]).catch(
      (error: unknown) => {
        loaded = undefined;
        throw new Error(
          `the packages @nats-io/transport-node and @nats-io/jetstream are not installed (${(error as Error).message})`,
        );
      },
    ));

  return {
    schemes: ['nats'],
    check(url) {
      const subject = subjectOf(url);
      return typeof subject === 'string' ? null : subject.problem;
    },
    open(context: DestinationContext): WebhookTransport {
      const connections = new BrokerConnections<NatsConnectionEntry>(options.idleMs ?? IDLE_CLOSE_MS);

      async function connect(url: URL, timeoutMs: number): Promise<NatsConnectionEntry> {
        const connectMs = Math.min(CONNECT_TIMEOUT_MS, timeoutMs);
        const [[nats, jetstream], address] = await Promise.all([load(), brokerAddress(url, 4222, context)]);
        const user = decodeURIComponent(url.username);
        const pass = decodeURIComponent(url.password);
        const opening = nats.connect({
          servers: `${address.host.includes(':') ? `[${address.host}]` : address.host}:${address.port}`,
          ...(user !== '' && pass === '' ? { token: user } : {}),
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
      }

      async function publish(entry: NatsConnectionEntry, subject: string, call: WebhookCall, timeoutMs: number) {
        const [nats] = await load();
        const carried = nats.headers();
        for (const [name, value] of Object.entries(call.headers)) carried.set(name, value);
        const target = call.orderingKey === undefined ? subject : `${subject}.${subjectToken(call.orderingKey)}`;
        try {
          await entry.js.publish(target, call.body, {
            msgID: call.headers['webhook-id'],
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
      }

      return {
        async send(call, { timeoutMs, signal }) {
          const url = new URL(call.url);
          const subject = subjectOf(url);
          if (typeof subject !== 'string') return failed('nats', new Error(`the URL ${subject.problem}`), url);
          const key = `${url.username}:${url.password}@${url.host}`;
          try {
            await withDeadline(
              connections.use(
                call.accountId,
                key,
                () => connect(url, timeoutMs),
                (entry) => publish(entry, subject, call, timeoutMs),
              ),
              timeoutMs,
              'for JetStream to acknowledge the message',
              signal,
            );
            return acknowledged();
          } catch (error) {
            return failed('nats', error, url);
          }
        },
        close: () => connections.close(),
      };
    },
  };
}
