import { EventEmitter } from 'node:events';
import net from 'node:net';
import { Pool } from 'undici';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { httpTransport } from '../../adapters/http-transport/index.js';
import { MAX_ANSWER_WIRE_BYTES } from '../../adapters/http-transport/connector.js';
import { createPools } from '../../adapters/http-transport/pools.js';
import type { WebhookCall } from '../../src/ports.js';
import { rawServer } from '../helpers/raw-server.js';
import { waitFor } from '../helpers/webhooks.js';

// Receivers a hostile tenant would run: each breaks one bound, and the call must end at that bound,
// promptly, with an error that names it.

const call = (url: string, accountId = 'acc_a'): WebhookCall => ({
  accountId,
  webhookId: 'wbh_1',
  url,
  body: '{"id":"evt_1"}',
  headers: { 'Content-Type': 'application/json', 'webhook-id': 'evt_1' },
});

/** Patches `net.connect` to keep the sockets the transport opens, to read how much it took in. */
function watchSockets() {
  const original = net.connect;
  const sockets: net.Socket[] = [];
  net.connect = ((...args: unknown[]) => {
    const socket = (original as (...a: unknown[]) => net.Socket)(...args);
    sockets.push(socket);
    return socket;
  }) as typeof net.connect;
  return {
    get bytesRead() {
      return sockets.reduce((sum, socket) => sum + socket.bytesRead, 0);
    },
    restore: () => void (net.connect = original),
  };
}

/** What the transport may read of an answer that breaks a bound: the budget, plus the read that crossed it. */
const MOST_READ = MAX_ANSWER_WIRE_BYTES + 64 * 1024;

/** Writes `piece` on `socket` for as long as it stays open. */
function flood(socket: net.Socket, piece: string): void {
  const block = Buffer.from(piece.repeat(Math.ceil(16384 / piece.length)), 'latin1');
  const more = () => {
    while (!socket.destroyed && socket.writable) {
      if (!socket.write(block)) return void socket.once('drain', more);
    }
  };
  more();
}

/** A receiver that answers every request with `head` and then floods `piece` until the connection closes. */
async function flooding(head: string, piece: string) {
  const server = await rawServer((_request, _connection, socket) => {
    socket.write(head);
    flood(socket, piece);
    return 'silent';
  });
  return { server };
}

test('an endless stream of interim (1xx) answers ends the call after the eighth, not at the deadline', async () => {
  const { server } = await flooding('', 'HTTP/1.1 103 Early Hints\r\n\r\n');
  const transport = httpTransport({ allowPrivateNetworks: true });
  const sockets = watchSockets();
  try {
    const result = await transport.send(call(server.url), { timeoutMs: 10_000 });
    assert.equal(result, {
      statusCode: null,
      headers: {},
      error: 'invalid response: more than 8 interim (1xx) answers',
    });
    assert.ok(sockets.bytesRead <= MOST_READ, `${sockets.bytesRead} bytes read`);
  } finally {
    sockets.restore();
    await transport.close!();
    await server.close();
  }
});

test('an unrequested 100 Continue is refused at once', async () => {
  const { server } = await flooding('', 'HTTP/1.1 100 Continue\r\n\r\n');
  const transport = httpTransport({ allowPrivateNetworks: true });
  try {
    const result = await transport.send(call(server.url), { timeoutMs: 10_000 });
    assert.equal(
      [result.statusCode, result.error],
      [null, 'invalid response: an answer that does not fit the request (an unrequested 100 Continue)'],
    );
  } finally {
    await transport.close!();
    await server.close();
  }
});

test('chunk framing is bounded: an endless chunk extension, or padding around one-byte chunks, fails the call at the wire budget', async () => {
  const head = 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n';
  for (const [label, start, piece] of [
    ['one endless extension', `${head}1;`, 'x'],
    ['padded one-byte chunks', head, `1;${'p'.repeat(500)}\r\nx\r\n`],
  ] as const) {
    const { server } = await flooding(start, piece);
    const transport = httpTransport({ allowPrivateNetworks: true });
    const sockets = watchSockets();
    try {
      const result = await transport.send(call(server.url), { timeoutMs: 10_000 });
      assert.equal(
        [result.statusCode, result.error],
        [null, 'invalid response: its framing passed 256 KiB before the answer was complete'],
        label,
      );
      assert.ok(sockets.bytesRead <= MOST_READ, `${label}: ${sockets.bytesRead} bytes read`);
    } finally {
      sockets.restore();
      await transport.close!();
      await server.close();
    }
  }
});

test('a head or trailers over 16 KiB fail the call', async () => {
  const big = 'x'.repeat(17 * 1024);
  const answers = [
    `HTTP/1.1 200 OK\r\nX-Big: ${big}\r\nContent-Length: 0\r\n\r\n`,
    `HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\r\n0\r\nX-Trailer: ${big}\r\n\r\n`,
  ];
  for (const answer of answers) {
    const server = await rawServer(() => answer);
    const transport = httpTransport({ allowPrivateNetworks: true });
    try {
      const result = await transport.send(call(server.url), { timeoutMs: 5000 });
      assert.equal([result.statusCode, result.error], [null, 'invalid response: its head or trailers are over 16 KiB']);
    } finally {
      await transport.close!();
      await server.close();
    }
  }
});

test('a status outside 100–599 is a failed attempt that names it', async () => {
  for (const [status, shown] of [
    ['999', 999],
    ['099', 99],
    ['600', 600],
  ] as const) {
    const server = await rawServer(() => `HTTP/1.1 ${status} Odd\r\nContent-Length: 0\r\n\r\n`);
    const transport = httpTransport({ allowPrivateNetworks: true });
    try {
      const result = await transport.send(call(server.url), { timeoutMs: 5000 });
      assert.equal(
        [result.statusCode, result.error],
        [null, `invalid response: ${shown} is not an HTTP status code (100–599)`],
      );
    } finally {
      await transport.close!();
      await server.close();
    }
  }
});

test('a 101 Switching Protocols, with or without its Upgrade header, is a failed attempt that says so in words', async () => {
  for (const headers of [
    'Upgrade: websocket\r\nConnection: Upgrade\r\n',
    'Connection: Upgrade\r\n',
    '',
    'Upgrade: h2c\r\n',
  ]) {
    const server = await rawServer(() => `HTTP/1.1 101 Switching Protocols\r\n${headers}\r\n`);
    const transport = httpTransport({ allowPrivateNetworks: true });
    try {
      const result = await transport.send(call(server.url), { timeoutMs: 5000 });
      assert.equal(
        [result.statusCode, result.error],
        [null, 'invalid response: 101 Switching Protocols, a protocol switch the call did not ask for'],
        JSON.stringify(headers),
      );
    } finally {
      await transport.close!();
      await server.close();
    }
  }
});

test('calls cut at their deadline leave no socket open: the connections undici opens again at once are closed unused', async () => {
  const server = await rawServer(() => 'silent');
  const transport = httpTransport({ allowPrivateNetworks: true });
  try {
    const results = await Promise.all(
      Array.from({ length: 32 }, () => transport.send(call(server.url), { timeoutMs: 300 })),
    );
    assert.ok(results.every((result) => result.error === 'timed out after 300 ms'));
    // Idle connections are otherwise kept 4 s (the keep-alive time): these carried nothing and are gone well before.
    await waitFor(() => server.open === 0, 'every socket closed', 2000);
    assert.ok(server.connections >= 32);
  } finally {
    await transport.close!();
    await server.close();
  }
});

test('an answer with bare LF line ends is settled at once, not left to time out', async () => {
  const server = await rawServer(() => 'HTTP/1.1 200 OK\nContent-Length: 2\n\nok');
  const transport = httpTransport({ allowPrivateNetworks: true });
  try {
    const started = Date.now();
    const result = await transport.send(call(server.url), { timeoutMs: 5000 });
    assert.ok(result.statusCode === 200 || /^invalid response: /.test(result.error ?? ''), JSON.stringify(result));
    assert.ok(Date.now() - started < 4000, 'settled before the deadline');
  } finally {
    await transport.close!();
    await server.close();
  }
});

test('bytes a receiver sends on an idle connection close it: the next call gets its own answer on a new one', async () => {
  const server = await rawServer((_request, connection, socket) => {
    if (connection > 1) return 'HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n';
    setTimeout(() => socket.write('HTTP/1.1 299 Stray\r\nContent-Length: 0\r\n\r\n'), 20);
    return 'HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n';
  });
  const transport = httpTransport({ allowPrivateNetworks: true });
  try {
    assert.is((await transport.send(call(server.url), { timeoutMs: 5000 })).statusCode, 200);
    await new Promise((resolve) => setTimeout(resolve, 60));
    const next = await transport.send(call(server.url), { timeoutMs: 5000 });
    assert.equal([next.statusCode, next.error], [202, null]);
    assert.equal(
      server.requests.map((request) => request.connection),
      [1, 2],
    );
  } finally {
    await transport.close!();
    await server.close();
  }
});

test("connections are never shared across accounts: a late stray answer cannot reach another account's call", async () => {
  // Connection 1 answers, then sends a stray answer a few ms later; any other connection answers 202.
  const server = await rawServer((_request, connection, socket) => {
    if (connection > 1) return 'HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n';
    setTimeout(() => socket.write('HTTP/1.1 299 Stray\r\nContent-Length: 0\r\n\r\n'), 3);
    return 'HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n';
  });
  const transport = httpTransport({ allowPrivateNetworks: true });
  try {
    assert.is((await transport.send(call(server.url, 'acc_a'), { timeoutMs: 5000 })).statusCode, 200);
    await new Promise((resolve) => setTimeout(resolve, 1));
    const other = await transport.send(call(server.url, 'acc_b'), { timeoutMs: 5000 });
    assert.equal([other.statusCode, other.error], [202, null]);
    assert.equal(
      server.requests.map((request) => request.connection),
      [1, 2],
    );
  } finally {
    await transport.close!();
    await server.close();
  }
});

test('a pool is dropped once its connections have closed: nothing is kept per origin ever called', async () => {
  // Answers keep-alive, and closes the idle connections once the three calls were made, as a
  // receiver's server would after its keep-alive timeout (a timer here closed the first before the
  // third was made on a loaded machine).
  const sockets: { end(): void }[] = [];
  const server = await rawServer((_request, _connection, socket) => {
    sockets.push(socket);
    return 'HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n';
  });
  const pools = createPools((origin) => new Pool(origin));
  try {
    for (const account of ['acc_a', 'acc_b', 'acc_c']) {
      const { statusCode, body } = await pools
        .get(account, `http://127.0.0.1:${server.port}`)
        .request({ path: '/', method: 'POST', body: '{}' });
      await body.dump();
      assert.is(statusCode, 200);
    }
    assert.is(pools.size, 3, 'one pool per account and origin');
    // The receiver closes them; each pool goes once its last connection has closed.
    for (const socket of sockets) socket.end();
    await waitFor(() => pools.size === 0, 'the pools of the closed connections to be dropped');
  } finally {
    await pools.close();
    await server.close();
  }
});

/** Resolves once `check` holds, polling every 10 ms for up to a second. */
async function eventually(check: () => boolean, what: string): Promise<void> {
  for (let waited = 0; !check(); waited += 10) {
    if (waited >= 1000) assert.unreachable(what);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

test('the connections kept open are bounded: idle pools are closed, least recently called first', async () => {
  // Keeps every connection open, as a receiver asking for long keep-alive would.
  const server = await rawServer(() => 'HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n');
  const origin = `http://127.0.0.1:${server.port}`;
  const pools = createPools((at) => new Pool(at), { maxConnections: 2 });
  const post = async (account: string) => {
    const pool = pools.get(account, origin);
    const { statusCode, body } = await pool.request({ path: '/', method: 'POST', body: '{}' });
    await body.dump();
    assert.is(statusCode, 200);
    return pool;
  };
  try {
    const a = await post('acc_a');
    const b = await post('acc_b');
    assert.is(await post('acc_a'), a, 'a pool is reused while it is kept');
    // acc_b was called least recently: its idle pool goes to make room for acc_c's connection.
    await post('acc_c');
    await eventually(() => server.open === 2, `2 connections open, not ${server.open}`);
    assert.is(pools.size, 2);
    assert.is(pools.connected, 2);
    assert.is(await post('acc_a'), a, 'the pool called more recently is kept');
    assert.is.not(await post('acc_b'), b, 'the closed pool is replaced by a new one');
    await eventually(() => server.open === 2, `2 connections open, not ${server.open}`);
    assert.is(server.connections, 4, 'a connection each for a, b, c, and b again');
  } finally {
    await pools.close();
    await server.close();
  }
});

test("a closed pool's connections stop counting at once, before their disconnect: trim closes no more than it must", async () => {
  // Pools whose connections the test opens and closes, each event when the test says.
  const made: (EventEmitter & { origin: string; closed: boolean })[] = [];
  const fake = (origin: string) => {
    const pool = Object.assign(new EventEmitter(), {
      origin,
      closed: false,
      stats: { running: 0, pending: 0, queued: 0 },
    });
    Object.assign(pool, { close: async () => void (pool.closed = true), destroy: async () => {} });
    made.push(pool);
    return pool as unknown as Pool;
  };
  const pools = createPools(fake, { maxConnections: 2 });
  const connect = (account: string) =>
    (pools.get(account, 'https://a.example') as unknown as EventEmitter).emit('connect');
  connect('acc_a');
  connect('acc_b');
  connect('acc_c');
  assert.equal(
    made.map((pool) => pool.closed),
    [true, false, false],
    'the least recently called pool is closed',
  );
  assert.is(pools.connected, 2, 'its connection is no longer counted, though its disconnect has not come');
  connect('acc_d');
  assert.equal(
    made.map((pool) => pool.closed),
    [true, true, false, false],
    'one more is closed for one more connection, not two',
  );
  made[0]!.emit('disconnect');
  assert.is(pools.connected, 2, 'the late disconnect of a closed pool changes nothing');
  assert.is(pools.size, 2);
  await pools.close();
});

test('an idle connection is kept as long as the receiver asks (Keep-Alive: timeout), closed after 4 s otherwise', async () => {
  const hinted = await rawServer(
    () => 'HTTP/1.1 200 OK\r\nConnection: keep-alive\r\nKeep-Alive: timeout=10\r\nContent-Length: 0\r\n\r\n',
  );
  const silent = await rawServer(() => 'HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n');
  const transport = httpTransport({ allowPrivateNetworks: true });
  try {
    for (const server of [hinted, silent])
      assert.is((await transport.send(call(server.url), { timeoutMs: 2000 })).statusCode, 200);
    await new Promise((resolve) => setTimeout(resolve, 4500));
    assert.is(hinted.open, 1, 'kept: the receiver keeps it 10 s');
    await eventually(() => silent.open === 0, 'closed after 4 s without a word from the receiver');
    for (const server of [hinted, silent])
      assert.is((await transport.send(call(server.url), { timeoutMs: 2000 })).statusCode, 200);
    assert.equal(
      hinted.requests.map((request) => request.connection),
      [1, 1],
      'the second call went on the kept connection',
    );
    assert.equal(
      silent.requests.map((request) => request.connection),
      [1, 2],
    );
  } finally {
    await transport.close!();
    await hinted.close();
    await silent.close();
  }
});

test.run();
