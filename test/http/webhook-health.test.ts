import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { memoryTransport } from '../../adapters/memory/index.js';
import type { OperationalEvent } from '../../src/index.js';
import type { Logger } from '../../src/shared/logger.js';
import { silentLogger } from '../../src/shared/logger.js';
import { atom } from '../../src/shared/time.js';
import { KEY_B, json, withPortal } from '../helpers/server.js';
import { NEVER, manualClock } from '../helpers/webhooks.js';

const post = (body?: unknown) =>
  body === undefined
    ? { method: 'POST' }
    : { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) };
const eventIdOf = (call: { body: string }) => (JSON.parse(call.body) as { id: string }).id;

/** A logger that keeps its error lines. */
function recordingLogger() {
  const errors: string[] = [];
  const logger: Logger = {
    ...silentLogger,
    error: (_fields: unknown, message?: string) => void errors.push(String(message)),
  };
  return { logger, errors };
}

test("GET /webhooks/{id}/health: a new webhook is enabled with nothing failed; another account's is 404", async () => {
  await withPortal(async (app) => {
    const hook = await app.portal.webhooks.create('acct_a', { type: 'customer-created', url: 'https://r.example/' });
    const res = await app.api(`/webhooks/${hook.id}/health`);
    assert.is(res.status, 200);
    assert.equal(await json(res), {
      status: 'enabled',
      disabledReason: null,
      disabledAt: null,
      failingSince: null,
      lastSuccessAt: null,
      lastAttemptAt: null,
      consecutiveFailures: 0,
      heldUntil: null,
      rateLimit: null,
      inFlightLimit: null,
    });
    assert.is(
      (await app.api(`/webhooks/${hook.id}/health`, { headers: { authorization: `Bearer ${KEY_B}` } })).status,
      404,
    );
    assert.is((await app.api('/webhooks/wbh_nope/health')).status, 404);
    assert.is((await app.api('/webhooks/not-an-id/health')).status, 404);
    assert.is(await app.portal.webhooks.health('acct_b', hook.id), null);
  });
});

test('a receiver answering 500 past both thresholds is disabled: webhook.disabled fires once, calls stop, a throwing listener breaks nothing', async () => {
  const time = manualClock();
  const transport = memoryTransport({ respond: () => 500 });
  const { logger, errors } = recordingLogger();
  await withPortal(
    // Retries an hour apart (± 10 % jitter): the third failure comes 108 to 132 minutes after the first.
    {
      clock: time.clock,
      transport,
      logger,
      webhooks: {
        tick: NEVER,
        retrySchedule: [3600, 3600, 3600, 3600],
        disableAfterMs: 90 * 60_000,
        disableAfterFailures: 3,
      },
    },
    async (app) => {
      const seen: OperationalEvent[] = [];
      app.portal.on('webhook.disabled', () => {
        throw new Error("the host's mailer is down");
      });
      const stop = app.portal.on('webhook.disabled', (event) => void seen.push(event));
      app.portal.on('delivery.exhausted', (event) => void seen.push(event));
      const hook = await app.portal.webhooks.create('acct_a', { type: 'customer-created', url: 'https://r.example/' });
      await app.portal.events.publish('acct_a', 'customer-created', { n: 1 });
      const failingSince = atom(time.now);
      for (let minutes = 0; minutes <= 6 * 60; minutes += 5) {
        await app.portal.worker!.tick();
        time.advance(300);
      }
      assert.is(
        transport.calls.length,
        3,
        'the third failure, over 90 minutes after the first, disables it; no call after',
      );
      const health = await json(await app.api(`/webhooks/${hook.id}/health`));
      assert.ok(Date.parse(health.disabledAt) - Date.parse(failingSince) >= 90 * 60_000);
      assert.equal(health, {
        status: 'disabled',
        disabledReason: 'failing',
        disabledAt: health.lastAttemptAt,
        failingSince,
        lastSuccessAt: null,
        lastAttemptAt: health.disabledAt,
        consecutiveFailures: 3,
        heldUntil: null,
        rateLimit: null,
        inFlightLimit: null,
      });
      const [delivery] = (await app.portal.webhooks.deliveries('acct_a', hook.id)) ?? [];
      assert.equal(seen, [
        {
          type: 'webhook.disabled',
          accountId: 'acct_a',
          webhookId: hook.id,
          deliveryId: delivery!.id,
          reason: 'failing',
          at: health.disabledAt,
        },
      ]);
      assert.is(delivery!.status, 'cancelled', 'its next retry fell due while disabled');
      assert.ok(errors.includes('an operational event listener failed'), 'the throwing listener is logged');
      stop();
      await app.portal.webhooks.enable('acct_a', hook.id);
      await app.portal.webhooks.disable('acct_a', hook.id);
      assert.is(seen.length, 1, 'a stopped listener hears nothing more');
    },
  );
});

test("an egress proxy's outage is not the tenant's: no auto-disable, no retry used up, the call goes once the proxy is back", async () => {
  const time = manualClock();
  let proxyUp = false;
  const transport = memoryTransport({
    respond: () =>
      proxyUp
        ? 204
        : {
            statusCode: null,
            error: 'the proxy http://proxy.internal:3128 could not open a tunnel: connect ECONNREFUSED',
            local: true,
          },
  });
  await withPortal(
    {
      clock: time.clock,
      transport,
      webhooks: { tick: NEVER, retrySchedule: [60, 60], disableAfterMs: 60_000, disableAfterFailures: 2 },
    },
    async (app) => {
      const disabled: OperationalEvent[] = [];
      app.portal.on('webhook.disabled', (event) => void disabled.push(event));
      app.portal.on('delivery.exhausted', (event) => void disabled.push(event));
      const hook = await app.portal.webhooks.create('acct_a', { type: 'customer-created', url: 'https://r.example/' });
      await app.portal.events.publish('acct_a', 'customer-created', { n: 1 });
      // Thirty minutes of outage: past both thresholds and the whole schedule many times over.
      for (let minutes = 0; minutes < 30; minutes++) {
        await app.portal.worker!.tick();
        time.advance(60);
      }
      assert.ok(transport.calls.length >= 10, `tried again and again: ${transport.calls.length}`);
      assert.equal(disabled, [], 'neither disabled nor exhausted');
      const health = await json(await app.api(`/webhooks/${hook.id}/health`));
      assert.equal([health.status, health.consecutiveFailures], ['enabled', 0]);
      const [during] = (await app.portal.webhooks.deliveries('acct_a', hook.id)) ?? [];
      assert.is(during!.status, 'pending');
      assert.ok(
        during!.attempts.every((attempt) => attempt.local === true && attempt.statusCode === null),
        'each attempt marked local',
      );
      proxyUp = true;
      time.advance(120);
      await app.portal.worker!.tick();
      const [after] = (await app.portal.webhooks.deliveries('acct_a', hook.id)) ?? [];
      assert.is(after!.status, 'succeeded');
    },
  );
});

test('a 410 disables the webhook at once (gone) and ends its delivery: webhook.disabled and delivery.exhausted', async () => {
  const time = manualClock();
  const transport = memoryTransport({ respond: () => 410 });
  await withPortal({ clock: time.clock, transport, webhooks: { tick: NEVER } }, async (app) => {
    const seen: OperationalEvent[] = [];
    for (const type of ['webhook.disabled', 'delivery.exhausted', 'delivery.recovered'] as const)
      app.portal.on(type, (event) => void seen.push(event));
    const hook = await app.portal.webhooks.create('acct_a', { type: 'customer-created', url: 'https://r.example/' });
    const event = await app.portal.events.publish('acct_a', 'customer-created', { n: 1 });
    await app.portal.worker!.tick();
    const at = atom(time.now);
    time.advance(5);
    await app.portal.events.publish('acct_a', 'customer-created', { n: 2 });
    await app.portal.worker!.tick();
    const health = (await app.portal.webhooks.health('acct_a', hook.id))!;
    assert.equal([health.status, health.disabledReason, health.consecutiveFailures], ['disabled', 'gone', 1]);
    assert.is(transport.calls.length, 1, 'the second event is not sent');
    const log = (await app.portal.webhooks.deliveries('acct_a', hook.id))!;
    const first = log.find((delivery) => delivery.eventId === event.id)!;
    assert.equal(seen, [
      { type: 'webhook.disabled', accountId: 'acct_a', webhookId: hook.id, deliveryId: first.id, reason: 'gone', at },
      {
        type: 'delivery.exhausted',
        accountId: 'acct_a',
        webhookId: hook.id,
        deliveryId: first.id,
        reason: 'gone',
        at,
        eventId: event.id,
        attempts: 1,
        statusCode: 410,
        error: null,
      },
    ]);
    assert.equal(log.map((delivery) => delivery.status).sort(), ['cancelled', 'failed']);
  });
});

test('GET /webhooks/{id}/health says until when a Retry-After holds the calls; the log marks the attempt held', async () => {
  const time = manualClock();
  let holding = true;
  const transport = memoryTransport({
    respond: () => (holding ? { statusCode: 429, headers: { 'retry-after': '90' } } : 200),
  });
  await withPortal({ clock: time.clock, transport, webhooks: { tick: NEVER } }, async (app) => {
    const hook = await app.portal.webhooks.create('acct_a', { type: 'customer-created', url: 'https://r.example/' });
    await app.portal.events.publish('acct_a', 'customer-created', { n: 1 });
    await app.portal.worker!.tick();
    const until = atom(new Date(time.now.getTime() + 90_000));
    const health = await json(await app.api(`/webhooks/${hook.id}/health`));
    assert.equal(
      [health.status, health.consecutiveFailures, health.heldUntil, health.lastAttemptAt],
      ['enabled', 0, until, null],
      'held, and no failure',
    );
    const [delivery] = (await json(await app.api(`/webhooks/${hook.id}/deliveries`))).data;
    assert.equal(delivery.attempts, [{ ...delivery.attempts[0], statusCode: 429, held: true }]);
    assert.is(delivery.nextAttemptAt, until);
    holding = false;
    time.to(until);
    await app.portal.worker!.tick();
    const after = await json(await app.api(`/webhooks/${hook.id}/health`));
    assert.equal([after.heldUntil, after.lastSuccessAt], [null, until]);
  });
});

test('delivery.exhausted when the last retry fails, delivery.recovered when a failing delivery succeeds', async () => {
  const time = manualClock();
  let answer = 500;
  const transport = memoryTransport({ respond: () => answer });
  await withPortal(
    { clock: time.clock, transport, webhooks: { tick: NEVER, retrySchedule: [60], disableAfterFailures: 100 } },
    async (app) => {
      const seen: OperationalEvent[] = [];
      app.portal.on('delivery.exhausted', (event) => void seen.push(event));
      app.portal.on('delivery.recovered', (event) => void seen.push(event));
      const hook = await app.portal.webhooks.create('acct_a', { type: 'customer-created', url: 'https://r.example/' });
      const event = await app.portal.events.publish('acct_a', 'customer-created', {});
      await app.portal.worker!.tick();
      time.advance(70);
      await app.portal.worker!.tick();
      const [delivery] = (await app.portal.webhooks.deliveries('acct_a', hook.id))!;
      assert.is(delivery!.status, 'failed');
      assert.equal(seen, [
        {
          type: 'delivery.exhausted',
          accountId: 'acct_a',
          webhookId: hook.id,
          deliveryId: delivery!.id,
          reason: 'retries-exhausted',
          at: atom(time.now),
          eventId: event.id,
          attempts: 2,
          statusCode: 500,
          error: null,
        },
      ]);
      answer = 204;
      await app.portal.webhooks.redeliver('acct_a', delivery!.id);
      await app.portal.worker!.tick();
      assert.equal(seen.slice(1), [
        {
          type: 'delivery.recovered',
          accountId: 'acct_a',
          webhookId: hook.id,
          deliveryId: delivery!.id,
          reason: 'succeeded-after-failures',
          at: atom(time.now),
          eventId: event.id,
          failedAttempts: 2,
        },
      ]);
      await app.portal.events.publish('acct_a', 'customer-created', {});
      await app.portal.worker!.tick();
      assert.is(seen.length, 2, 'a first-time success is no recovery');
    },
  );
});

test('POST /webhooks/{id}/disable and /enable: 204, once each in effect; disabling by hand emits webhook.disabled (manual)', async () => {
  await withPortal(async (app) => {
    const seen: OperationalEvent[] = [];
    app.portal.on('webhook.disabled', (event) => void seen.push(event));
    const hook = await app.portal.webhooks.create('acct_a', { type: 'customer-created', url: 'https://r.example/' });
    for (let i = 0; i < 2; i++) {
      const res = await app.api(`/webhooks/${hook.id}/disable`, post());
      assert.is(res.status, 204);
      assert.is(await res.text(), '');
    }
    assert.is(seen.length, 1);
    assert.equal(
      { ...seen[0], at: '' },
      { type: 'webhook.disabled', accountId: 'acct_a', webhookId: hook.id, deliveryId: null, reason: 'manual', at: '' },
    );
    assert.is((await json(await app.api(`/webhooks/${hook.id}/health`))).disabledReason, 'manual');
    assert.is((await app.api(`/webhooks/${hook.id}/enable`, post())).status, 204);
    assert.is((await app.api(`/webhooks/${hook.id}/enable`, post())).status, 204);
    assert.is((await json(await app.api(`/webhooks/${hook.id}/health`))).status, 'enabled');
    for (const action of ['disable', 'enable']) {
      assert.is(
        (await app.api(`/webhooks/${hook.id}/${action}`, { ...post(), headers: { authorization: `Bearer ${KEY_B}` } }))
          .status,
        404,
      );
      assert.is((await app.api(`/webhooks/wbh_nope/${action}`, post())).status, 404);
    }
    assert.is(await app.portal.webhooks.disable('acct_b', hook.id), null);
    assert.is((await app.portal.webhooks.disable('acct_a', hook.id))!.status, 'disabled');
    assert.is((await app.portal.webhooks.enable('acct_a', hook.id))!.status, 'enabled');
  });
});

test('POST /webhooks/{id}/recover: exactly the missed events are delivered, once; 409 while disabled, 400 naming since, 404', async () => {
  const time = manualClock();
  let down = false;
  const transport = memoryTransport({ respond: () => (down ? 503 : 200) });
  await withPortal({ clock: time.clock, transport, webhooks: { tick: NEVER, retrySchedule: [60] } }, async (app) => {
    const hook = await app.portal.webhooks.create('acct_a', { type: 'customer-created', url: 'https://r.example/' });
    const publish = (n: number) => app.portal.events.publish('acct_a', 'customer-created', { n });
    const delivered = await publish(1);
    await app.portal.worker!.tick();
    const since = atom(time.now);
    down = true;
    const exhausted = await publish(2);
    await app.portal.worker!.tick();
    time.advance(70);
    await app.portal.worker!.tick();
    await app.api(`/webhooks/${hook.id}/disable`, post());
    const held = await publish(3);
    await app.portal.worker!.tick();

    const recover = (body: unknown, key?: string) =>
      app.api(`/webhooks/${hook.id}/recover`, {
        ...post(body),
        ...(key ? { headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` } } : {}),
      });
    const refused = await recover({ since });
    assert.is(refused.status, 409);
    assert.match((await json(refused)).message, /disabled/);
    await app.api(`/webhooks/${hook.id}/enable`, post());
    down = false;
    transport.calls.length = 0;

    for (const [body, pattern] of [
      [{ since: 'last tuesday' }, /since/],
      [{ since: '2026-13-45T00:00:00+00:00' }, /since/],
      [{ since: '2026-01-01T00:00:00' }, /since/],
      [{}, /since/],
      [{ since, extra: 1 }, /extra/],
    ] as const) {
      const res = await recover(body);
      assert.is(res.status, 400, JSON.stringify(body));
      assert.match((await json(res)).message, pattern);
    }
    assert.is((await recover({ since }, KEY_B)).status, 404);
    assert.is((await app.api('/webhooks/wbh_nope/recover', post({ since }))).status, 404);
    assert.is(transport.calls.length, 0, 'nothing was queued by the refusals');

    const res = await recover({ since });
    assert.is(res.status, 202);
    assert.equal(await json(res), { queued: 2 });
    await app.portal.worker!.tick();
    assert.equal(
      transport.calls.map(eventIdOf).sort(),
      [exhausted.id, held.id].sort(),
      'the exhausted and the held event; not the delivered one',
    );
    assert.equal(
      await json(await recover({ since: new Date(0).toISOString() })),
      { queued: 0 },
      'a second recovery queues nothing twice',
    );
    assert.equal(await app.portal.webhooks.recover('acct_a', hook.id, { since: new Date(0) }), { queued: 0 });
    assert.ok(!transport.calls.map(eventIdOf).includes(delivered.id));
  });
});

test('portal.on refuses an unknown event type and a listener that is not a function', async () => {
  await withPortal(async (app) => {
    assert.throws(() => app.portal.on('webhook.exploded' as never, () => {}), /unknown event type "webhook.exploded"/);
    assert.throws(() => app.portal.on('webhook.disabled', 'nope' as never), /must be a function/);
    const listener = () => {};
    assert.is(app.portal.off('webhook.disabled', listener), false);
    app.portal.on('webhook.disabled', listener);
    assert.is(app.portal.off('webhook.disabled', listener), true);
  });
});

test('with extensions: false the lifecycle routes are not served', async () => {
  await withPortal({ extensions: false }, async (app) => {
    const hook = await app.portal.webhooks.create('acct_a', { type: 'customer-created', url: 'https://r.example/' });
    assert.is((await app.api(`/webhooks/${hook.id}/health`)).status, 404);
    for (const action of ['disable', 'enable', 'recover'])
      assert.is((await app.api(`/webhooks/${hook.id}/${action}`, post({}))).status, 404);
  });
});

test('webhooks.disableAfterMs and webhooks.disableAfterFailures are checked at start', async () => {
  for (const webhooks of [{ disableAfterMs: -1 }, { disableAfterMs: 1.5 }, { disableAfterFailures: 0 }]) {
    let message = '';
    await withPortal({ webhooks }, async () => {}).catch((error: Error) => (message = error.message));
    assert.match(message, /webhooks\.disableAfter/);
  }
});

test.run();
