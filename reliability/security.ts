/**
 * Security: every route under no key, a wrong key and the other account's key; download links
 * tampered, expired and replayed; the SSRF guard through the real HTTP transport; secrets in logs.
 */
import net from 'node:net';
import { httpTransport } from '../adapters/http-transport/index.js';
import type { LookupFunction } from 'node:net';
import { MULTIPART, multipart, validParts } from '../test/helpers/agreements.js';
import { withParam } from '../test/helpers/download.js';
import { startReceiver } from '../test/helpers/receiver.js';
import { KEY_A, KEY_B } from '../test/helpers/server.js';
import { exchange, isJsonError, type RawRequest } from './raw-http.js';
import { capturedLogs, secretsUsed, type Target } from './target.js';
import { check, count, row } from './tally.js';

const SECTION = 'security';

/** What of account A a body of another must never hold. */
function markersOfA(target: Target): string[] {
  const { a } = target;
  return [
    a.webhook.id,
    a.webhook.secret!,
    a.webhook.url,
    a.attachment.id,
    a.directoryId,
    'private-dir-a',
    'file-a.txt',
    a.agreementId,
    a.deliveryId,
    'Secret Customer A',
  ];
}

export async function authMatrix(target: Target): Promise<void> {
  const into = row(SECTION, 'routes x {no key, wrong key, other account}');
  const { a } = target;
  const json: [string, string] = ['Content-Type', 'application/json'];
  const routes: { name: string; request: RawRequest; ownedByA: boolean }[] = [
    { name: 'GET /webhooks/{id}', request: { path: `/v1/webhooks/${a.webhook.id}` }, ownedByA: true },
    { name: 'HEAD /webhooks/{id}', request: { method: 'HEAD', path: `/v1/webhooks/${a.webhook.id}` }, ownedByA: true },
    {
      name: 'DELETE /webhooks/{id}',
      request: { method: 'DELETE', path: `/v1/webhooks/${a.webhook.id}` },
      ownedByA: true,
    },
    {
      name: 'GET /webhooks/{id}/deliveries',
      request: { path: `/v1/webhooks/${a.webhook.id}/deliveries` },
      ownedByA: true,
    },
    {
      name: 'POST …/redeliver',
      request: { method: 'POST', path: `/v1/webhooks/${a.webhook.id}/deliveries/${a.deliveryId}/redeliver` },
      ownedByA: true,
    },
    { name: 'GET /agreements/{id}', request: { path: `/v1/agreements/${a.agreementId}` }, ownedByA: true },
    { name: 'GET /files?directoryId', request: { path: `/v1/files?directoryId=${a.directoryId}` }, ownedByA: true },
    {
      name: 'GET /tickets/…/download',
      request: {
        path: `/v1/tickets/${a.attachment.ticketId}/message/${a.attachment.messageId}/attachment/${a.attachment.id}/download`,
      },
      ownedByA: true,
    },
    { name: 'GET /webhooks', request: { path: '/v1/webhooks' }, ownedByA: false },
    { name: 'GET /files', request: { path: '/v1/files' }, ownedByA: false },
    {
      name: 'POST /webhooks',
      request: {
        method: 'POST',
        path: '/v1/webhooks',
        headers: [json],
        body: JSON.stringify({ type: 'customer-created', url: 'https://hooks.example.com/new' }),
      },
      ownedByA: false,
    },
    {
      name: 'POST /agreements',
      request: {
        method: 'POST',
        path: '/v1/agreements',
        headers: [['Content-Type', MULTIPART]],
        body: multipart(validParts()),
      },
      ownedByA: false,
    },
  ];
  const keys: { who: string; header: [string, string] | null }[] = [
    { who: 'no key', header: null },
    { who: 'wrong key', header: ['Authorization', 'Bearer not-a-key-of-anyone'] },
    { who: 'near key', header: ['Authorization', `Bearer ${KEY_A.slice(0, -1)}z`] },
    { who: 'malformed', header: ['Authorization', KEY_A] },
    { who: 'other account', header: ['Authorization', `Bearer ${KEY_B}`] },
  ];
  const markers = markersOfA(target);
  for (const route of routes) {
    for (const key of keys) {
      const headers = [...(route.request.headers ?? []), ...(key.header === null ? [] : [key.header])];
      const answer = await exchange(target.app.url, { ...route.request, headers }, 10_000);
      // An id the request itself named may be echoed in its error; anything else of A's is a leak.
      const asked = route.request.path + String(route.request.body ?? '');
      const leaked = markers.filter(
        (marker) =>
          !asked.includes(marker) && (answer.body.includes(marker) || JSON.stringify(answer.headers).includes(marker)),
      );
      const detail = `${route.name} with ${key.who}: ${answer.status} ${answer.body.slice(0, 150)}${leaked.length ? ` LEAKED ${leaked.join(', ')}` : ''}`;
      if (answer.hung) count(into, 'hung', detail);
      else if (answer.status >= 500) count(into, '5xx', detail);
      else if (key.who !== 'other account') {
        const realm = /^Bearer realm="customer-portal"/.test(answer.headers['www-authenticate'] ?? '');
        const jsonBody = route.request.method === 'HEAD' || isJsonError(answer);
        check(into, answer.status === 401 && realm && jsonBody && leaked.length === 0, detail);
      } else if (route.ownedByA) {
        check(into, answer.status === 404 && leaked.length === 0, detail);
      } else {
        check(into, answer.status >= 200 && answer.status < 300 && leaked.length === 0, detail);
      }
    }
  }
  // The other account's DELETE and redeliver must have changed nothing of A's.
  const still = await target.app.portal.webhooks.get('acct_a', a.webhook.id);
  check(into, still !== null, 'account A lost its webhook to requests under other keys', 'lost');
}

export async function downloadLinks(target: Target): Promise<void> {
  const into = row(SECTION, 'download links tampered, expired, replayed');
  const { a, app } = target;
  const linkRes = await app.api(
    `/tickets/${a.attachment.ticketId}/message/${a.attachment.messageId}/attachment/${a.attachment.id}/download`,
  );
  const { link } = (await linkRes.json()) as { link: string };
  const url = new URL(link);
  const signature = url.searchParams.get('signature')!;
  secretsUsed.add(signature);
  const get = async (href: string, headers: [string, string][] = []) => {
    const target2 = new URL(href);
    return exchange(app.url, { path: target2.pathname + target2.search, headers });
  };
  const expect = async (what: string, href: string, status: number, headers: [string, string][] = []) => {
    const answer = await get(href, headers);
    const detail = `${what}: ${answer.status} ${answer.body.slice(0, 120)}`;
    if (answer.hung) count(into, 'hung', detail);
    else if (answer.status >= 500) count(into, '5xx', detail);
    else
      check(
        into,
        answer.status === status &&
          (status === 200
            ? answer.body === 'private bytes of account A'
            : isJsonError(answer) && !answer.body.includes('private bytes')),
        detail,
      );
  };
  await expect('the link as given', link, 200);
  const flip = (text: string) => text.slice(0, -1) + (text.endsWith('A') ? 'B' : 'A');
  for (const name of ['account', 'ticket', 'message', 'expires', 'signature']) {
    const value = url.searchParams.get(name)!;
    await expect(`${name} with its last character changed`, withParam(link, name, flip(value)), 403);
    await expect(`${name} removed`, withParam(link, name, null), 403);
    await expect(`${name} empty`, withParam(link, name, ''), 403);
    await expect(`${name} given twice`, `${link}&${name}=${encodeURIComponent(value)}`, 403);
  }
  await expect(
    'expires one second later',
    withParam(link, 'expires', String(Number(url.searchParams.get('expires')) + 1)),
    403,
  );
  await expect('expires with a leading zero', withParam(link, 'expires', '0' + url.searchParams.get('expires')), 403);
  await expect(
    'signature in base64 instead of base64url',
    withParam(link, 'signature', signature.replace(/-/g, '+').replace(/_/g, '/') + '='),
    403,
  );
  await expect('signature in lower case', withParam(link, 'signature', signature.toLowerCase()), 403);
  await expect('attachment id in the path changed', link.replace(a.attachment.id, flip(a.attachment.id)), 403);
  await expect('replayed with the other account', withParam(link, 'account', 'acct_b'), 403);
  await expect('replayed with the other account and its key', withParam(link, 'account', 'acct_b'), 403, [
    ['Authorization', `Bearer ${KEY_B}`],
  ]);
  // The other account may not even get a link to A's attachment.
  const otherLink = await exchange(app.url, {
    path: `/v1/tickets/${a.attachment.ticketId}/message/${a.attachment.messageId}/attachment/${a.attachment.id}/download`,
    headers: [['Authorization', `Bearer ${KEY_B}`]],
  });
  check(
    into,
    otherLink.status === 404 && !otherLink.body.includes('signature='),
    `link asked by the other account: ${otherLink.status}`,
  );
  target.skew(301);
  try {
    await expect('expired (clock 5 min 1 s later)', link, 410);
  } finally {
    target.skew(0);
  }
  await expect('the link again, after all of that', link, 200);
}

/** Refused address kinds as URLs; each must be refused before any socket is opened. */
const REFUSED_URLS = [
  // IPv4 literals, one or more per refused range
  ...[
    '127.0.0.1',
    '127.255.255.254',
    '10.0.0.1',
    '10.255.255.255',
    '172.16.0.1',
    '172.31.255.255',
    '192.168.0.1',
    '192.168.255.255',
    '169.254.169.254',
    '169.254.0.1',
    '100.64.0.1',
    '100.127.255.254',
    '0.0.0.0',
    '0.1.2.3',
    '255.255.255.255',
    '224.0.0.1',
    '239.255.255.250',
    '240.0.0.1',
    '192.0.0.1',
    '192.0.2.1',
    '192.88.99.1',
    '198.18.0.1',
    '198.19.255.255',
    '198.51.100.1',
    '203.0.113.1',
  ].map((ip) => `http://${ip}/hook`),
  // the same places spelled as decimal, octal, hex and short forms
  ...[
    '2130706433',
    '0x7f000001',
    '017700000001',
    '0177.0.0.1',
    '0x7f.0.0.1',
    '127.1',
    '127.0.1',
    '0',
    '0x0',
    '2852039166',
    '0xa9fea9fe',
    '0251.0376.0251.0376',
    '169.254.43518',
    '0xA9.0xFE.0xA9.0xFE',
    '167772161',
    '0xc0a80001',
    '3232235521',
    '0300.0250.0.1',
    '127.000.000.001',
  ].map((ip) => `http://${ip}/hook`),
  // IPv6: loopback, unspecified, mapped and compatible IPv4, link-local, unique local, site-local, multicast, NAT64, 6to4, Teredo, documentation, discard
  ...[
    '::1',
    '::',
    '0:0:0:0:0:0:0:1',
    '::ffff:127.0.0.1',
    '::ffff:7f00:1',
    '::ffff:169.254.169.254',
    '::ffff:a9fe:a9fe',
    '::ffff:10.0.0.1',
    '::127.0.0.1',
    '::a9fe:a9fe',
    'fe80::1',
    'febf::1',
    'fc00::1',
    'fd12:3456::1',
    'fec0::1',
    'ff02::1',
    'ff0e::1',
    '64:ff9b::7f00:1',
    '64:ff9b::a9fe:a9fe',
    '64:ff9b:1::1',
    '2002:7f00:1::1',
    '2002:a9fe:a9fe::1',
    '2001::1',
    '2001:db8::1',
    '100::1',
    '::ffff:0:7f00:1',
  ].map((ip) => `http://[${ip}]/hook`),
  'http://[fe80::1%25eth0]/hook',
  // host names that resolve to loopback (from /etc/hosts: no DNS traffic)
  'http://localhost/hook',
  'http://LOCALHOST:9/hook',
  'http://localhost./hook',
  // schemes and credentials
  'http://user:pass@hooks.example.com/hook',
  'https://user@hooks.example.com/',
  'file:///etc/passwd',
  'ftp://hooks.example.com/',
  'gopher://127.0.0.1:25/',
  'data:text/plain,x',
  'not a url',
];

/** Host names a custom resolver maps to refused addresses: the guard must check what the lookup answers. */
const RESOLVED: Record<string, { address: string; family: number }[]> = {
  'metadata.test': [{ address: '169.254.169.254', family: 4 }],
  'loopback.test': [{ address: '127.0.0.1', family: 4 }],
  'mapped.test': [{ address: '::ffff:127.0.0.1', family: 6 }],
  'mixed.test': [
    { address: '10.0.0.5', family: 4 },
    { address: '::1', family: 6 },
  ],
  'private6.test': [{ address: 'fd00::5', family: 6 }],
};
const fakeLookup: LookupFunction = (hostname, options, callback) => {
  const answer = RESOLVED[hostname];
  if (answer === undefined)
    return (callback as (error: Error) => void)(
      Object.assign(new Error(`ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' }),
    );
  if (options.all) return (callback as (error: null, all: typeof answer) => void)(null, answer);
  callback(null, answer[0]!.address, answer[0]!.family);
};

const isLoopback = (address: string) => /^127\./.test(address) || address === '::1' || /^::ffff:127\./.test(address);

/**
 * Watches every socket the process opens while `run` goes: an attempt to connect to anything but a
 * loopback address is recorded and stopped before a packet leaves.
 */
async function watchingConnects<T>(run: () => Promise<T>): Promise<{ result: T; outside: string[] }> {
  const outside: string[] = [];
  const original = net.Socket.prototype.connect;
  const patched = function (this: net.Socket, ...args: unknown[]) {
    const first = Array.isArray(args[0]) ? args[0][0] : args[0];
    const options = (
      typeof first === 'object' && first !== null ? first : { port: first, host: args[1] }
    ) as net.TcpNetConnectOpts;
    const host = options.host ?? 'localhost';
    if (net.isIP(host) !== 0 && !isLoopback(host)) {
      outside.push(host);
      process.nextTick(() => this.destroy(new Error(`the suite stopped a connection to ${host}`)));
      return this;
    }
    if (typeof options.lookup === 'function') {
      const lookup = options.lookup;
      options.lookup = ((hostname: string, lookupOptions: object, callback: (...a: unknown[]) => void) =>
        lookup(hostname, lookupOptions as never, (error: unknown, address: unknown, family: unknown) => {
          const addresses = Array.isArray(address)
            ? (address as { address: string }[]).map((entry) => entry.address)
            : [address as string];
          const far = error ? [] : addresses.filter((entry) => entry && !isLoopback(entry));
          if (far.length > 0) {
            outside.push(...far);
            return callback(new Error(`the suite stopped a connection to ${far.join(', ')}`));
          }
          callback(error, address, family);
        })) as never;
    }
    return original.apply(this, args as never);
  };
  net.Socket.prototype.connect = patched as never;
  try {
    return { result: await run(), outside };
  } finally {
    net.Socket.prototype.connect = original;
  }
}

export async function ssrf(): Promise<void> {
  const into = row(SECTION, 'SSRF through the HTTP transport');
  const transport = httpTransport({ timeoutMs: 2000 });
  const resolving = httpTransport({ timeoutMs: 2000, lookup: fakeLookup });
  const call = (url: string) => ({
    accountId: 'acc_ssrf',
    webhookId: 'wbh_ssrf',
    url,
    headers: { 'content-type': 'application/json' },
    body: '{}',
  });
  try {
    for (const url of REFUSED_URLS) {
      const { result, outside } = await watchingConnects(() => transport.send(call(url), { timeoutMs: 2000 }));
      // A name that does not resolve (`localhost.` is not in /etc/hosts) is as good as a refusal: nothing was called.
      const stopped = /refused|ENOTFOUND/.test(result.error ?? '');
      check(
        into,
        result.statusCode === null && stopped && outside.length === 0,
        `${url}: ${JSON.stringify(result)}${outside.length ? ` connected to ${outside}` : ''}`,
      );
    }
    for (const host of Object.keys(RESOLVED)) {
      const url = `http://${host}:8080/hook`;
      const { result, outside } = await watchingConnects(() => resolving.send(call(url), { timeoutMs: 2000 }));
      check(
        into,
        result.statusCode === null && /refused/.test(result.error ?? '') && outside.length === 0,
        `${url} (custom lookup): ${JSON.stringify(result)}${outside.length ? ` connected to ${outside}` : ''}`,
      );
    }
  } finally {
    await transport.close?.();
    await resolving.close?.();
  }
  // A receiver the portal may call (allowPrivateNetworks) redirects to the metadata address: not followed.
  const receiver = await startReceiver();
  const open = httpTransport({ timeoutMs: 2000, allowPrivateNetworks: true });
  try {
    for (const [status, location] of [
      [302, 'http://169.254.169.254/latest/meta-data/'],
      [307, 'http://169.254.169.254/latest/meta-data/'],
      [301, 'http://[::ffff:a9fe:a9fe]/'],
      [308, 'http://10.0.0.1/'],
    ] as const) {
      receiver.script([{ status, headers: { Location: location } }]);
      const before = receiver.received.length;
      const { result, outside } = await watchingConnects(() =>
        open.send(call(`${receiver.url}/redirect`), { timeoutMs: 2000 }),
      );
      check(
        into,
        result.statusCode === status && receiver.received.length === before + 1 && outside.length === 0,
        `redirect ${status} to ${location}: ${JSON.stringify(result)}${outside.length ? ` connected to ${outside}` : ''}`,
      );
    }
  } finally {
    await open.close?.();
    await receiver.close();
  }
}

/** Every key, webhook secret, link signature and webhook signature the suite met, against every log line. */
export function secretsInLogs(): void {
  const into = row(SECTION, 'secrets in logs');
  into.notes.push(
    `${secretsUsed.size} secrets (keys, webhook secrets, link and webhook signatures) checked against ${capturedLogs.length} log lines`,
  );
  // Thousands of signatures against tens of thousands of lines: look each up among the lines' tokens
  // (runs of key and base64 characters), and search the few long-lived secrets as substrings too.
  const tokens = new Set<string>();
  for (const line of capturedLogs) for (const token of line.match(/[A-Za-z0-9+/=_-]{8,}/g) ?? []) tokens.add(token);
  const all = capturedLogs.join('\n');
  for (const secret of secretsUsed) {
    if (secret.length < 8) continue;
    const bare = secret.replace(/^whsec_/, '');
    const durable = /^whsec_|^key-|^signing-key/.test(secret);
    const found = tokens.has(secret) || tokens.has(bare) || (durable && (all.includes(secret) || all.includes(bare)));
    const line = found ? capturedLogs.find((text) => text.includes(bare)) : undefined;
    check(into, !found, `a secret (${secret.slice(0, 6)}…) appears in: ${line?.slice(0, 200)}`);
  }
}
