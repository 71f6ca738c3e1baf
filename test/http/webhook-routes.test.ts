import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { memoryTransport } from '../../adapters/memory/index.js';
import { verifyWebhook } from '../../src/index.js';
import { KEY_A, KEY_B, json, rawRequest, rejects, startPortal, withPortal } from '../helpers/server.js';
import { NEVER, deferred, manualClock, waitFor } from '../helpers/webhooks.js';

const post = (body: string, type = 'application/json') => ({ method: 'POST', headers: { 'content-type': type }, body });

test("POST /webhooks: 201 with the webhook and its Location; GET /webhooks lists the account's own", async () => {
  await withPortal({ publicUrl: 'https://portal.example.com/v1/' }, async (app) => {
    const res = await app.api(
      '/webhooks',
      post(JSON.stringify({ type: 'customer-created', url: 'https://r.example/in' })),
    );
    assert.is(res.status, 201);
    const created = await json(res);
    assert.match(created.id, /^wbh_/);
    assert.match(created.secret, /^whsec_/);
    assert.is(res.headers.get('location'), `https://portal.example.com/v1/webhooks/${created.id}`);
    assert.equal(await json(await app.api(`/webhooks/${created.id}`)), created);
    await app.portal.webhooks.create('acct_b', { type: 'customer-created', url: 'https://b.example/' });
    const listed = await json(await app.api('/webhooks'));
    assert.equal(listed, { data: [created] });
    const asB = await json(await app.api('/webhooks', { headers: { authorization: `Bearer ${KEY_B}` } }));
    assert.is(asB.data.length, 1);
    assert.is.not(asB.data[0].id, created.id);
  });
});

test('a filter: given at create, shown by GET, changed by PATCH; only matching events are called; bad ones are a 400 naming the part', async () => {
  const transport = memoryTransport();
  await withPortal({ transport, webhooks: { tick: NEVER } }, async (app) => {
    const filter = {
      'customer.tier': { $in: ['gold', 'platinum'] },
      $not: { 'customer.email': { $endsWith: '@test.example' } },
    };
    const res = await app.api(
      '/webhooks',
      post(JSON.stringify({ type: 'customer-created', url: 'https://r.example/in', filter })),
    );
    assert.is(res.status, 201);
    const created = await json(res);
    assert.equal(created.filter, filter);
    assert.equal(
      Object.keys(created),
      ['id', 'type', 'url', 'secret', 'createdAt', 'filter'],
      'the filter last, its keys in their order',
    );
    assert.equal(await json(await app.api(`/webhooks/${created.id}`)), created);
    const plain = await json(
      await app.api(
        '/webhooks',
        post(JSON.stringify({ type: 'customer-created', url: 'https://r.example/all', filter: null })),
      ),
    );
    assert.not.ok('filter' in plain, 'no filter: no key, as before filters');

    for (const customer of [
      { tier: 'gold', email: 'a@b.example' },
      { tier: 'gold', email: 'qa@test.example' },
      { tier: 'silver' },
      { tier: 'platinum' },
    ]) {
      await app.portal.events.publish('acct_a', 'customer-created', { customer });
    }
    await app.portal.worker!.tick();
    const called = (url: string) =>
      transport.calls.filter((call) => call.url === url).map((call) => JSON.parse(call.body).data.customer.tier);
    assert.equal(called('https://r.example/in'), ['gold', 'platinum']);
    assert.is(called('https://r.example/all').length, 4);
    assert.is(
      (await app.portal.webhooks.deliveries('acct_a', created.id))!.length,
      2,
      'an event the filter refuses makes no delivery at all',
    );

    const patched = await app.api(`/webhooks/${created.id}`, {
      method: 'PATCH',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ filter: { 'customer.tier': 'silver' } }),
    });
    assert.is(patched.status, 200);
    assert.equal((await json(patched)).filter, { 'customer.tier': 'silver' });
    const asB = await app.api(`/webhooks/${created.id}`, {
      method: 'PATCH',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${KEY_B}` },
      body: '{"filter":null}',
    });
    assert.is(asB.status, 404, "another account's webhook");

    const refused = async (body: unknown, pattern: RegExp) => {
      const answer = await app.api('/webhooks', post(JSON.stringify(body)));
      assert.is(answer.status, 400);
      assert.match((await json(answer)).message, pattern);
    };
    await refused(
      { type: 'customer-created', url: 'https://r.example/x', filter: { amount: { $between: [1, 2] } } },
      /^webhook\.filter\.amount\.\$between: is not an operator/,
    );
    await refused(
      { type: 'customer-created', url: 'https://r.example/x', filter: { 'a..b': 1 } },
      /^webhook\.filter\["a\.\.b"\]: is not a path/,
    );
    await refused(
      { type: 'customer-created', url: 'https://r.example/x', filter: ['a'] },
      /^webhook\.filter: must be an object of clauses/,
    );
    await refused(
      { type: 'customer-created', url: 'https://r.example/x', filter: { constructor: { $gt: {} } } },
      /^webhook\.filter\.constructor\.\$gt: must be a number or a string/,
    );
    const badPatch = await app.api(`/webhooks/${created.id}`, {
      method: 'PATCH',
      headers: { 'content-type': 'application/json' },
      body: '{"filter":{"$or":{}}}',
    });
    assert.is(badPatch.status, 400);
    assert.match((await json(badPatch)).message, /^webhook\.filter\.\$or: must be a non-empty array/);
    assert.equal(
      (await json(await app.api(`/webhooks/${created.id}`))).filter,
      { 'customer.tier': 'silver' },
      'a refused change changes nothing',
    );
    assert.is((await json(await app.api('/webhooks'))).data.length, 2, 'a refused create makes nothing');
  });
});

test('a rate limit: given at create, shown by GET and the health, changed and removed by PATCH; a bad one is a 400 naming it and changes nothing', async () => {
  await withPortal({ transport: memoryTransport(), webhooks: { tick: NEVER } }, async (app) => {
    const res = await app.api(
      '/webhooks',
      post(JSON.stringify({ type: 'customer-created', url: 'https://r.example/in', rateLimit: 25 })),
    );
    assert.is(res.status, 201);
    const created = await json(res);
    assert.is(created.rateLimit, 25);
    assert.equal(Object.keys(created), ['id', 'type', 'url', 'secret', 'createdAt', 'rateLimit']);
    assert.equal(await json(await app.api(`/webhooks/${created.id}`)), created);
    const health = async () => (await json(await app.api(`/webhooks/${created.id}/health`))).rateLimit;
    assert.is(await health(), 25);

    const patch = (body: string, key = KEY_A) =>
      app.api(`/webhooks/${created.id}`, {
        method: 'PATCH',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
        body,
      });
    const changed = await patch('{"rateLimit":10000}');
    assert.is(changed.status, 200);
    assert.is((await json(changed)).rateLimit, 10000);
    assert.is((await patch('{"rateLimit":1}', KEY_B)).status, 404, "another account's webhook");
    for (const [body, pattern] of [
      ['{"rateLimit":0}', /^webhook\.rateLimit: must be 1 or more/],
      ['{"rateLimit":10001}', /^webhook\.rateLimit: must be at most 10000/],
      ['{"rateLimit":2.5}', /^webhook\.rateLimit: must be a whole number/],
      ['{"rateLimit":"5"}', /^webhook\.rateLimit: must be a number/],
      ['{}', /must name "filter" or "rateLimit"/],
    ] as const) {
      const refused = await patch(body);
      assert.is(refused.status, 400, body);
      assert.match((await json(refused)).message, pattern, body);
    }
    const badCreate = await app.api(
      '/webhooks',
      post(JSON.stringify({ type: 'customer-created', url: 'https://r.example/x', rateLimit: -1 })),
    );
    assert.is(badCreate.status, 400);
    assert.match((await json(badCreate)).message, /^webhook\.rateLimit: must be 1 or more/);
    assert.is(await health(), 10000, 'a refused change changes nothing');

    const removed = await patch('{"rateLimit":null}');
    assert.is(removed.status, 200);
    assert.not.ok('rateLimit' in (await json(removed)), 'no limit: no key');
    assert.is(await health(), null);
    assert.is((await json(await app.api('/webhooks'))).data.length, 1, 'a refused create makes nothing');
  });
});

test("POST /webhooks/dry-run: the account's latest events of the type, each with whether the filter matches; nothing stored or sent", async () => {
  const transport = memoryTransport();
  await withPortal({ transport, webhooks: { tick: NEVER } }, async (app) => {
    for (let n = 1; n <= 25; n++)
      await app.portal.events.publish('acct_a', 'customer-created', { n, tier: n % 5 === 0 ? 'gold' : 'basic' });
    await app.portal.events.publish('acct_b', 'customer-created', { n: 99, tier: 'gold' });
    const dryRun = (body: unknown, key = KEY_A) =>
      app.api('/webhooks/dry-run', {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
        body: JSON.stringify(body),
      });
    const res = await dryRun({ type: 'customer-created', filter: { tier: 'gold' } });
    assert.is(res.status, 200);
    const result = await json(res);
    assert.equal(
      result.data.map((event: { data: { n: number } }) => event.data.n),
      Array.from({ length: 20 }, (_, i) => 25 - i),
      '20 by default, the most recent first',
    );
    assert.equal(
      result.data
        .filter((event: { matches: boolean }) => event.matches)
        .map((event: { data: { n: number } }) => event.data.n),
      [25, 20, 15, 10],
    );
    assert.is(result.matched, 4);
    assert.equal(Object.keys(result.data[0]), ['id', 'type', 'createdAt', 'data', 'matches']);
    const all = await json(await dryRun({ type: 'customer-created', filter: null, limit: 100 }));
    assert.equal(
      [all.data.length, all.matched],
      [25, 25],
      "no filter matches every event; another account's are not read",
    );
    const asB = await json(await dryRun({ type: 'customer-created', filter: { tier: 'gold' } }, KEY_B));
    assert.equal([asB.data.length, asB.matched], [1, 1]);
    assert.equal((await json(await dryRun({ type: 'agreement-signed', filter: null }))).data, []);
    for (const [body, pattern] of [
      [
        { type: 'customer-created', filter: { tier: { $like: 'g%' } } },
        /^dryRun\.filter\.tier\.\$like: is not an operator/,
      ],
      [{ type: 'customer-created', filter: null, limit: 101 }, /^dryRun\.limit: must be at most 100/],
      [{ type: 'nope', filter: null }, /^dryRun\.type:/],
      [{ type: 'customer-created' }, /^dryRun\.filter: is required/],
    ] as const) {
      const refused = await dryRun(body);
      assert.is(refused.status, 400);
      assert.match((await json(refused)).message, pattern);
    }
    assert.equal(transport.calls, [], 'nothing was sent');
  });
});

test('POST /webhooks: Location follows the Host header when no publicUrl is set', async () => {
  await withPortal(async (app) => {
    const res = await rawRequest(`${app.url}/v1/webhooks`, {
      method: 'POST',
      headers: { host: 'api.example.net:8443', authorization: `Bearer ${KEY_A}`, 'content-type': 'application/json' },
      body: JSON.stringify({ type: 'customer-created', url: 'https://r.example/in' }),
    });
    assert.is(res.status, 201);
    assert.is(res.headers.location, `http://api.example.net:8443/v1/webhooks/${JSON.parse(res.body).id}`);
    const forwarded = await startPortal({ trustProxy: true });
    try {
      const behindProxy = await rawRequest(`${forwarded.url}/v1/webhooks`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${KEY_A}`,
          'content-type': 'application/json',
          'x-forwarded-proto': 'https',
          'x-forwarded-host': 'portal.example.org, internal:8080',
        },
        body: JSON.stringify({ type: 'customer-created', url: 'https://r.example/in' }),
      });
      assert.match(String(behindProxy.headers.location), /^https:\/\/portal\.example\.org\/v1\/webhooks\/wbh_/);
    } finally {
      await forwarded.close();
    }
    const ignored = await rawRequest(`${app.url}/v1/webhooks`, {
      method: 'POST',
      headers: {
        host: 'h.example',
        authorization: `Bearer ${KEY_A}`,
        'content-type': 'application/json',
        'x-forwarded-host': 'evil.example',
      },
      body: JSON.stringify({ type: 'customer-created', url: 'https://r.example/in' }),
    });
    assert.match(
      String(ignored.headers.location),
      /^http:\/\/h\.example\/v1\//,
      'forwarded headers are ignored without trustProxy',
    );
  });
});

test('webhooks.maxPerAccount: the next POST /webhooks and webhooks.create answer 409 naming the limit; other accounts are not held', async () => {
  await withPortal({ webhooks: { maxPerAccount: 3 } }, async (app) => {
    const body = JSON.stringify({ type: 'customer-created', url: 'https://r.example/in' });
    for (let i = 0; i < 3; i++) assert.is((await app.api('/webhooks', post(body))).status, 201);
    const refused = await app.api('/webhooks', post(body));
    assert.is(refused.status, 409);
    assert.match((await json(refused)).message, /already has 3 webhooks.*webhooks\.maxPerAccount/);
    const thrown = await rejects(
      () => app.portal.webhooks.create('acct_a', { type: 'customer-created', url: 'https://r.example/' }),
      /3 webhooks/,
    );
    assert.is(thrown.status, 409);
    assert.is((await app.portal.webhooks.list('acct_a')).length, 3, 'nothing stored past the limit');
    assert.ok(await app.portal.webhooks.create('acct_b', { type: 'customer-created', url: 'https://b.example/' }));
    const [first] = await app.portal.webhooks.list('acct_a');
    await app.portal.webhooks.delete('acct_a', first!.id);
    assert.is((await app.api('/webhooks', post(body))).status, 201, 'a deletion makes room');
  });
});

test('webhooks.maxPerAccount defaults to 50 and must be a positive whole number', async () => {
  await withPortal(async (app) => {
    await Promise.all(
      Array.from({ length: 50 }, () =>
        app.portal.webhooks.create('acct_a', { type: 'customer-created', url: 'https://r.example/' }),
      ),
    );
    await rejects(
      () => app.portal.webhooks.create('acct_a', { type: 'customer-created', url: 'https://r.example/' }),
      /already has 50 webhooks/,
    );
  });
  for (const maxPerAccount of [0, -1, 1.5, '5']) {
    await rejects(
      () => startPortal({ webhooks: { maxPerAccount: maxPerAccount as number } }),
      /webhooks\.maxPerAccount must be a positive whole number/,
    );
  }
});

test('POST /webhooks refuses bad bodies with a 4xx naming the problem, and stores nothing', async () => {
  await withPortal(async (app) => {
    const cases: [RequestInit, number, RegExp][] = [
      [
        post('{"type":"customer-created","url":"https://r.example/"}', 'text/plain'),
        415,
        /Content-Type: application\/json/,
      ],
      [post('{"type":'), 400, /not valid JSON/],
      [post(''), 400, /empty/],
      [post('[]'), 400, /^webhook: must be /],
      [post('"text"'), 400, /webhook: must be an object/],
      [post('{"type":"nope","url":"https://r.example/"}'), 400, /webhook\.type: must be one of/],
      [post('{"type":"customer-created","url":"javascript:alert(1)"}'), 400, /webhook\.url: must use http or https/],
      [post('{"type":"customer-created"}'), 400, /webhook\.url: is required/],
      [
        post(JSON.stringify({ type: 'customer-created', url: 'https://r.example/', id: 'wbh_mine' })),
        400,
        /unknown field "id"/,
      ],
      [
        post(JSON.stringify({ type: 'customer-created', url: 'https://r.example/' + 'x'.repeat(70_000) })),
        413,
        /64 KiB/,
      ],
    ];
    for (const [init, status, pattern] of cases) {
      const res = await app.api('/webhooks', init);
      assert.is(res.status, status, pattern.source);
      assert.match((await json(res)).message, pattern);
    }
    assert.equal(await app.portal.webhooks.list('acct_a'), []);
  });
});

test('POST /webhooks: the URL is stored and shown as it will be called (normalized); tabs and line breaks are refused', async () => {
  const transport = memoryTransport();
  await withPortal({ transport, webhooks: { tick: NEVER } }, async (app) => {
    const cases: [string, string][] = [
      ['HTTPS://Hooks.Example.COM:443/a/./b/../c?x=1#frag', 'https://hooks.example.com/a/c?x=1#frag'],
      ['  https://hooks.example.com/in  ', 'https://hooks.example.com/in'],
      ['http://hooks.example.com', 'http://hooks.example.com/'],
      ['https://bücher.example/ä b', 'https://xn--bcher-kva.example/%C3%A4%20b'],
      ['http://0x7f.1/', 'http://127.0.0.1/'],
    ];
    for (const [sent, shown] of cases) {
      const res = await app.api('/webhooks', post(JSON.stringify({ type: 'customer-created', url: sent })));
      assert.is(res.status, 201, sent);
      const created = await json(res);
      assert.is(created.url, shown, sent);
      assert.is((await json(await app.api(`/webhooks/${created.id}`))).url, shown);
      assert.is((await app.portal.webhooks.get('acct_a', created.id))!.url, shown);
    }
    // The URL shown is the URL called.
    await app.portal.events.publish('acct_a', 'customer-created', {});
    await app.portal.worker!.tick();
    assert.equal(transport.calls.map((call) => call.url).sort(), cases.map(([, shown]) => shown).sort());

    for (const sent of [
      'https://hooks.exa\tmple.com/',
      'https://hooks.example.com/a\nb',
      'https://hooks.example.com/\r',
      'https://evil.example\n.good.example/',
    ]) {
      const res = await app.api('/webhooks', post(JSON.stringify({ type: 'customer-created', url: sent })));
      assert.is(res.status, 400, JSON.stringify(sent));
      assert.match((await json(res)).message, /webhook\.url: must not contain control characters/);
    }
    // A URL that becomes longer than 2,048 characters once written out is refused too.
    const long = `https://hooks.example.com/${'é'.repeat(1000)}`;
    const res = await app.api('/webhooks', post(JSON.stringify({ type: 'customer-created', url: long })));
    assert.is(res.status, 400);
    assert.match((await json(res)).message, /webhook\.url: must be at most 2048 characters/);
    assert.is((await app.portal.webhooks.list('acct_a')).length, cases.length);
  });
});

test('extensions: false serves only the spec routes', async () => {
  await withPortal({ extensions: false }, async (app) => {
    assert.is((await app.api('/webhooks', post('{}'))).status, 404);
    assert.is((await app.api('/webhooks')).status, 404);
    assert.is((await app.api('/webhooks/wbh_x')).status, 404);
    assert.is((await app.api('/files')).status, 200);
  });
});

test('GET /webhooks/{id}/deliveries: the log, newest first, with every attempt; 404 for another account', async () => {
  const time = manualClock(new Date('2026-05-01T10:00:00Z'));
  const transport = memoryTransport({ respond: () => 503 });
  await withPortal({ clock: time.clock, transport, webhooks: { tick: NEVER, retrySchedule: [30] } }, async (app) => {
    const hook = await app.portal.webhooks.create('acct_a', { type: 'customer-created', url: 'https://r.example/in' });
    await app.portal.events.publish('acct_a', 'customer-created', { n: 1 });
    const attempts = async (index: number) =>
      (await app.portal.webhooks.deliveries('acct_a', hook.id))![index]!.attempts.length;
    await waitFor(async () => (await attempts(0)) === 1, 'the first attempt recorded');
    time.advance(60);
    await app.portal.worker!.tick();
    await app.portal.events.publish('acct_a', 'customer-created', { n: 2 });
    await waitFor(async () => (await attempts(0)) === 1, "the second event's first attempt recorded");
    const res = await app.api(`/webhooks/${hook.id}/deliveries`);
    assert.is(res.status, 200);
    const { data } = await json(res);
    assert.is(data.length, 2);
    assert.ok(data[0].createdAt > data[1].createdAt, 'newest first');
    for (const delivery of data) {
      assert.equal(Object.keys(delivery).sort(), [
        'attemptCount',
        'attempts',
        'createdAt',
        'eventId',
        'eventType',
        'id',
        'nextAttemptAt',
        'orderingKey',
        'redeliverQueued',
        'status',
        'webhookId',
      ]);
      assert.match(delivery.id, /^whd_/);
      assert.is(delivery.webhookId, hook.id);
    }
    const first = data[1];
    assert.is(first.attempts.length, 2, 'the retry after 30 s went out at the tick');
    assert.is(first.status, 'failed');
    assert.is(first.attempts[0].statusCode, 503);
    const asB = await app.api(`/webhooks/${hook.id}/deliveries`, { headers: { authorization: `Bearer ${KEY_B}` } });
    assert.is(asB.status, 404);
    assert.is((await app.api('/webhooks/wbh_nothing/deliveries')).status, 404);
  });
});

test('GET /webhooks/{id}/deliveries: pages with nextCursor, filters by the query; a bad query is a 400 naming its part', async () => {
  const time = manualClock(new Date('2026-05-01T10:00:00Z'));
  await withPortal({ clock: time.clock, webhooks: { tick: NEVER } }, async (app) => {
    const hook = await app.portal.webhooks.create('acct_a', { type: 'customer-created', url: 'https://r.example/in' });
    for (let i = 0; i < 7; i++) {
      await app.portal.events.publish('acct_a', 'customer-created', { n: i });
      time.advance(60);
    }
    await app.portal.webhooks.sendTest('acct_a', hook.id);
    const path = `/webhooks/${hook.id}/deliveries`;
    const seen: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const page = await json(
        await app.api(`${path}?limit=3${cursor === null ? '' : `&cursor=${encodeURIComponent(cursor)}`}`),
      );
      assert.ok(page.data.length <= 3);
      seen.push(...page.data.map((delivery: { id: string }) => delivery.id));
      cursor = page.nextCursor;
      pages++;
    } while (cursor !== null);
    assert.is(pages, 3);
    const everything = await app.portal.webhooks.deliveries('acct_a', hook.id, { limit: 500 });
    assert.equal(
      seen,
      everything!.map((delivery) => delivery.id),
    );
    assert.is(everything!.nextCursor, null);
    const tests = await json(await app.api(`${path}?eventType=webhook.test`));
    assert.equal(
      tests.data.map((delivery: { eventType: string }) => delivery.eventType),
      ['webhook.test'],
    );
    const recent = await json(
      await app.api(`${path}?since=${encodeURIComponent('2026-05-01T10:05:00+00:00')}&eventType=customer-created`),
    );
    assert.is(recent.data.length, 2, 'the events of 10:05 and 10:06');
    assert.is((await json(await app.api(`${path}?status=succeeded`))).data.length, 0);
    const one = everything![4]!;
    const byEvent = await json(await app.api(`${path}?eventId=${one.eventId}`));
    assert.equal(
      byEvent.data.map((delivery: { id: string }) => delivery.id),
      [one.id],
    );
    assert.is(byEvent.nextCursor, null);
    for (const [query, named] of [
      ['eventId=whd_1', 'eventId'],
      ['limit=0', 'limit'],
      ['limit=501', 'limit'],
      ['limit=ten', 'limit'],
      ['status=lost', 'status'],
      ['since=yesterday', 'since'],
      ['cursor=bm90IGEgY3Vyc29y', 'cursor'],
      ['limit=2&limit=3', 'limit'],
      ['page=2', 'page'],
    ] as const) {
      const res = await app.api(`${path}?${query}`);
      assert.is(res.status, 400, query);
      assert.match((await json(res)).message, named, query);
    }
    await rejects(() => app.portal.webhooks.deliveries('acct_a', hook.id, { limit: 0 }), /limit/);
  });
});

test('GET /webhooks/{id}/stats: the calls of the last 24 h by hour and of 7 days by 6 hours, by outcome, with their totals', async () => {
  const time = manualClock(new Date('2026-05-01T10:20:00Z'));
  let answer: number | { statusCode: number } = 200;
  const transport = memoryTransport({ respond: () => answer });
  await withPortal({ clock: time.clock, transport, webhooks: { tick: NEVER } }, async (app) => {
    const hook = await app.portal.webhooks.create('acct_a', { type: 'customer-created', url: 'https://r.example/in' });
    for (const status of [200, 200, 503]) {
      answer = status;
      await app.portal.events.publish('acct_a', 'customer-created', { n: status });
      await app.portal.worker!.tick();
    }
    time.advance(3600);
    answer = 204;
    await app.portal.events.publish('acct_a', 'customer-created', { n: 4 });
    await app.portal.worker!.tick();

    const day = await json(await app.api(`/webhooks/${hook.id}/stats`));
    assert.equal(
      [day.window, day.from, day.until, day.bucketSeconds, day.buckets.length],
      ['24h', '2026-04-30T12:00:00+00:00', '2026-05-01T12:00:00+00:00', 3600, 24],
    );
    const outcomes = (bucket: { succeeded: number; failed: number; errors: number }) => [
      bucket.succeeded,
      bucket.failed,
      bucket.errors,
    ];
    assert.equal(outcomes(day.buckets[22]), [2, 1, 0], '10:00');
    assert.equal(outcomes(day.buckets[23]), [2, 0, 0], '11:00: the new event, and the retry of the 503');
    assert.equal(outcomes(day.totals), [4, 1, 0]);
    assert.type(day.totals.p50Ms, 'number');
    assert.is(day.buckets[0].p50Ms, null, 'no calls, no percentile');
    const week = await json(await app.api(`/webhooks/${hook.id}/stats?window=7d`));
    assert.equal([week.bucketSeconds, week.buckets.length], [21600, 28]);
    assert.equal(outcomes(week.totals), [4, 1, 0]);
    assert.equal(await app.portal.webhooks.stats('acct_a', hook.id, { window: '7d' }), week);

    const bad = await app.api(`/webhooks/${hook.id}/stats?window=1y`);
    assert.is(bad.status, 400);
    assert.match((await json(bad)).message, 'window');
    assert.is(
      (await app.api(`/webhooks/${hook.id}/stats`, { headers: { authorization: `Bearer ${KEY_B}` } })).status,
      404,
      'another account',
    );
    assert.is((await app.api('/webhooks/wbh_missing/stats')).status, 404);
  });
});

test('POST …/deliveries/{id}/redeliver: 202 with the delivery pending again; 404 under another webhook or account', async () => {
  const time = manualClock(new Date('2026-05-01T10:00:00Z'));
  let answer = 410;
  const transport = memoryTransport({ respond: () => answer });
  await withPortal({ clock: time.clock, transport, webhooks: { tick: NEVER } }, async (app) => {
    const hook = await app.portal.webhooks.create('acct_a', { type: 'customer-created', url: 'https://r.example/in' });
    const other = await app.portal.webhooks.create('acct_a', {
      type: 'agreement-created',
      url: 'https://r.example/other',
    });
    await app.portal.events.publish('acct_a', 'customer-created', { n: 1 });
    await waitFor(
      async () => (await app.portal.webhooks.deliveries('acct_a', hook.id))![0]!.status === 'failed',
      'the 410 recorded',
    );
    const [failed] = (await app.portal.webhooks.deliveries('acct_a', hook.id))!;
    assert.is(failed!.status, 'failed', '410 ends the delivery');
    const wrongHook = await app.api(`/webhooks/${other.id}/deliveries/${failed!.id}/redeliver`, { method: 'POST' });
    assert.is(wrongHook.status, 404);
    const asB = await app.api(`/webhooks/${hook.id}/deliveries/${failed!.id}/redeliver`, {
      method: 'POST',
      headers: { authorization: `Bearer ${KEY_B}` },
    });
    assert.is(asB.status, 404);
    assert.is(
      (await app.portal.webhooks.deliveries('acct_a', hook.id))![0]!.status,
      'failed',
      'refused calls change nothing',
    );
    // The 410 disabled the webhook too: it gets no calls until enabled again.
    const disabled = await app.api(`/webhooks/${hook.id}/deliveries/${failed!.id}/redeliver`, { method: 'POST' });
    assert.is(disabled.status, 409);
    assert.match((await json(disabled)).message, /disabled/);
    await app.portal.webhooks.enable('acct_a', hook.id);
    answer = 200;
    const res = await app.api(`/webhooks/${hook.id}/deliveries/${failed!.id}/redeliver`, { method: 'POST' });
    assert.is(res.status, 202);
    const body = await json(res);
    assert.is(body.id, failed!.id);
    assert.is(body.status, 'pending');
    await waitFor(
      async () => (await app.portal.webhooks.deliveries('acct_a', hook.id))![0]!.status === 'succeeded',
      'the redelivery recorded',
    );
    const [done] = (await app.portal.webhooks.deliveries('acct_a', hook.id))!;
    assert.is(done!.status, 'succeeded');
    assert.equal(
      done!.attempts.map((attempt) => attempt.statusCode),
      [410, 200],
    );
  });
});

test('POST /webhooks/{id}/test: 202, and a signed webhook.test call goes to that webhook now, in its log', async () => {
  const transport = memoryTransport();
  await withPortal({ transport, webhooks: { tick: NEVER } }, async (app) => {
    const hook = await app.portal.webhooks.create('acct_a', { type: 'agreement-signed', url: 'https://r.example/in' });
    const other = await app.portal.webhooks.create('acct_a', {
      type: 'agreement-signed',
      url: 'https://other.example/in',
    });
    const res = await app.api(`/webhooks/${hook.id}/test`, { method: 'POST' });
    assert.is(res.status, 202);
    const delivery = await json(res);
    assert.equal([delivery.webhookId, delivery.status], [hook.id, 'pending']);
    await waitFor(async () => transport.calls.length === 1, 'the test call sent at once, without a tick');
    const call = transport.calls[0]!;
    assert.is(call.url, hook.url);
    const payload = verifyWebhook(hook.secret!, call.headers, call.body) as { id: string; type: string; data: unknown };
    assert.equal([payload.id, payload.type, payload.data], [delivery.eventId, 'webhook.test', { webhookId: hook.id }]);
    await waitFor(
      async () => (await app.portal.webhooks.deliveries('acct_a', hook.id))![0]!.status === 'succeeded',
      'the attempt recorded',
    );
    const { data } = await json(await app.api(`/webhooks/${hook.id}/deliveries`));
    assert.equal(
      data.map((entry: { id: string }) => entry.id),
      [delivery.id],
    );
    assert.equal(await app.portal.webhooks.deliveries('acct_a', other.id), [], 'only the webhook tested');
    assert.is(
      (await app.api(`/webhooks/${hook.id}/test`, { method: 'POST', headers: { authorization: `Bearer ${KEY_B}` } }))
        .status,
      404,
    );
    assert.is((await app.api('/webhooks/wbh_nothing/test', { method: 'POST' })).status, 404);
  });
});

test("POST …/redeliver during the delivery's call answers 202, queued: one more call follows that one, never two at once", async () => {
  const release = deferred<number>();
  let calls = 0;
  let inFlight = 0;
  let most = 0;
  const transport = memoryTransport({
    respond: async () => {
      calls++;
      most = Math.max(most, ++inFlight);
      const status = await release.promise;
      inFlight--;
      return status;
    },
  });
  await withPortal({ transport, webhooks: { tick: NEVER, concurrency: 8 } }, async (app) => {
    const hook = await app.portal.webhooks.create('acct_a', { type: 'customer-created', url: 'https://r.example/in' });
    await app.portal.events.publish('acct_a', 'customer-created', { n: 1 });
    await waitFor(() => calls === 1, 'the first call to start');
    const [delivery] = (await app.portal.webhooks.deliveries('acct_a', hook.id))!;
    for (let i = 0; i < 10; i++) {
      const res = await app.api(`/webhooks/${hook.id}/deliveries/${delivery!.id}/redeliver`, { method: 'POST' });
      assert.is(res.status, 202);
      const body = await json(res);
      assert.equal([body.id, body.status, body.redeliverQueued], [delivery!.id, 'pending', true]);
    }
    assert.is(calls, 1, 'no second call while the first is in flight');
    release.resolve(200);
    await waitFor(
      async () => (await app.portal.webhooks.deliveries('acct_a', hook.id))![0]!.attemptCount === 2,
      'the one more call recorded',
    );
    const [done] = (await app.portal.webhooks.deliveries('acct_a', hook.id))!;
    assert.equal(
      [done!.status, done!.attempts.length, done!.redeliverQueued, calls, most],
      ['succeeded', 2, false, 2, 1],
      'ten redelivers, one more call',
    );
    assert.is(
      (await app.api(`/webhooks/${hook.id}/deliveries/${delivery!.id}/redeliver`, { method: 'POST' })).status,
      202,
      'once recorded it may go again',
    );
  });
});

test.run();
