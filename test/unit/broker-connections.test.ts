import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { rejects } from '../helpers/server.js';
import net from 'node:net';
import {
  type BrokerConnection,
  BrokerConnections,
  MAX_UNASKED_BYTES,
  boundedRelay,
  brokerAddress,
  fittedKey,
  pooledDestination,
  withDeadline,
} from '../../adapters/shared/broker.js';
import { sqsDestination } from '../../adapters/sqs/index.js';
import type { WebhookCall } from '../../src/ports.js';

/** A connection that only says whether it is open. */
class Fake implements BrokerConnection {
  static opened = 0;
  closed = false;
  usable = true;
  constructor(readonly name: string) {
    Fake.opened++;
  }
  async close() {
    this.closed = true;
  }
}

const use = (pool: BrokerConnections<Fake>, account: string, key: string) =>
  pool.use(
    account,
    key,
    async () => new Fake(`${account}/${key}`),
    async (connection) => connection,
  );

test("one connection an account and broker, reused; never another account's, whatever the key", async () => {
  const pool = new BrokerConnections<Fake>();
  const first = await use(pool, 'acct_a', 'amqp://broker');
  assert.is(await use(pool, 'acct_a', 'amqp://broker'), first, 'reused');
  const other = await use(pool, 'acct_b', 'amqp://broker');
  assert.is.not(other, first, "another account's call gets its own");
  assert.is(pool.size, 2);
  await pool.close();
  assert.ok(first.closed && other.closed, 'close() closes them all');
  await rejects(() => use(pool, 'acct_a', 'amqp://broker'), /closed/);
});

test('calls that start together while it opens share one opening; a failed one is not kept', async () => {
  const pool = new BrokerConnections<Fake>();
  const before = Fake.opened;
  const [a, b] = await Promise.all([use(pool, 'acct_a', 'k'), use(pool, 'acct_a', 'k')]);
  assert.is(a, b);
  assert.is(Fake.opened - before, 1);
  await rejects(
    () =>
      pool.use(
        'acct_a',
        'bad',
        () => Promise.reject(new Error('refused')),
        async () => 0,
      ),
    /refused/,
  );
  assert.is(pool.size, 1, 'the failed opening is forgotten: the next call tries again');
  await pool.close();
});

test('a connection the broker dropped is replaced by the next call', async () => {
  const pool = new BrokerConnections<Fake>();
  const first = await use(pool, 'acct_a', 'k');
  first.usable = false;
  const second = await use(pool, 'acct_a', 'k');
  assert.is.not(second, first);
  await new Promise((resolve) => setImmediate(resolve));
  assert.ok(first.closed, 'the dropped one is closed');
  await pool.close();
});

test('at most 8 brokers an account: the least recently used idle one goes; all in use, the attempt fails', async () => {
  const pool = new BrokerConnections<Fake>();
  const made: Fake[] = [];
  for (let i = 0; i < 8; i++) made.push(await use(pool, 'acct_a', `k${i}`));
  await use(pool, 'acct_a', 'k0'); // k1 is now the least recently used
  await use(pool, 'acct_a', 'k8');
  await new Promise((resolve) => setImmediate(resolve));
  assert.ok(made[1]!.closed, 'the least recently used idle one closed');
  assert.not.ok(made[0]!.closed);
  assert.is(pool.size, 8);
  await use(pool, 'acct_b', 'k0');
  assert.is(pool.size, 9, "another account's count is its own");
  // Eight calls that never end hold every connection of acct_c.
  const held: Promise<unknown>[] = [];
  const never = new Promise<void>(() => {});
  for (let i = 0; i < 8; i++)
    held.push(
      pool.use(
        'acct_c',
        `k${i}`,
        async () => new Fake('c'),
        () => never,
      ),
    );
  await new Promise((resolve) => setImmediate(resolve));
  await rejects(() => use(pool, 'acct_c', 'k9'), /already has 8 broker connections in use/);
  await pool.close();
});

test('idle connections close after idleMs', async () => {
  const pool = new BrokerConnections<Fake>(1000);
  const connection = await use(pool, 'acct_a', 'k');
  // The sweep runs every second: an idle connection goes between idleMs and idleMs plus one sweep.
  await new Promise((resolve) => setTimeout(resolve, 2500));
  assert.ok(connection.closed, 'closed by the sweep');
  assert.is(pool.size, 0);
  await pool.close();
});

test("the guard on a broker's address: loopback, private and opaque spellings of them refused, unless allowPrivateNetworks", async () => {
  const refused = (url: string) =>
    rejects(() => brokerAddress(new URL(url), 5672, { allowPrivateNetworks: false }), /refused to call/);
  await refused('amqp://127.0.0.1/');
  // A broker URL's host is opaque to WHATWG: 127.1 and 0x7f000001 stay as written there.
  await refused('amqp://127.1/');
  await refused('amqp://0x7f000001/');
  await refused('amqp://[::1]:5672/');
  await refused('redis://169.254.169.254/metadata');
  await refused('nats://10.1.2.3/x');
  await refused('mqtt://localhost/x');
  assert.equal(await brokerAddress(new URL('amqp://8.8.8.8/'), 5672, { allowPrivateNetworks: false }), {
    host: '8.8.8.8',
    port: 5672,
    servername: '8.8.8.8',
  });
  assert.equal(await brokerAddress(new URL('amqp://127.0.0.1:5673/'), 5672, { allowPrivateNetworks: true }), {
    host: '127.0.0.1',
    port: 5673,
    servername: '127.0.0.1',
  });
});

test('withDeadline: the work, or a rejection naming what was waited for at the deadline or the abort', async () => {
  assert.is(await withDeadline(Promise.resolve(1), 100, 'for it'), 1);
  await rejects(
    () => withDeadline(new Promise(() => {}), 20, 'for the broker'),
    /timed out after 20 ms for the broker/,
  );
  const abort = new AbortController();
  const waiting = withDeadline(new Promise(() => {}), 10_000, 'for the broker', abort.signal);
  abort.abort();
  await rejects(() => waiting, /abandoned for the broker/);
});

/** A broker that answers each write with `answer(chunk)`. */
async function fakeBroker(answer: (chunk: Buffer) => Buffer) {
  const server = net.createServer((socket) => {
    socket.on('error', () => {});
    socket.on('data', (chunk) => socket.write(answer(chunk)));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  return { port, close: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}

/** Connects to the relay, writes `what`, and gathers what comes back until the socket closes or `bytes` arrived. */
async function exchange(port: number, what: string, bytes: number): Promise<{ got: number; closed: boolean }> {
  const socket = net.connect(port, '127.0.0.1');
  let got = 0;
  return new Promise((resolve) => {
    socket.on('data', (chunk) => {
      got += chunk.length;
      if (got >= bytes) {
        socket.destroy();
        resolve({ got, closed: false });
      }
    });
    socket.on('error', () => {});
    socket.on('close', () => resolve({ got, closed: true }));
    socket.write(what);
  });
}

test('the relay passes answers through, and ends a connection the broker floods beyond what was asked', async () => {
  const echo = await fakeBroker((chunk) => chunk);
  const relay = await boundedRelay({ host: '127.0.0.1', port: echo.port, servername: 'broker' }, 1000);
  assert.equal(await exchange(relay.port, 'PING', 4), { got: 4, closed: false }, 'an answer passes');
  assert.is(relay.failure, undefined);
  relay.close();
  await echo.close();

  const flood = await fakeBroker(() => Buffer.alloc(MAX_UNASKED_BYTES * 4));
  const flooded = await boundedRelay({ host: '127.0.0.1', port: flood.port, servername: 'broker' }, 1000);
  const { got, closed } = await exchange(flooded.port, 'XADD', MAX_UNASKED_BYTES * 4);
  assert.ok(closed, 'the relay ended the connection');
  assert.ok(got <= MAX_UNASKED_BYTES, `at most the bound reached the client: ${got}`);
  assert.match(flooded.failure?.message ?? '', /more than 1048576 bytes that were not asked for/);
  await flood.close();

  await rejects(() => boundedRelay({ host: '127.0.0.1', port: 1, servername: 'broker' }, 1000), /ECONNREFUSED/);
});

test("the relay's credit: a broker that answers each small write with half its bound is ended once it passes it", async () => {
  const dripping = await fakeBroker(() => Buffer.alloc(MAX_UNASKED_BYTES / 2));
  const relay = await boundedRelay({ host: '127.0.0.1', port: dripping.port, servername: 'broker' }, 1000);
  const socket = net.connect(relay.port, '127.0.0.1');
  socket.on('error', () => {});
  let got = 0;
  socket.on('data', (chunk) => {
    got += chunk.length;
  });
  const closed = new Promise<void>((resolve) => socket.on('close', () => resolve()));
  // Heartbeat-sized writes: each one answered with 512 KiB.
  for (let i = 0; i < 4 && !socket.destroyed; i++) {
    socket.write('PING\r\n');
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  await closed;
  assert.ok(got <= MAX_UNASKED_BYTES + 4 * 6, `what reached the client stayed within the credit: ${got}`);
  assert.match(relay.failure?.message ?? '', /not asked for/);
  await dripping.close();
});

test("a publish the broker never acknowledges ends its connection at the deadline: it holds none of the account's 8", async () => {
  const listener = await fakeBroker(() => Buffer.alloc(0));
  const opened: Fake[] = [];
  const destination = pooledDestination<string, Fake>({
    kind: 'fake',
    schemes: ['fake'],
    defaultPort: () => listener.port,
    targetOf: (url) => url.pathname,
    connectionKey: (url) => url.pathname,
    async connect() {
      const made = new Fake('hung');
      opened.push(made);
      return made;
    },
    publish: () => new Promise<void>(() => {}),
    waitingFor: 'for the fake broker',
  });
  const transport = destination.open({ allowPrivateNetworks: true });
  const call = (n: number): WebhookCall => ({
    accountId: 'acct_a',
    webhookId: `wbh_${n}`,
    url: `fake://127.0.0.1:${listener.port}/target-${n}`,
    headers: {},
    body: '{}',
  });
  for (let n = 0; n < 10; n++) {
    const result = await transport.send(call(n), { timeoutMs: 50 });
    assert.match(result.error ?? '', /^fake: timed out after 50 ms for the fake broker/, `call ${n}: ${result.error}`);
  }
  assert.is(opened.length, 10, 'each call got a connection: none was held by a publish that hung');
  await transport.close?.();
  await listener.close();
});

test('fittedKey: a key that fits stays; one too long, or of characters the broker refuses, becomes its hash', () => {
  assert.is(fittedKey('order-42', 128), 'order-42');
  const long = 'k'.repeat(300);
  assert.match(fittedKey(long, 255), /^h[0-9a-f]{64}$/);
  assert.is(fittedKey(long, 255), fittedKey(long, 255), 'the same key, the same hash');
  assert.match(fittedKey('café au lait', 128, /^[\x21-\x7e]+$/), /^h[0-9a-f]{64}$/);
});

test("sqsDestination: a queue of the host's own account is refused at create; others pass", () => {
  const destination = sqsDestination({ client: {} as never, hostAccounts: ['111122223333'] });
  assert.is(
    destination.check(new URL('sqs://sqs.eu-west-1.amazonaws.com/111122223333/internal')),
    "must not name a queue of the portal's own AWS account",
  );
  assert.is(destination.check(new URL('sqs://sqs.eu-west-1.amazonaws.com/444455556666/events.fifo')), null);
  assert.match(
    destination.check(new URL('sqs://sqs.eu-west-1.amazonaws.com/events')) ?? '',
    /account id and a queue name/,
  );
});

test.run();
