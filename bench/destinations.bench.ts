/**
 * Destinations beyond HTTP: deliveries a second and the portal's CPU a delivery for each broker
 * (the machine's RabbitMQ, NATS with JetStream, Mosquitto and Redis; SQS on moto when installed),
 * beside the HTTP transport to a local receiver in its own process, in the same run. One account,
 * one webhook, memory storage, 32 calls in flight; `BENCH_DESTINATION_EVENTS` events (5,000) are
 * published 100 at a time and timed from the first publish to the last acknowledgement. The
 * brokers' own CPU is theirs, as the receiver's is: the figure is what the portal spends.
 *
 *   npm run build:bench && node dist/bench/destinations.bench.js
 */
import { type ChildProcess, fork, spawn } from 'node:child_process';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { memoryStorage } from '../adapters/memory/index.js';
import { httpTransport } from '../adapters/http-transport/index.js';
import { createPortal } from '../src/index.js';
import type { Destinations, WebhookDestination, WebhookTransport } from '../src/index.js';
import { REPORTED, emit } from './support/row.js';

const EVENTS = Number(process.env.BENCH_DESTINATION_EVENTS ?? 5000);
const ACCOUNT = 'acct_bench';

/** Counts acknowledged calls, and resolves once `EVENTS` are. */
function counting(total = EVENTS): { wrap(transport: WebhookTransport): WebhookTransport; done: Promise<void> } {
  let acknowledged = 0;
  let resolve = () => {};
  const done = new Promise<void>((ok) => (resolve = ok));
  return {
    done,
    wrap: (transport) => ({
      async send(call, options) {
        const result = await transport.send(call, options);
        if (result.error === null && (result.statusCode === null || result.statusCode < 300))
          if (++acknowledged === total) resolve();
        return result;
      },
      close: () => transport.close?.() ?? Promise.resolve(),
    }),
  };
}

interface Measured {
  perSecond: number;
  cpuUs: number;
}

/** Publishes `EVENTS` to one webhook at `url` and times them until the last is acknowledged. */
async function measure(
  url: string,
  options: { transport?: WebhookTransport; destinations?: Destinations },
  total = EVENTS,
): Promise<Measured> {
  const portal = await createPortal({
    storage: memoryStorage(),
    auth: { apiKeys: { 'a-bench-api-key-of-the-account': ACCOUNT } },
    signingKeys: ['a bench signing key of at least thirty-two characters'],
    webhooks: { allowPrivateNetworks: true, concurrency: 32, concurrencyPerAccount: 32, timeoutMs: 10_000 },
    ...options,
  });
  try {
    await portal.webhooks.create(ACCOUNT, { type: 'customer-created', url });
    return await timed(portal, total);
  } finally {
    await portal.close();
  }
}

async function timed(portal: Awaited<ReturnType<typeof createPortal>>, total: number): Promise<Measured> {
  const cpu = process.cpuUsage();
  const started = performance.now();
  for (let n = 0; n < total; n += 100)
    await Promise.all(
      Array.from({ length: Math.min(100, total - n) }, (_, i) =>
        portal.events.publish(ACCOUNT, 'customer-created', { n: n + i, name: 'Grace Hopper', tier: 'gold' }),
      ),
    );
  await current!.done;
  const seconds = (performance.now() - started) / 1000;
  const used = process.cpuUsage(cpu);
  return { perSecond: total / seconds, cpuUs: (used.user + used.system) / total };
}

let current: ReturnType<typeof counting> | undefined;

/** Wraps a destination so its acknowledgements are counted. */
function counted(destination: WebhookDestination): WebhookDestination {
  return { ...destination, open: (context) => current!.wrap(destination.open(context)) };
}

/** A receiver answering 204 at once, in its own process: the HTTP baseline. */
async function receiver(): Promise<{ url: string; child: ChildProcess }> {
  const child = fork(fileURLToPath(import.meta.url), ['receiver'], { stdio: ['ignore', 'ignore', 'inherit', 'ipc'] });
  const port = await new Promise<number>((resolve) => child.once('message', (message) => resolve(message as number)));
  return { url: `http://127.0.0.1:${port}/hooks`, child };
}

interface Broker {
  name: string;
  /** Events to time, when fewer than `BENCH_DESTINATION_EVENTS`: a slow stand-in. */
  events?: number;
  /** Makes the target and answers its URL, or why the broker cannot be benched here. */
  prepare(): Promise<{ url: string; destinations: Destinations; cleanup(): Promise<void> } | string>;
}

const STREAM = `portal-bench-${process.pid}`;

const BROKERS: Broker[] = [
  {
    name: 'amqp (RabbitMQ, publisher confirms)',
    async prepare() {
      try {
        const amqp = await import('amqplib');
        const model = await amqp.connect('amqp://guest:guest@127.0.0.1:5672', { timeout: 2000 });
        const channel = await model.createChannel();
        await channel.assertExchange(STREAM, 'topic', { durable: true });
        await channel.assertQueue(STREAM, { durable: true });
        await channel.bindQueue(STREAM, STREAM, '#');
        const { amqpDestination } = await import('../adapters/amqp/index.js');
        return {
          url: `amqp://guest:guest@127.0.0.1:5672/?exchange=${STREAM}&routingKey=events`,
          destinations: { amqp: counted(amqpDestination()) },
          async cleanup() {
            await channel.deleteQueue(STREAM);
            await channel.deleteExchange(STREAM);
            await model.close();
          },
        };
      } catch (error) {
        return `RabbitMQ does not answer on 5672 (${(error as Error).message})`;
      }
    },
  },
  {
    name: 'nats (JetStream ack)',
    async prepare() {
      try {
        const nats = await import('@nats-io/transport-node');
        const { jetstreamManager } = await import('@nats-io/jetstream');
        const connection = await nats.connect({ servers: '127.0.0.1:4222', timeout: 2000 });
        const manager = await jetstreamManager(connection);
        await manager.streams.add({ name: STREAM, subjects: [STREAM, `${STREAM}.>`] });
        const { natsDestination } = await import('../adapters/nats/index.js');
        return {
          url: `nats://127.0.0.1:4222/${STREAM}`,
          destinations: { nats: counted(natsDestination()) },
          async cleanup() {
            await manager.streams.delete(STREAM);
            await connection.close();
          },
        };
      } catch (error) {
        return `NATS with JetStream does not answer on 4222 (${(error as Error).message})`;
      }
    },
  },
  {
    name: 'mqtt (Mosquitto, QoS 1)',
    async prepare() {
      try {
        const mqtt = await import('mqtt');
        const probe = await mqtt.connectAsync('mqtt://127.0.0.1:1883', { connectTimeout: 2000, reconnectPeriod: 0 });
        await probe.endAsync();
        const { mqttDestination } = await import('../adapters/mqtt/index.js');
        return {
          url: `mqtt://127.0.0.1:1883/${STREAM}`,
          destinations: { mqtt: counted(mqttDestination()) },
          async cleanup() {},
        };
      } catch (error) {
        return `Mosquitto does not answer on 1883 (${(error as Error).message})`;
      }
    },
  },
  {
    name: 'redis (stream, XADD)',
    async prepare() {
      try {
        const { createClient } = await import('@redis/client');
        const client = createClient({ socket: { host: '127.0.0.1', port: 6379, reconnectStrategy: false } });
        client.on('error', () => {});
        await client.connect();
        await client.xGroupCreate(STREAM, 'bench', '$', { MKSTREAM: true });
        const { redisDestination } = await import('../adapters/redis/index.js');
        return {
          url: `redis://127.0.0.1:6379/${STREAM}`,
          destinations: { redis: counted(redisDestination()) },
          async cleanup() {
            await client.del(STREAM);
            client.destroy();
          },
        };
      } catch (error) {
        return `Redis does not answer on 6379 (${(error as Error).message})`;
      }
    },
  },
  {
    name: 'sqs (moto, a stand-in: not SQS speed)',
    events: 200,
    async prepare() {
      let child: ChildProcess;
      try {
        const { SQSClient, CreateQueueCommand } = await import('@aws-sdk/client-sqs');
        const port = 45_000 + (process.pid % 1000);
        child = spawn('moto_server', ['-H', '127.0.0.1', '-p', String(port)], { stdio: 'ignore' });
        await new Promise((resolve, reject) => {
          child.once('spawn', resolve);
          child.once('error', reject);
        });
        const until = Date.now() + 20_000;
        while (
          !(await fetch(`http://127.0.0.1:${port}/moto-api/`).then(
            () => true,
            () => false,
          ))
        ) {
          if (Date.now() > until) throw new Error('moto_server did not answer');
          await new Promise((resolve) => setTimeout(resolve, 100));
        }
        const client = new SQSClient({
          endpoint: `http://127.0.0.1:${port}`,
          region: 'us-east-1',
          credentials: { accessKeyId: 'bench', secretAccessKey: 'bench' },
          useQueueUrlAsEndpoint: false,
        });
        await client.send(new CreateQueueCommand({ QueueName: STREAM }));
        const { sqsDestination } = await import('../adapters/sqs/index.js');
        return {
          url: `sqs://127.0.0.1:${port}/123456789012/${STREAM}`,
          destinations: { sqs: counted(sqsDestination({ client })) },
          async cleanup() {
            client.destroy();
            child.kill();
          },
        };
      } catch (error) {
        return `moto_server cannot be started (${(error as Error).message})`;
      }
    },
  },
];

async function main(): Promise<void> {
  const { url, child } = await receiver();
  current = counting();
  const baseline = await measure(url, { transport: current.wrap(httpTransport({ allowPrivateNetworks: true })) });
  child.kill();
  console.log(
    `  destinations: http to a local receiver ${baseline.perSecond.toFixed(0)} deliveries/s, ${baseline.cpuUs.toFixed(0)} µs of portal CPU a delivery (${EVENTS} events)`,
  );
  for (const broker of BROKERS) {
    const prepared = await broker.prepare();
    if (typeof prepared === 'string') {
      console.log(`  destinations: ${broker.name} skipped: ${prepared}`);
      continue;
    }
    const total = Math.min(EVENTS, broker.events ?? EVENTS);
    current = counting(total);
    try {
      const figure = await measure(prepared.url, { destinations: prepared.destinations }, total);
      console.log(
        `  destinations: ${broker.name} ${figure.perSecond.toFixed(0)} deliveries/s, ${figure.cpuUs.toFixed(0)} µs of portal CPU a delivery`,
      );
      emit({
        scenario: `destination ${broker.name}: deliveries/s, ${total} events, one webhook`,
        figure: Math.round(figure.perSecond),
        unit: 'deliveries/s',
        baselineName: 'http to a local receiver',
        baseline: Math.round(baseline.perSecond),
        ratio: figure.perSecond / baseline.perSecond,
        target: REPORTED,
        holds: true,
      });
      emit({
        scenario: `destination ${broker.name}: portal CPU a delivery`,
        figure: Math.round(figure.cpuUs),
        unit: 'µs',
        baselineName: 'http to a local receiver',
        baseline: Math.round(baseline.cpuUs),
        ratio: baseline.cpuUs / figure.cpuUs,
        target: REPORTED,
        holds: true,
      });
    } finally {
      await prepared.cleanup().catch(() => {});
    }
  }
}

if (process.argv[2] === 'receiver') {
  const server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.statusCode = 204;
      res.end();
    });
  });
  server.listen(0, '127.0.0.1', () => process.send!((server.address() as AddressInfo).port));
  process.on('disconnect', () => process.exit(0));
} else {
  await main();
}
