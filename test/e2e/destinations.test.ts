import net from 'node:net';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { callBody } from '../../src/webhooks/call.js';
import { verifyWebhook } from '../../src/index.js';
import type { EventRecord } from '../../src/records.js';
import { amqpBroker } from '../helpers/broker-amqp.js';
import { mqttBroker } from '../helpers/broker-mqtt.js';
import { natsBroker } from '../helpers/broker-nats.js';
import { redisBroker } from '../helpers/broker-redis.js';
import { sqsBroker } from '../helpers/broker-sqs.js';
import type { BrokerKind, BrokerRun, Consumer } from '../helpers/brokers.js';
import { skipping } from '../helpers/skip.js';
import { json, withPortal } from '../helpers/server.js';
import { waitFor } from '../helpers/webhooks.js';

/**
 * Every destination beyond HTTP against a broker of its kind: what the consumer reads (the body byte
 * for byte, headers `verifyWebhook` accepts, the ordering key), the attempts that fail (a missing
 * target, a wrong password, a refused address, a broker that never answers), and a long run with
 * the broker restarted twice in the middle: nothing lost, each key in order.
 */
const KINDS: BrokerKind[] = [redisBroker, amqpBroker, natsBroker, mqttBroker, sqsBroker];

const LONG_RUN = 10_000;
const KEYS = 20;

/** The deliveries of a webhook, as the log shows them. */
async function deliveriesOf(app: { api(path: string): Promise<Response> }, webhookId: string) {
  const res = await app.api(`/webhooks/${webhookId}/deliveries?limit=100`);
  return (await json(res)).data as {
    status: string;
    attempts: { statusCode: number | null; error: string | null }[];
  }[];
}

/** A TCP server that accepts connections and never says a word. */
async function silentServer() {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.on('error', () => {});
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}

const schemes = suite('destinations: the URL schemes a webhook may have');

schemes(
  'a scheme no destination takes is a 400 naming every scheme taken; http URLs still carry no credentials',
  async () => {
    const create = (app: { api(path: string, init?: RequestInit): Promise<Response> }, url: string) =>
      app.api('/webhooks', {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ type: 'customer-created', url }),
      });
    await withPortal(async (app) => {
      const res = await create(app, 'redis://127.0.0.1:6379/events');
      assert.is(res.status, 400);
      assert.match((await json(res)).message, /url: must use http or https/);
    });
    const { redisDestination } = await import('../../adapters/redis/index.js');
    await withPortal({ destinations: { redis: redisDestination() } }, async (app) => {
      const refused = await create(app, 'amqp://127.0.0.1/');
      assert.is(refused.status, 400);
      assert.match((await json(refused)).message, /url: must use one of the schemes http, https, redis, rediss/);
      const noStream = await create(app, 'redis://127.0.0.1:6379/');
      assert.is(noStream.status, 400);
      assert.match((await json(noStream)).message, /url: must name the stream/);
      const badHost = await create(app, 'redis://a%zz:6379/events');
      assert.match((await json(badHost)).message, /url: must name a valid host/);
      const badDb = await create(app, 'redis://127.0.0.1:6379/events?db=x');
      assert.match((await json(badDb)).message, /url: must pick a database/);
      const credentials = await create(app, 'https://user:pw@example.com/hook');
      assert.match((await json(credentials)).message, /url: must not carry credentials/);
      assert.is((await json(await app.api('/webhooks'))).data.length, 0, 'nothing made');
      const made = await create(app, 'rediss://user:pw@example.com:6380/events?db=2');
      assert.is(made.status, 201);
      assert.is((await json(made)).url, 'rediss://user:***@example.com:6380/events?db=2', 'the password masked');
      const token = await json(await create(app, 'rediss://s3cret-t0ken@example.com:6380/events'));
      assert.is(token.url, 'rediss://***@example.com:6380/events', 'a user without a password is a token: masked too');
    });
  },
);

schemes.run();

for (const kind of KINDS) {
  const absent = await kind.absent();
  const on =
    absent === null ? suite(`destination: ${kind.name}`) : skipping(suite(`destination: ${kind.name}`), absent);
  let broker!: BrokerRun;
  let consumer: Consumer | undefined;
  on.before(async () => {
    if (absent === null) broker = await kind.start();
  });
  on.after.each(async () => {
    await consumer?.stop();
    consumer = undefined;
  });
  on.after(async () => {
    // Unset when the broker did not start: the failure is the hook's, and nothing is left to stop.
    await (broker as BrokerRun | undefined)?.stop();
  });

  on(
    'publishes each event once: the body byte for byte, headers verifyWebhook accepts, the ordering key carried',
    async () => {
      await broker.prepare('first');
      consumer = await broker.consume('first');
      await withPortal(
        { destinations: await kind.destinations(broker), webhooks: { allowPrivateNetworks: true } },
        async (app) => {
          const hook = await app.portal.webhooks.create('acct_a', {
            type: 'customer-created',
            url: broker.url('first'),
          });
          const events: EventRecord[] = [];
          for (let n = 0; n < 20; n++)
            events.push(
              (await app.portal.events.publish(
                'acct_a',
                'customer-created',
                { n, name: 'Zoë ✓' },
                n % 2 === 0 ? { orderingKey: `key-${n % 4}` } : {},
              )) as EventRecord,
            );
          await waitFor(() => consumer!.messages.length >= events.length, `the ${events.length} messages`);
          const byId = new Map(consumer!.messages.map((message) => [message.headers['webhook-id'], message]));
          assert.is(consumer!.messages.length, events.length, 'each once');
          for (const event of events) {
            const message = byId.get(event.id);
            assert.ok(message, `${event.id} consumed`);
            assert.is(message!.body, callBody(event), 'the HTTP body, byte for byte');
            const verified = verifyWebhook(hook.secret!, message!.headers, message!.body);
            assert.is((verified as { id: string }).id, event.id, 'verifyWebhook accepts the headers as consumed');
            assert.is(message!.headers['X-Webhook-Signature'], message!.headers['webhook-signature']);
            assert.is(message!.orderingKey, event.orderingKey, 'the ordering key where the consumer reads it');
          }
          await waitFor(
            async () => (await deliveriesOf(app, hook.id)).every((one) => one.status === 'succeeded'),
            'the log',
          );
          const [first] = await deliveriesOf(app, hook.id);
          assert.equal(first!.attempts.at(-1)!.statusCode, null, "a broker's attempt has no status");
          assert.equal(first!.attempts.at(-1)!.error, null, 'and no error');
          const health = await json(await app.api(`/webhooks/${hook.id}/health`));
          assert.is(health.consecutiveFailures, 0);
        },
      );
    },
  );

  const unless = (reason: string | undefined) => (reason === undefined ? on : skipping(on, reason));
  const declared = unless(kind.inapplicable?.missingTarget);
  declared('a target that does not exist is a failed attempt naming it; nothing is declared', async () => {
    await withPortal(
      {
        destinations: await kind.destinations(broker),
        webhooks: { allowPrivateNetworks: true, retrySchedule: [3600] },
      },
      async (app) => {
        const hook = await app.portal.webhooks.create('acct_a', {
          type: 'customer-created',
          url: broker.url('nowhere'),
        });
        await app.portal.events.publish('acct_a', 'customer-created', { n: 1 });
        await waitFor(async () => (await deliveriesOf(app, hook.id))[0]?.attempts.length === 1, 'the attempt');
        const [delivery] = await deliveriesOf(app, hook.id);
        assert.is(delivery!.status, 'pending', 'retried on the schedule');
        assert.match(delivery!.attempts[0]!.error ?? '', /nowhere/, 'the error names the target');
        const health = await json(await app.api(`/webhooks/${hook.id}/health`));
        assert.is(health.consecutiveFailures, 1, 'a failure of the webhook');
      },
    );
  });

  unless(kind.inapplicable?.credentials)(
    'the password is *** in every answer, and never in the delivery log; a wrong one fails the attempt',
    async () => {
      const secret = 'wr0ng-S3cret%word';
      await withPortal(
        {
          destinations: await kind.destinations(broker),
          webhooks: { allowPrivateNetworks: true, retrySchedule: [3600] },
        },
        async (app) => {
          const url = broker.url('first', { user: 'default', password: secret });
          const res = await app.api('/webhooks', {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify({ type: 'customer-created', url }),
          });
          assert.is(res.status, 201);
          const created = await json(res);
          assert.not.match(JSON.stringify(created), /S3cret/, 'not in the answer to the create');
          assert.match(created.url, /:\*\*\*@/, 'masked as ***');
          const listed = await (await app.api('/webhooks')).text();
          assert.not.match(listed, /S3cret/, 'nor in the list');
          await app.portal.events.publish('acct_a', 'customer-created', { n: 1 });
          await waitFor(async () => (await deliveriesOf(app, created.id))[0]?.attempts.length === 1, 'the attempt');
          const log = await (await app.api(`/webhooks/${created.id}/deliveries`)).text();
          assert.match(log, /"error":"[^"]+"/, 'the attempt failed');
          assert.not.match(log, /S3cret/, 'the log does not show the password');
        },
      );
    },
  );

  on('the SSRF guard: a broker on loopback is refused without allowPrivateNetworks', async () => {
    await broker.prepare('guarded');
    await withPortal(
      { destinations: await kind.destinations(broker), webhooks: { retrySchedule: [3600] } },
      async (app) => {
        const hook = await app.portal.webhooks.create('acct_a', {
          type: 'customer-created',
          url: broker.url('guarded'),
        });
        await app.portal.events.publish('acct_a', 'customer-created', { n: 1 });
        await waitFor(async () => (await deliveriesOf(app, hook.id))[0]?.attempts.length === 1, 'the attempt');
        const [delivery] = await deliveriesOf(app, hook.id);
        assert.match(delivery!.attempts[0]!.error ?? '', /refused to call 127\.0\.0\.1/);
      },
    );
  });

  on('a broker that accepts and never answers: the attempt fails within timeoutMs, the worker goes on', async () => {
    const silent = await silentServer();
    try {
      await withPortal(
        {
          destinations: await kind.destinations(broker, silent.port),
          webhooks: { allowPrivateNetworks: true, timeoutMs: 500, retrySchedule: [3600] },
        },
        async (app) => {
          const url = broker.url('first').replace(`:${broker.port}/`, `:${silent.port}/`);
          const hook = await app.portal.webhooks.create('acct_a', { type: 'customer-created', url });
          const started = Date.now();
          await app.portal.events.publish('acct_a', 'customer-created', { n: 1 });
          await waitFor(async () => (await deliveriesOf(app, hook.id))[0]?.attempts.length === 1, 'the attempt', 5000);
          const [delivery] = await deliveriesOf(app, hook.id);
          assert.match(delivery!.attempts[0]!.error ?? '', /timed out|abandoned/);
          assert.ok(Date.now() - started < 3000, `ended in ${Date.now() - started} ms`);
        },
      );
    } finally {
      await silent.close();
    }
  });

  unless(kind.inapplicable?.flood)(
    'a broker that floods the connection: the attempt fails, the relay or the client ending it first',
    async () => {
      const flood = Buffer.alloc(8 * 1024 * 1024, 0x2a);
      const sockets = new Set<net.Socket>();
      const server = net.createServer((socket) => {
        sockets.add(socket);
        socket.on('error', () => {});
        socket.write(flood);
        socket.on('data', () => socket.write(flood));
      });
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      const port = (server.address() as net.AddressInfo).port;
      try {
        await withPortal(
          {
            destinations: await kind.destinations(broker),
            webhooks: { allowPrivateNetworks: true, retrySchedule: [3600] },
          },
          async (app) => {
            const url = broker.url('first').replace(`:${broker.port}/`, `:${port}/`);
            const hook = await app.portal.webhooks.create('acct_a', { type: 'customer-created', url });
            await app.portal.events.publish('acct_a', 'customer-created', { n: 1 });
            await waitFor(async () => (await deliveriesOf(app, hook.id))[0]?.attempts.length === 1, 'the attempt');
            const [delivery] = await deliveriesOf(app, hook.id);
            // Which ends it first is a race: the relay past its bound, or the client refusing the first
            // bytes it parses (mqtt.js, amqplib's frameMax). The bound itself is test/unit/broker-connections'.
            assert.match(delivery!.attempts[0]!.error ?? '', new RegExp(`^${kind.name}: `), 'a failed attempt');
            assert.is(delivery!.status, 'pending', 'retried on the schedule, never acknowledged');
          },
        );
      } finally {
        for (const socket of sockets) socket.destroy();
        await new Promise<void>((resolve) => server.close(() => resolve()));
      }
    },
  );

  if (kind.name === 'nats')
    on('two webhooks of one account into one stream: both stored, each under its own message id', async () => {
      await broker.prepare('shared');
      consumer = await broker.consume('shared');
      await withPortal(
        { destinations: await kind.destinations(broker), webhooks: { allowPrivateNetworks: true } },
        async (app) => {
          const first = await app.portal.webhooks.create('acct_a', {
            type: 'customer-created',
            url: broker.url('shared'),
          });
          const second = await app.portal.webhooks.create('acct_a', {
            type: 'customer-created',
            url: broker.url('shared'),
          });
          for (let n = 0; n < 5; n++) await app.portal.events.publish('acct_a', 'customer-created', { n });
          await waitFor(() => consumer!.messages.length >= 10, "both webhooks' messages");
          const bySecret = [first.secret!, second.secret!].map(
            (secret) =>
              consumer!.messages.filter((message) => {
                try {
                  verifyWebhook(secret, message.headers, message.body);
                  return true;
                } catch {
                  return false;
                }
              }).length,
          );
          assert.equal(bySecret, [5, 5], 'five of each, none dropped as a duplicate of the other');
        },
      );
    });

  if (kind.name === 'amqp')
    on('a message no queue is bound for is returned: a failed attempt naming the routing key', async () => {
      const amqp = await import('amqplib');
      const model = await amqp.connect('amqp://guest:guest@127.0.0.1:5672');
      const channel = await model.createChannel();
      const exchange = `portal-test-unbound-${process.pid}`;
      await channel.assertExchange(exchange, 'topic', { durable: false });
      try {
        await withPortal(
          {
            destinations: await kind.destinations(broker),
            webhooks: { allowPrivateNetworks: true, retrySchedule: [3600] },
          },
          async (app) => {
            const url = `amqp://guest:guest@127.0.0.1:5672/?exchange=${exchange}&routingKey=events`;
            const hook = await app.portal.webhooks.create('acct_a', { type: 'customer-created', url });
            await app.portal.events.publish('acct_a', 'customer-created', { n: 1 }, { orderingKey: 'k'.repeat(250) });
            await waitFor(async () => (await deliveriesOf(app, hook.id))[0]?.attempts.length === 1, 'the attempt');
            const [delivery] = await deliveriesOf(app, hook.id);
            // The 250-character key does not fit AMQP's 255 bytes after `events.`: it travels as its hash.
            assert.match(
              delivery!.attempts[0]!.error ?? '',
              /no queue is bound to the exchange .* for the routing key events\.h[0-9a-f]{64}$/,
            );
          },
        );
      } finally {
        await channel.deleteExchange(exchange);
        await model.close();
      }
    });

  const restarts = kind.inapplicable?.restart === undefined ? [0.3, 0.6] : [];
  const LONG_RUN_EVENTS = kind.longRunEvents ?? LONG_RUN;
  on(
    `${LONG_RUN_EVENTS} events with the broker restarted ${restarts.length === 0 ? 'never' : 'twice'}: none lost, each key in order`,
    async () => {
      if (restarts.length === 0) console.log(`  ${kind.name}: no restart, ${kind.inapplicable?.restart}`);
      await broker.prepare('long');
      consumer = await broker.consume('long');
      let secret = '';
      await withPortal(
        {
          destinations: await kind.destinations(broker),
          webhooks: { allowPrivateNetworks: true, timeoutMs: 1000, retrySchedule: [0.2, 0.5, 1, 1, 1, 1, 1, 1, 1, 1] },
        },
        async (app) => {
          secret = (await app.portal.webhooks.create('acct_a', { type: 'customer-created', url: broker.url('long') }))
            .secret!;
          const publishing = (async () => {
            for (let n = 0; n < LONG_RUN_EVENTS; n += 100)
              await Promise.all(
                Array.from({ length: 100 }, (_, i) =>
                  app.portal.events.publish(
                    'acct_a',
                    'customer-created',
                    { n: n + i },
                    { orderingKey: `k${(n + i) % KEYS}` },
                  ),
                ),
              );
          })();
          for (const share of restarts) {
            await waitFor(() => consumer!.messages.length >= LONG_RUN_EVENTS * share, `${share * 100} %`, 60_000);
            await broker.restart();
          }
          await publishing;
          await waitFor(
            () => new Set(consumer!.messages.map((one) => one.headers['webhook-id'])).size >= LONG_RUN_EVENTS,
            'every event',
            120_000,
          );
        },
      );
      const ids = consumer!.messages.map((one) => one.headers['webhook-id']);
      // Every message as consumed, repeats included, verifies with the webhook's secret.
      for (const message of consumer!.messages) verifyWebhook(secret, message.headers, message.body);
      const unique = new Set(ids);
      assert.is(unique.size, LONG_RUN_EVENTS, 'none lost');
      // Per key, the first time each event was read follows publish order.
      const seen = new Set<string>();
      const lastOfKey = new Map<string, number>();
      for (const message of consumer!.messages) {
        const id = message.headers['webhook-id']!;
        if (seen.has(id)) continue;
        seen.add(id);
        const n = (JSON.parse(message.body) as { data: { n: number } }).data.n;
        const key = message.orderingKey!;
        assert.ok((lastOfKey.get(key) ?? -1) < n, `${key}: ${n} after ${lastOfKey.get(key)}`);
        lastOfKey.set(key, n);
      }
      console.log(
        `  ${kind.name}: ${ids.length} messages read for ${unique.size} events (${ids.length - unique.size} repeated after a lost acknowledgement)`,
      );
    },
  );

  on.run();
}
