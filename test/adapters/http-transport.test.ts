import { execFile } from 'node:child_process';
import http from 'node:http';
import { promisify } from 'node:util';
import type { LookupAddress } from 'node:dns';
import net, { type LookupFunction } from 'node:net';
import tls from 'node:tls';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { httpTransport } from '../../adapters/http-transport/index.js';
import { classifyAddress, type AddressKind } from '../../adapters/http-transport/address-guard.js';
import { MAX_RESPONSE_BYTES } from '../../adapters/http-transport/http-transport.js';
import { guardedLookup } from '../../adapters/http-transport/http-transport.js';
import type { WebhookCall } from '../../src/ports.js';
import { silentLogger } from '../../src/shared/logger.js';
import { loadedProbe, runModuleScript } from '../helpers/process.js';
import { rawServer } from '../helpers/raw-server.js';
import { startHttpsReceiver } from '../helpers/https-receiver.js';
import { startReceiver } from '../helpers/receiver.js';

const call = (url: string, body = '{"id":"evt_1"}', accountId = 'acc_1'): WebhookCall => ({
  accountId,
  webhookId: 'wbh_1',
  url,
  body,
  headers: { 'Content-Type': 'application/json', 'webhook-id': 'evt_1', 'User-Agent': 'customer-portal/test' },
});

/** Counts the connections the transport opens (net.connect, tls.connect): a refused call must open none. */
function countConnections() {
  const originals = { net: net.connect, tls: tls.connect };
  let count = 0;
  net.connect = ((...args: unknown[]) => {
    count++;
    return (originals.net as (...a: unknown[]) => net.Socket)(...args);
  }) as typeof net.connect;
  tls.connect = ((...args: unknown[]) => {
    count++;
    return (originals.tls as (...a: unknown[]) => tls.TLSSocket)(...args);
  }) as typeof tls.connect;
  return {
    get count() {
      return count;
    },
    restore: () => {
      net.connect = originals.net;
      tls.connect = originals.tls;
    },
  };
}

const execFileAsync = promisify(execFile);

/** A resolver that answers from a table and never asks DNS. */
const fakeLookup =
  (table: Record<string, string[]>): LookupFunction =>
  (hostname, options, callback) => {
    const addresses = table[hostname];
    if (addresses === undefined)
      return callback(Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' }), '', 0);
    const answer: LookupAddress[] = addresses.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
    if (options.all) callback(null, answer);
    else callback(null, answer[0]!.address, answer[0]!.family);
  };

test('a call is POSTed with its headers and body; the status and headers come back', async () => {
  const receiver = await startReceiver();
  const transport = httpTransport({ allowPrivateNetworks: true });
  receiver.script([{ status: 202, headers: { 'Retry-After': '7', 'X-Thing': 'yes' } }]);
  try {
    const result = await transport.send(
      call(`${receiver.url}/hooks/in?tenant=1`, '{"id":"evt_1","data":{"name":"Zoë"}}'),
      { timeoutMs: 5000 },
    );
    assert.equal(
      [result.statusCode, result.error, result.headers['retry-after'], result.headers['x-thing']],
      [202, null, '7', 'yes'],
    );
    const [request] = receiver.received;
    assert.equal(
      [request!.method, request!.url, request!.body],
      ['POST', '/hooks/in?tenant=1', '{"id":"evt_1","data":{"name":"Zoë"}}'],
    );
    assert.is(request!.headers['content-type'], 'application/json');
    assert.is(request!.headers['webhook-id'], 'evt_1');
    assert.is(request!.headers['content-length'], String(Buffer.byteLength('{"id":"evt_1","data":{"name":"Zoë"}}')));
  } finally {
    await transport.close!();
    await receiver.close();
  }
});

test('calls to one receiver share kept-alive connections', async () => {
  const receiver = await startReceiver();
  const transport = httpTransport({ allowPrivateNetworks: true });
  try {
    for (let i = 0; i < 6; i++)
      assert.is((await transport.send(call(receiver.url), { timeoutMs: 5000 })).statusCode, 200);
    // undici checks an idle socket for a close or stray bytes for one turn of the event loop before
    // reusing it, so a call sent the moment the last one ended may open a second connection: two at most.
    const ports = new Set(receiver.received.map((request) => request.remotePort));
    assert.ok(ports.size <= 2, `six sequential calls on ${ports.size} sockets`);
  } finally {
    await transport.close!();
    await receiver.close();
  }
});

test('a redirect is not followed: the 3xx comes back as the answer', async () => {
  const receiver = await startReceiver();
  const transport = httpTransport({ allowPrivateNetworks: true });
  receiver.script([{ status: 307, headers: { Location: '/elsewhere' } }]);
  try {
    const result = await transport.send(call(`${receiver.url}/start`), { timeoutMs: 5000 });
    assert.is(result.statusCode, 307);
    assert.equal(
      receiver.received.map((request) => request.url),
      ['/start'],
    );
  } finally {
    await transport.close!();
    await receiver.close();
  }
});

test('a large response body is read to 64 KiB and dropped; the status still counts', async () => {
  let closed!: (finished: boolean) => void;
  // Whether the response was written to its end when its connection closed: false if the transport hung up.
  const finished = new Promise<boolean>((resolve) => (closed = resolve));
  const server = http.createServer((req, res) => {
    req.resume();
    res.on('close', () => closed(res.writableFinished));
    res.writeHead(200, { 'Content-Type': 'application/octet-stream' });
    const chunk = Buffer.alloc(64 * 1024, 1);
    let sent = 0;
    const pump = () => {
      while (sent < 20 * 1024 * 1024) {
        sent += chunk.length;
        if (!res.write(chunk)) return void res.once('drain', pump);
      }
      res.end();
    };
    pump();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const transport = httpTransport({ allowPrivateNetworks: true });
  try {
    const { port } = server.address() as { port: number };
    const result = await transport.send(call(`http://127.0.0.1:${port}/`), { timeoutMs: 10_000 });
    assert.equal([result.statusCode, result.error], [200, null]);
    assert.is(await finished, false, 'the transport hung up instead of reading 20 MiB');
    assert.ok(MAX_RESPONSE_BYTES === 65536);
  } finally {
    await transport.close!();
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
});

test('a receiver that does not answer in time is a timeout, with no status', async () => {
  const receiver = await startReceiver();
  const transport = httpTransport({ allowPrivateNetworks: true });
  receiver.script([{ hang: true }]);
  try {
    const result = await transport.send(call(receiver.url), { timeoutMs: 150 });
    assert.equal([result.statusCode, result.error], [null, 'timed out after 150 ms']);
  } finally {
    await transport.close!();
    await receiver.close();
  }
});

test("the transport's own timeoutMs caps what send asks for", async () => {
  const receiver = await startReceiver();
  const transport = httpTransport({ allowPrivateNetworks: true, timeoutMs: 100 });
  receiver.script([{ hang: true }]);
  try {
    const result = await transport.send(call(receiver.url), { timeoutMs: 60_000 });
    assert.is(result.error, 'timed out after 100 ms');
  } finally {
    await transport.close!();
    await receiver.close();
  }
});

test('an abort signal ends the call', async () => {
  const receiver = await startReceiver();
  const transport = httpTransport({ allowPrivateNetworks: true });
  receiver.script([{ hang: true }]);
  try {
    const controller = new AbortController();
    const pending = transport.send(call(receiver.url), { timeoutMs: 60_000, signal: controller.signal });
    setTimeout(() => controller.abort(), 30);
    assert.equal(await pending, { statusCode: null, headers: {}, error: 'aborted' });
    const already = await transport.send(call(receiver.url), { timeoutMs: 60_000, signal: AbortSignal.abort() });
    assert.is(already.error, 'aborted');
  } finally {
    await transport.close!();
    await receiver.close();
  }
});

test('a refused connection resolves with the network error; send never rejects', async () => {
  const receiver = await startReceiver();
  const closedPort = receiver.port;
  await receiver.close();
  const transport = httpTransport({ allowPrivateNetworks: true });
  try {
    const result = await transport.send(call(`http://127.0.0.1:${closedPort}/`), { timeoutMs: 5000 });
    assert.is(result.statusCode, null);
    assert.match(result.error ?? '', /ECONNREFUSED/);
    const unknown = await httpTransport({ allowPrivateNetworks: true, lookup: fakeLookup({}) }).send(
      call('http://nowhere.test/'),
      { timeoutMs: 5000 },
    );
    assert.match(unknown.error ?? '', /ENOTFOUND/);
  } finally {
    await transport.close!();
  }
});

test('only http and https URLs without credentials are called, even with private networks allowed', async () => {
  const transport = httpTransport({ allowPrivateNetworks: true });
  const connections = countConnections();
  try {
    for (const [url, pattern] of [
      ['ftp://127.0.0.1/x', /only http and https/],
      ['file:///etc/passwd', /only http and https/],
      ['gopher://127.0.0.1:70/', /only http and https/],
      ['http://user:pass@127.0.0.1/', /credentials/],
      ['http://user@127.0.0.1/', /credentials/],
      ['not a url', /not an absolute URL/],
    ] as const) {
      const result = await transport.send(call(url), { timeoutMs: 1000 });
      assert.is(result.statusCode, null, url);
      assert.match(result.error ?? '', pattern, url);
    }
    assert.is(connections.count, 0);
  } finally {
    connections.restore();
    await transport.close!();
  }
});

test('SSRF: every spelling of this machine is refused before a connection, and nothing arrives', async () => {
  const receiver = await startReceiver();
  const transport = httpTransport();
  const connections = countConnections();
  const p = receiver.port;
  try {
    for (const url of [
      `http://127.0.0.1:${p}/`,
      `http://127.1:${p}/`,
      `http://127.0.1:${p}/`,
      `http://0x7f000001:${p}/`,
      `http://0x7f.0.0.1:${p}/`,
      `http://2130706433:${p}/`,
      `http://0177.0.0.1:${p}/`,
      `http://017700000001:${p}/`,
      `http://%31%32%37.0.0.1:${p}/`,
      `http://[::1]:${p}/`,
      `http://[0:0:0:0:0:0:0:1]:${p}/`,
      `http://[::ffff:127.0.0.1]:${p}/`,
      `http://[::ffff:7f00:1]:${p}/`,
      `http://[::127.0.0.1]:${p}/`,
      `http://0.0.0.0:${p}/`,
      `http://0:${p}/`,
      `http://[::]:${p}/`,
      `https://127.0.0.1:${p}/`,
    ]) {
      const result = await transport.send(call(url), { timeoutMs: 2000 });
      assert.is(result.statusCode, null, url);
      assert.match(result.error ?? '', /^refused to call .+ address \(allowPrivateNetworks is off\)$/, url);
    }
    assert.is(connections.count, 0, 'a literal address is refused before any socket is made');
    const local = await transport.send(call(`http://localhost:${p}/`), { timeoutMs: 2000 });
    assert.is(local.statusCode, null);
    assert.is(
      local.error,
      'refused to call localhost: it has no address the portal may call (allowPrivateNetworks is off)',
    );
    // Whether the resolver knows the fully qualified "localhost." differs between systems; either way nothing is sent.
    const qualified = await transport.send(call(`http://localhost.:${p}/`), { timeoutMs: 2000 });
    assert.is(qualified.statusCode, null);
    assert.match(
      qualified.error ?? '',
      /^refused to call localhost\.: it has no address the portal may call|ENOTFOUND/,
    );
    assert.is(receiver.received.length, 0, 'the receiver on 127.0.0.1 got nothing');
  } finally {
    connections.restore();
    await transport.close!();
    await receiver.close();
  }
});

test('SSRF: private, shared, link-local, metadata, multicast and mapped addresses are refused without connecting', async () => {
  const transport = httpTransport();
  const connections = countConnections();
  try {
    for (const [url, kind] of [
      ['http://169.254.169.254/latest/meta-data/', 'link-local'],
      ['http://[::ffff:169.254.169.254]/', 'link-local'],
      ['http://[::ffff:a9fe:a9fe]/', 'link-local'],
      ['http://10.0.0.1/', 'private'],
      ['http://10.255.255.255:8080/', 'private'],
      ['http://172.16.0.1/', 'private'],
      ['http://172.31.255.254/', 'private'],
      ['http://192.168.1.1/', 'private'],
      ['http://0xc0.0xa8.1.1/', 'private'],
      ['http://[::ffff:10.0.0.1]/', 'private'],
      ['http://100.64.0.1/', 'shared'],
      ['http://100.127.255.254/', 'shared'],
      ['http://[fd00::1]/', 'private'],
      ['http://[fc00::1]/', 'private'],
      ['http://[fe80::1]/', 'link-local'],
      ['http://224.0.0.1/', 'multicast'],
      ['http://239.255.255.250:1900/', 'multicast'],
      ['http://[ff02::1]/', 'multicast'],
      ['http://255.255.255.255/', 'broadcast'],
      ['http://[64:ff9b::a9fe:a9fe]/', 'link-local'],
      ['http://[2002:a9fe:a9fe::1]/', 'link-local'],
    ] as const) {
      const result = await transport.send(call(url), { timeoutMs: 2000 });
      assert.is(result.statusCode, null, url);
      assert.match(
        result.error ?? '',
        new RegExp(`an? ${kind === 'shared' ? 'shared \\(carrier-grade NAT\\)' : kind} address`),
        url,
      );
    }
    assert.is(connections.count, 0);
  } finally {
    connections.restore();
    await transport.close!();
  }
});

test('SSRF: a host name whose answer is private is refused at lookup; the error names no address, the operator log does', async () => {
  const lookups: string[] = [];
  const table: Record<string, string[]> = {
    'metadata.attacker.test': ['169.254.169.254'],
    'rebind.attacker.test': ['127.0.0.1'],
    'internal.attacker.test': ['10.1.2.3', '192.168.0.7'],
    'mapped.attacker.test': ['::ffff:127.0.0.1'],
    'ula.attacker.test': ['fd12:3456::1'],
    'cgnat.attacker.test': ['100.100.100.100'],
  };
  const lookup: LookupFunction = (hostname, options, callback) => {
    lookups.push(hostname);
    fakeLookup(table)(hostname, options, callback);
  };
  const logged: { object: Record<string, unknown>; message?: string }[] = [];
  const logger = {
    ...silentLogger,
    warn: (object: object, message?: string) => logged.push({ object: object as Record<string, unknown>, message }),
  };
  const transport = httpTransport({ lookup, logger });
  try {
    for (const [host, addresses] of Object.entries(table)) {
      const result = await transport.send(call(`http://${host}:8080/hook`), { timeoutMs: 2000 });
      assert.is(result.statusCode, null, host);
      // The tenant reads this in the delivery log: it names the host it gave, never what the host resolves to.
      assert.is(
        result.error,
        `refused to call ${host}: it has no address the portal may call (allowPrivateNetworks is off)`,
      );
      for (const address of addresses) assert.not.ok(result.error!.includes(address), `${host}: ${result.error}`);
      assert.not.match(result.error!, /loopback|private|link-local|shared|resolved/);
      // The operator's log has the whole story.
      const entry = logged.at(-1)!;
      assert.equal([entry.object.hostname, entry.object.addresses], [host, addresses]);
      assert.match(String((entry.object.reasons as string[])[0]), `refused to call ${addresses[0]}: `);
    }
    assert.is(logged.length, Object.keys(table).length);
    assert.equal(lookups, Object.keys(table), 'each name was looked up through the guard');
    // A name with no address at all reads the same: the delivery log does not tell an inside name from none.
    const missing = await transport.send(call('http://no-such-name.test:8080/hook'), { timeoutMs: 2000 });
    assert.is(
      missing.error,
      'refused to call no-such-name.test: it has no address the portal may call (allowPrivateNetworks is off)',
    );
    assert.equal(
      [logged.at(-1)!.object.hostname, logged.at(-1)!.object.reasons],
      ['no-such-name.test', ['does not resolve (ENOTFOUND)']],
    );
  } finally {
    await transport.close!();
  }
});

test('SSRF: the guarded lookup keeps only the allowed addresses of a mixed answer', async () => {
  const lookup = guardedLookup(
    fakeLookup({ 'mixed.test': ['10.0.0.5', '93.184.216.34', '127.0.0.1', '2606:4700::6810:84e5'] }),
  );
  const all = await new Promise<unknown>((resolve, reject) =>
    lookup('mixed.test', { all: true }, (error, addresses) => (error ? reject(error) : resolve(addresses))),
  );
  assert.equal(all, [
    { address: '93.184.216.34', family: 4 },
    { address: '2606:4700::6810:84e5', family: 6 },
  ]);
  const one = await new Promise<unknown>((resolve, reject) =>
    lookup('mixed.test', {}, (error, address, family) => (error ? reject(error) : resolve([address, family]))),
  );
  assert.equal(one, ['93.184.216.34', 4]);
});

test('SSRF: with allowPrivateNetworks a loopback receiver is called', async () => {
  const receiver = await startReceiver();
  const transport = httpTransport({ allowPrivateNetworks: true });
  try {
    assert.is((await transport.send(call(`http://127.1:${receiver.port}/`), { timeoutMs: 5000 })).statusCode, 200);
    assert.is((await transport.send(call(`http://localhost:${receiver.port}/`), { timeoutMs: 5000 })).statusCode, 200);
    assert.is(receiver.received.length, 2);
  } finally {
    await transport.close!();
    await receiver.close();
  }
});

test('chunked, interim and length-framed answers are read, and the connection carries the next call', async () => {
  const answers = [
    'HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nfine\r\n0\r\n\r\n',
    'HTTP/1.1 201 Created\r\nContent-Length: 2\r\nX-Id: 7\r\n\r\nok',
    'HTTP/1.1 204 No Content\r\n\r\n',
  ];
  const server = await rawServer((request) => answers[request]!);
  const transport = httpTransport({ allowPrivateNetworks: true });
  const connections = countConnections();
  try {
    const results = [];
    for (let i = 0; i < answers.length; i++) {
      results.push(await transport.send(call(server.url, `{"n":${i}}`), { timeoutMs: 5000 }));
      await new Promise((resolve) => setImmediate(resolve)); // undici's idle check of the connection
    }
    assert.equal(
      results.map((result) => [result.statusCode, result.error]),
      [
        [200, null],
        [201, null],
        [204, null],
      ],
    );
    assert.is(results[1]!.headers['x-id'], '7');
    assert.equal([server.connections, connections.count], [1, 1], 'one connection for the three calls');
    const [first] = server.requests;
    assert.match(first!.head, /^POST \/hook HTTP\/1\.1\r\n/);
    assert.match(first!.head, /\r\nhost: 127\.0\.0\.1:\d+\r\n/i);
    assert.match(first!.head, /\r\ncontent-length: 7(\r\n|$)/i);
    assert.is(first!.body, '{"n":0}');
  } finally {
    connections.restore();
    await transport.close!();
    await server.close();
  }
});

test('an answer with Connection: close, or read to the close, is not followed by a call on that connection', async () => {
  const server = await rawServer((request) =>
    request === 0
      ? 'HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n'
      : 'HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n',
  );
  const transport = httpTransport({ allowPrivateNetworks: true });
  try {
    for (let i = 0; i < 3; i++)
      assert.is((await transport.send(call(server.url), { timeoutMs: 5000 })).statusCode, 200);
    assert.equal(
      server.requests.map((request) => request.connection),
      [1, 2, 3],
    );
  } finally {
    await transport.close!();
    await server.close();
  }
  const untilClose = net.createServer((socket) => {
    socket.once('data', () =>
      socket.end('HTTP/1.1 500 Oops\r\nContent-Type: text/plain\r\n\r\nall of it, then the close'),
    );
  });
  await new Promise<void>((resolve) => untilClose.listen(0, '127.0.0.1', resolve));
  const other = httpTransport({ allowPrivateNetworks: true });
  try {
    const { port } = untilClose.address() as { port: number };
    const result = await other.send(call(`http://127.0.0.1:${port}/`), { timeoutMs: 5000 });
    assert.equal([result.statusCode, result.error], [500, null]);
  } finally {
    await other.close!();
    await new Promise((resolve) => untilClose.close(resolve));
  }
});

test('a connection the receiver closed while idle is not used again: the next call opens another, without an error', async () => {
  let connections = 0;
  const server = net.createServer((socket) => {
    connections++;
    socket.on('error', () => {});
    // Answers as if it kept the connection, then closes it once the answer is out.
    socket.once('data', () => socket.end('HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n'));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const transport = httpTransport({ allowPrivateNetworks: true });
  try {
    const { port } = server.address() as { port: number };
    for (let i = 0; i < 3; i++) {
      const result = await transport.send(call(`http://127.0.0.1:${port}/`), { timeoutMs: 5000 });
      assert.equal([result.statusCode, result.error], [200, null]);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    assert.is(connections, 3);
  } finally {
    await transport.close!();
    await new Promise((resolve) => server.close(resolve));
  }
});

test('a call is sent once: a kept-alive connection reset after the request went out is a failed attempt, not a resend', async () => {
  // Connection 1 answers its first call, then resets on reading the second.
  const server = await rawServer((request, connection) =>
    connection === 1 && request === 1 ? 'reset' : 'HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n',
  );
  const transport = httpTransport({ allowPrivateNetworks: true });
  try {
    assert.is((await transport.send(call(server.url, '{"n":1}'), { timeoutMs: 5000 })).statusCode, 200);
    await new Promise((resolve) => setTimeout(resolve, 10)); // connection 1 idle and validated: the next call rides it
    const second = await transport.send(call(server.url, '{"n":2}'), { timeoutMs: 5000 });
    assert.is(second.statusCode, null);
    assert.match(second.error ?? '', /ECONNRESET|closed the connection before answering/);
    assert.equal(
      server.requests.map((request) => [request.connection, request.body]),
      [
        [1, '{"n":1}'],
        [1, '{"n":2}'],
      ],
      'the POST arrived once',
    );
    // The next attempt is a call of its own, on a new connection.
    assert.is((await transport.send(call(server.url, '{"n":3}'), { timeoutMs: 5000 })).statusCode, 200);
    assert.equal(
      server.requests.map((request) => request.connection),
      [1, 1, 2],
    );
  } finally {
    await transport.close!();
    await server.close();
  }
});

test('a malformed answer is an error without a status, and its connection is closed', async () => {
  const server = await rawServer(() => 'HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabc');
  const transport = httpTransport({ allowPrivateNetworks: true });
  try {
    const result = await transport.send(call(server.url), { timeoutMs: 5000 });
    assert.equal(result, {
      statusCode: null,
      headers: {},
      error: 'invalid response: its body does not match its Content-Length',
    });
    await transport.send(call(server.url), { timeoutMs: 5000 });
    assert.is(server.connections, 2);
  } finally {
    await transport.close!();
    await server.close();
  }
});

test('a header that would split the request is refused before any connection', async () => {
  const transport = httpTransport({ allowPrivateNetworks: true });
  const connections = countConnections();
  try {
    for (const headers of <Record<string, string>[]>[
      { 'X-Evil': 'a\r\nX-Injected: 1' },
      { 'X-Evil': 'a\nb' },
      { 'Bad Name': 'x' },
      { 'X-Nul': 'a\0b' },
    ]) {
      const result = await transport.send({ ...call('http://127.0.0.1:9/'), headers }, { timeoutMs: 1000 });
      assert.is(result.statusCode, null);
      assert.match(result.error ?? '', /^refused: the header ".+" is not a valid HTTP header$/);
    }
    assert.is(connections.count, 0);
  } finally {
    connections.restore();
    await transport.close!();
  }
});

test('https: a receiver whose certificate is not trusted is refused; one that is, is called', async () => {
  const receiver = await startHttpsReceiver('the https transport test');
  if (receiver === null) return;
  const { port } = receiver;
  const transport = httpTransport({ allowPrivateNetworks: true });
  try {
    const untrusted = await transport.send(call(`https://localhost:${port}/`), { timeoutMs: 5000 });
    assert.is(untrusted.statusCode, null);
    assert.match(untrusted.error ?? '', /self[- ]signed certificate/);
    // The certificate trusted the way an operator would: NODE_EXTRA_CA_CERTS, read at startup.
    // Spawned, not spawnSync: the receiver answers from this process's event loop.
    const child = await execFileAsync(
      process.execPath,
      [
        '--input-type=module',
        '-e',
        `
      const { httpTransport } = await import(${JSON.stringify(new URL('../../adapters/http-transport/index.js', import.meta.url).href)});
      const transport = httpTransport({ allowPrivateNetworks: true });
      const call = (n) => ({ accountId: 'acc_1', url: 'https://localhost:${port}/in', body: '{"n":' + n + '}', headers: { 'Content-Type': 'application/json' } });
      const results = [await transport.send(call(1), { timeoutMs: 5000 }), await transport.send(call(2), { timeoutMs: 5000 })];
      console.log(JSON.stringify(results.map((r) => [r.statusCode, r.error])));
      await transport.close();
    `,
      ],
      { env: { ...process.env, NODE_EXTRA_CA_CERTS: receiver.certificate }, encoding: 'utf8', timeout: 20_000 },
    );
    assert.is(child.stdout.trim(), '[[202,null],[202,null]]', child.stderr);
  } finally {
    await transport.close!();
    await receiver.close();
  }
});

test('undici is loaded with the first call: a portal that calls no webhook does not hold it', async () => {
  const receiver = await startReceiver();
  try {
    // A process of its own, so that no other test has loaded undici before.
    const url = (path: string) => JSON.stringify(new URL(path, import.meta.url).href);
    const child = await runModuleScript(`
      ${loadedProbe('undici')}
      const { createPortal } = await import(${url('../../src/index.js')});
      const { memoryStorage } = await import(${url('../../adapters/memory/index.js')});
      const { httpTransport } = await import(${url('../../adapters/http-transport/index.js')});
      // The portal builds its default transport.
      const portal = await createPortal({ storage: memoryStorage(), auth: { apiKeys: ['lazy-undici-key-0123'] } });
      const transport = httpTransport({ allowPrivateNetworks: true });
      const seen = [loaded()];
      const result = await transport.send({ accountId: 'acc_1', url: '${receiver.url}', body: '{}', headers: { 'Content-Type': 'application/json' } }, { timeoutMs: 5000 });
      seen.push(loaded(), result.statusCode);
      console.log(JSON.stringify(seen));
      await portal.close();
      await transport.close();
    `);
    assert.is(child.stdout.trim(), '[false,true,200]', child.stderr);
  } finally {
    await receiver.close();
  }
});

test('the address classifier: public addresses pass, every special range is named', () => {
  const table: [string, AddressKind][] = [
    ['8.8.8.8', 'public'],
    ['1.1.1.1', 'public'],
    ['93.184.216.34', 'public'],
    ['11.0.0.1', 'public'],
    ['100.63.255.255', 'public'],
    ['100.128.0.0', 'public'],
    ['169.253.255.255', 'public'],
    ['172.15.255.255', 'public'],
    ['172.32.0.0', 'public'],
    ['192.167.255.255', 'public'],
    ['192.169.0.0', 'public'],
    ['223.255.255.255', 'public'],
    ['2606:4700:4700::1111', 'public'],
    ['2001:4860:4860::8888', 'public'],
    ['2001:4860:4860:0:0:0:0:8888', 'public'],
    ['0:0:0:0:0:0:0:1', 'loopback'],
    ['fe80:0:0:0:1:2:3:4', 'link-local'],
    ['::ffff:8.8.8.8', 'public'],
    ['64:ff9b::808:808', 'public'],
    ['2002:808:808::1', 'public'],
    ['0.0.0.0', 'unspecified'],
    ['::', 'unspecified'],
    ['0.1.2.3', 'reserved'],
    ['127.0.0.1', 'loopback'],
    ['127.255.255.254', 'loopback'],
    ['::1', 'loopback'],
    ['[::1]', 'loopback'],
    ['::ffff:127.0.0.1', 'loopback'],
    ['::ffff:7f00:1', 'loopback'],
    ['::127.0.0.1', 'loopback'],
    ['::ffff:0:7f00:1', 'loopback'],
    ['::ffff:0:127.0.0.1', 'loopback'],
    ['::ffff:0:a9fe:a9fe', 'link-local'],
    ['::ffff:0:808:808', 'public'],
    ['::1:2:3:4', 'reserved'],
    ['ff::1', 'reserved'],
    ['64:ff9b::7f00:1', 'loopback'],
    ['2002:7f00:1::', 'loopback'],
    ['10.0.0.0', 'private'],
    ['10.255.255.255', 'private'],
    ['172.16.0.0', 'private'],
    ['172.31.255.255', 'private'],
    ['192.168.0.0', 'private'],
    ['192.168.255.255', 'private'],
    ['fc00::', 'private'],
    ['fdff:ffff::1', 'private'],
    ['fec0::1', 'private'],
    ['::ffff:192.168.1.1', 'private'],
    ['2002:c0a8:101::', 'private'],
    ['100.64.0.0', 'shared'],
    ['100.127.255.255', 'shared'],
    ['169.254.0.1', 'link-local'],
    ['169.254.169.254', 'link-local'],
    ['fe80::1', 'link-local'],
    ['febf:ffff::1', 'link-local'],
    ['fe80::1%eth0', 'link-local'],
    ['224.0.0.1', 'multicast'],
    ['239.255.255.255', 'multicast'],
    ['ff02::1', 'multicast'],
    ['ff0e::1', 'multicast'],
    ['255.255.255.255', 'broadcast'],
    ['240.0.0.1', 'reserved'],
    ['192.0.2.1', 'reserved'],
    ['198.18.0.1', 'reserved'],
    ['198.51.100.1', 'reserved'],
    ['203.0.113.1', 'reserved'],
    ['2001:db8::1', 'reserved'],
    ['2001::1', 'reserved'],
    ['100::1', 'reserved'],
    ['localhost', 'invalid'],
    ['', 'invalid'],
    ['1.2.3', 'invalid'],
    ['256.1.1.1', 'invalid'],
    ['::ffff:1.2.3', 'invalid'],
  ];
  for (const [address, kind] of table) assert.is(classifyAddress(address), kind, address);
});

test.run();
