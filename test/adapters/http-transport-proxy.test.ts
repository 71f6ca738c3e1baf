import { execFile } from 'node:child_process';
import type { LookupAddress } from 'node:dns';
import type { LookupFunction } from 'node:net';
import { promisify } from 'node:util';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { httpTransport } from '../../adapters/http-transport/index.js';
import type { WebhookCall } from '../../src/ports.js';
import { startConnectProxy } from '../helpers/connect-proxy.js';
import { startHttpsReceiver } from '../helpers/https-receiver.js';
import { startReceiver } from '../helpers/receiver.js';

const call = (url: string): WebhookCall => ({
  accountId: 'acc_1',
  webhookId: 'wbh_1',
  url,
  body: '{"id":"evt_1"}',
  headers: { 'Content-Type': 'application/json' },
});

/** DNS as the portal would see it for a receiver on the internet: `receiver.test` is public, `inside.test` private. */
const lookup: LookupFunction = (hostname, options, callback) => {
  const table: Record<string, string> = { 'receiver.test': '93.184.215.14', 'inside.test': '10.0.0.7' };
  const address = table[hostname];
  if (address === undefined)
    return callback(Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' }), '', 0);
  if (options.all) callback(null, [{ address, family: 4 } satisfies LookupAddress]);
  else callback(null, address, 4);
};

test('a close while undici loads: the call under way fails or goes, and the next call opens afresh', async () => {
  const receiver = await startReceiver();
  const proxy = await startConnectProxy({ route: (host) => (host === '93.184.215.14' ? '127.0.0.1' : host) });
  const transport = httpTransport({ proxy: `http://127.0.0.1:${proxy.port}`, lookup });
  try {
    const url = `http://receiver.test:${receiver.port}/hook`;
    // The first call starts loading undici; close() comes before it has loaded, and closes what it makes.
    const during = transport.send(call(url), { timeoutMs: 5000 });
    await transport.close!();
    const first = await during;
    assert.ok(
      first.statusCode === 200 || typeof first.error === 'string',
      'the call under way resolves, sent or failed',
    );
    const after = await transport.send(call(url), { timeoutMs: 5000 });
    assert.equal(
      [after.statusCode, after.error],
      [200, null],
      'a call after close() goes out through a tunnel of its own',
    );
  } finally {
    await transport.close!();
    await proxy.close();
    await receiver.close();
  }
});

test("calls go through the proxy's CONNECT tunnel, with its credentials, and the guard still decides", async () => {
  const receiver = await startReceiver();
  // The proxy, not the portal, reaches the receiver: it routes receiver.test's public address to this machine.
  const proxy = await startConnectProxy({ route: (host) => (host === '93.184.215.14' ? '127.0.0.1' : host) });
  const transport = httpTransport({ proxy: `http://portal:s%3Acret@127.0.0.1:${proxy.port}`, lookup });
  try {
    const url = `http://receiver.test:${receiver.port}/hook`;
    const first = await transport.send(call(url), { timeoutMs: 5000 });
    await new Promise((resolve) => setTimeout(resolve, 10));
    const second = await transport.send(call(url), { timeoutMs: 5000 });
    assert.equal([first.statusCode, second.statusCode, first.error], [200, 200, null]);
    assert.is(receiver.received.length, 2);
    assert.is(receiver.received[0]!.headers.host, `receiver.test:${receiver.port}`);
    assert.equal(
      proxy.tunnels,
      [
        {
          authority: `93.184.215.14:${receiver.port}`,
          authorization: `Basic ${Buffer.from('portal:s:cret').toString('base64')}`,
        },
      ],
      'one tunnel to the address the guard passed, kept alive for the second call',
    );
    // A host that resolves to a private address is refused before the proxy is asked for anything.
    const inside = await transport.send(call('http://inside.test/hook'), { timeoutMs: 5000 });
    assert.equal(
      [inside.statusCode, inside.error],
      [null, 'refused to call inside.test: it has no address the portal may call (allowPrivateNetworks is off)'],
    );
    const literal = await transport.send(call('http://127.0.0.1/hook'), { timeoutMs: 5000 });
    assert.match(literal.error ?? '', /^refused to call 127\.0\.0\.1: a loopback address/);
    assert.is(proxy.tunnels.length, 1);
  } finally {
    await transport.close!();
    await proxy.close();
    await receiver.close();
  }
});

test('through a proxy, CONNECT names the address the guard checked: a name with a loopback address too, or one that rebinds, is never resolved by the proxy', async () => {
  const receiver = await startReceiver();
  // The portal's DNS: both.test has a loopback and a public address; rebind.test is public when the portal asks.
  const twoFaced: LookupFunction = (hostname, options, callback) => {
    const table: Record<string, string[]> = {
      'both.test': ['127.0.0.1', '93.184.215.14'],
      'rebind.test': ['93.184.215.14'],
    };
    const answer = (table[hostname] ?? []).map((address) => ({ address, family: 4 }));
    if (options.all) callback(null, answer);
    else callback(null, answer[0]!.address, 4);
  };
  // The proxy's own DNS, asked later, would take either name to the loopback service; this stand-in
  // for the internet takes the public address to the receiver.
  const proxy = await startConnectProxy({ route: (host) => (host === '93.184.215.14' ? '127.0.0.1' : host) });
  const transport = httpTransport({ proxy: proxy.url, lookup: twoFaced });
  try {
    for (const host of ['both.test', 'rebind.test']) {
      const sent = await transport.send(call(`http://${host}:${receiver.port}/hook`), { timeoutMs: 5000 });
      assert.equal([sent.statusCode, sent.error], [200, null], host);
      assert.is(
        receiver.received.at(-1)!.headers.host,
        `${host}:${receiver.port}`,
        `${host}: the request still names the receiver`,
      );
    }
    assert.equal(
      proxy.tunnels.map((tunnel) => tunnel.authority),
      [`93.184.215.14:${receiver.port}`, `93.184.215.14:${receiver.port}`],
      'each tunnel to the public address the guard passed, never to a name the proxy resolves',
    );
  } finally {
    await transport.close!();
    await proxy.close();
    await receiver.close();
  }
});

test("a proxy that refuses the tunnel, or cannot be reached, is named as the failure, without its credentials; unreachable or 407, marked the portal's own (local)", async () => {
  const wantsCredentials = await startConnectProxy({ refuse: 407 });
  const unauthenticated = httpTransport({ proxy: wantsCredentials.url, lookup });
  try {
    const result = await unauthenticated.send(call('https://receiver.test/hook'), { timeoutMs: 5000 });
    assert.equal([result.statusCode, result.local], [null, true], result.error ?? '');
  } finally {
    await unauthenticated.close!();
    await wantsCredentials.close();
  }
  const proxy = await startConnectProxy({ refuse: 403 });
  const refusing = httpTransport({ proxy: `http://portal:secret@127.0.0.1:${proxy.port}`, lookup });
  try {
    const result = await refusing.send(call('https://receiver.test/hook'), { timeoutMs: 5000 });
    assert.equal(
      [result.statusCode, result.error],
      [null, `the proxy http://127.0.0.1:${proxy.port} answered 403 to CONNECT receiver.test:443`],
    );
    assert.is(result.local, undefined, 'a host the proxy denies is the receiver, not the portal');
  } finally {
    await refusing.close!();
    await proxy.close();
  }
  const gone = httpTransport({ proxy: `http://portal:secret@127.0.0.1:${proxy.port}`, lookup });
  try {
    const result = await gone.send(call('http://receiver.test/hook'), { timeoutMs: 5000 });
    assert.is(result.statusCode, null);
    assert.match(
      result.error ?? '',
      new RegExp(`^the proxy http://127\\.0\\.0\\.1:${proxy.port} could not open a tunnel: .*ECONNREFUSED`),
    );
    assert.not.match(result.error ?? '', /secret/);
    assert.is(result.local, true);
  } finally {
    await gone.close!();
  }
  // A receiver's own failure through a working proxy is not local.
  const receiverGone = await startConnectProxy({ route: () => '127.0.0.1' });
  const through = httpTransport({ proxy: receiverGone.url, lookup });
  try {
    const result = await through.send(call('http://receiver.test:1/hook'), { timeoutMs: 5000 });
    assert.is(result.statusCode, null);
    assert.is(result.local, undefined, result.error ?? '');
  } finally {
    await through.close!();
    await receiverGone.close();
  }
});

test('a proxy option that is not an http or https URL is refused when the transport is made', () => {
  for (const proxy of ['socks5://127.0.0.1:1080', 'not a url', 'ftp://proxy']) {
    assert.throws(() => httpTransport({ proxy }), /proxy must be an http:\/\/ or https:\/\/ URL/, proxy);
  }
});

test('https receivers are reached through the tunnel with TLS to the receiver, trusted by NODE_EXTRA_CA_CERTS', async () => {
  const receiver = await startHttpsReceiver('the https-through-a-proxy test');
  if (receiver === null) return;
  const { port } = receiver;
  const proxy = await startConnectProxy({ route: () => '127.0.0.1' });
  try {
    // Spawned, not spawnSync: the receiver and the proxy answer from this process's event loop.
    const child = await promisify(execFile)(
      process.execPath,
      [
        '--input-type=module',
        '-e',
        `
      const { httpTransport } = await import(${JSON.stringify(new URL('../../adapters/http-transport/index.js', import.meta.url).href)});
      const transport = httpTransport({ allowPrivateNetworks: true, proxy: 'http://127.0.0.1:${proxy.port}' });
      const call = { accountId: 'acc_1', url: 'https://localhost:${port}/in', body: '{}', headers: { 'Content-Type': 'application/json' } };
      const result = await transport.send(call, { timeoutMs: 5000 });
      console.log(JSON.stringify([result.statusCode, result.error]));
      await transport.close();
    `,
      ],
      { env: { ...process.env, NODE_EXTRA_CA_CERTS: receiver.certificate }, encoding: 'utf8', timeout: 20_000 },
    );
    assert.is(child.stdout.trim(), '[202,null]', child.stderr);
    assert.equal(
      proxy.tunnels.map((tunnel) => tunnel.authority),
      [`localhost:${port}`],
    );
    // Without the CA the receiver's certificate is refused, and the error is the receiver's, not the proxy's.
    const untrusted = httpTransport({ allowPrivateNetworks: true, proxy: proxy.url });
    try {
      const result = await untrusted.send(call(`https://localhost:${port}/in`), { timeoutMs: 5000 });
      assert.is(result.statusCode, null);
      assert.match(result.error ?? '', /self[- ]signed certificate/);
    } finally {
      await untrusted.close!();
    }
  } finally {
    await proxy.close();
    await receiver.close();
  }
});

test.run();
