import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import type { BrokerKind, BrokerRun, Consumed, Consumer } from './brokers.js';
import { hasCommand, hasPackage } from './brokers.js';

const run = promisify(execFile);
const HOST = '127.0.0.1';
const PORT = 5672;
const ADMIN_URL = `amqp://guest:guest@${HOST}:${PORT}`;
/** Every exchange and queue the tests make carries this prefix and the run's own mark. */
const prefix = `portal-test-${process.pid}`;

/** A header value as amqplib decodes it: strings, or bytes for long strings. */
const text = (value: unknown): string => (Buffer.isBuffer(value) ? value.toString('utf8') : String(value));

/**
 * RabbitMQ: the machine's broker (guest/guest on 5672); a restart is `rabbitmqctl stop_app` and
 * `start_app`. Each target is a durable topic exchange with a durable queue bound to `#`, so
 * persistent messages outlive the restart.
 */
export const amqpBroker: BrokerKind = {
  name: 'amqp',
  async absent() {
    if (!(await hasPackage('amqplib'))) return 'the package amqplib is not installed';
    try {
      const amqp = await import('amqplib');
      const model = await amqp.connect(ADMIN_URL, { timeout: 2000 });
      await model.close();
    } catch (error) {
      return `no RabbitMQ answers at ${HOST}:${PORT} (${(error as Error).message})`;
    }
    if (!hasCommand('rabbitmqctl')) return 'rabbitmqctl is not installed (the restarts need it)';
    return null;
  },
  async destinations() {
    const { amqpDestination } = await import('../../adapters/amqp/index.js');
    return { amqp: amqpDestination() };
  },
  async start(): Promise<BrokerRun> {
    const amqp = await import('amqplib');
    const made = new Set<string>();
    const admin = async <T>(work: (channel: import('amqplib').Channel) => Promise<T>): Promise<T> => {
      const model = await amqp.connect(ADMIN_URL);
      try {
        return await work(await model.createChannel());
      } finally {
        await model.close().catch(() => {});
      }
    };
    return {
      host: HOST,
      port: PORT,
      url: (target, credentials = { user: 'guest', password: 'guest' }) =>
        `amqp://${encodeURIComponent(credentials.user)}:${encodeURIComponent(credentials.password)}@${HOST}:${PORT}/?exchange=${prefix}-${target}&routingKey=events`,
      async prepare(target) {
        const name = `${prefix}-${target}`;
        made.add(name);
        await admin(async (channel) => {
          await channel.assertExchange(name, 'topic', { durable: true });
          await channel.assertQueue(name, { durable: true });
          await channel.purgeQueue(name);
          await channel.bindQueue(name, name, '#');
        });
      },
      async consume(target): Promise<Consumer> {
        const name = `${prefix}-${target}`;
        const messages: Consumed[] = [];
        let stopped = false;
        let model: import('amqplib').ChannelModel | undefined;
        const loop = (async () => {
          while (!stopped) {
            try {
              model = await amqp.connect(ADMIN_URL);
              const closed = new Promise<void>((resolve) => {
                model!.on('close', () => resolve());
                model!.on('error', () => {});
              });
              const channel = await model.createChannel();
              channel.on('error', () => {});
              await channel.consume(name, (message) => {
                if (message === null) return;
                const headers: Record<string, string> = {};
                for (const [header, value] of Object.entries(message.properties.headers ?? {}))
                  headers[header] = text(value);
                const key = message.fields.routingKey;
                messages.push({
                  body: message.content.toString('utf8'),
                  headers,
                  orderingKey: key.startsWith('events.') ? key.slice('events.'.length) : undefined,
                });
                channel.ack(message);
              });
              await closed;
            } catch {
              await new Promise((resolve) => setTimeout(resolve, 200));
            }
          }
        })();
        return {
          messages,
          async stop() {
            stopped = true;
            await model?.close().catch(() => {});
            await loop;
          },
        };
      },
      async restart() {
        await run('rabbitmqctl', ['stop_app'], { timeout: 60_000 });
        await run('rabbitmqctl', ['start_app'], { timeout: 60_000 });
      },
      async stop() {
        await admin(async (channel) => {
          for (const name of made) {
            await channel.deleteQueue(name).catch(() => {});
            await channel.deleteExchange(name).catch(() => {});
          }
        }).catch(() => {});
      },
    };
  },
};
