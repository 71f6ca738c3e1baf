import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { verifyWebhook, type Portal, type Webhook } from '../../src/index.js';
import { silentLogger } from '../../src/shared/logger.js';
import { atom } from '../../src/shared/time.js';
import { VERSION } from '../../src/shared/version.js';
import { startReceiver, type Receiver } from '../helpers/receiver.js';
import { manualClock, secondsBetween, waitFor, webhookPortal } from '../helpers/webhooks.js';

/**
 * End to end against a real receiver on 127.0.0.1 that checks every call with the `standardwebhooks`
 * package: publish, the first attempt at once, then the schedule driven by `tick()` and a manual clock.
 */
interface Setup {
  portal: Portal;
  receiver: Receiver;
  webhook: Webhook;
  time: ReturnType<typeof manualClock>;
  /** The one delivery of the webhook, as the log shows it. */
  delivery(): Promise<NonNullable<Awaited<ReturnType<Portal['webhooks']['deliveries']>>>[number]>;
  close(): Promise<void>;
}

async function setup(webhooks: { retrySchedule?: number[]; timeoutMs?: number } = {}): Promise<Setup> {
  let secret: string | undefined;
  const receiver = await startReceiver({ secret: () => secret });
  const time = manualClock();
  const portal = await webhookPortal({
    clock: time.clock,
    webhooks: { allowPrivateNetworks: true, retrySchedule: [10, 60], ...webhooks },
  });
  const webhook = await portal.webhooks.create('acct_a', {
    type: 'customer-created',
    url: `${receiver.url}/hooks/customer`,
  });
  secret = webhook.secret;
  return {
    portal,
    receiver,
    webhook,
    time,
    async delivery() {
      const log = (await portal.webhooks.deliveries('acct_a', webhook.id))!;
      assert.is(log.length, 1, 'one delivery');
      return log[0]!;
    },
    async close() {
      await portal.close();
      await receiver.close();
    },
  };
}

const customer = { customer: { id: 'cus_42', name: 'Grace Hopper', email: 'grace@example.com' } };

test('publish stores the event and the first attempt goes out at once, signed and verifiable', async () => {
  const app = await setup();
  try {
    const event = await app.portal.events.publish('acct_a', 'customer-created', customer);
    assert.match(event.id, /^evt_[0-9A-Za-z]{22}$/);
    assert.equal(event, { id: event.id, type: 'customer-created', createdAt: event.createdAt, data: customer });
    await waitFor(() => app.receiver.received.length === 1, 'the first attempt');
    const [request] = app.receiver.received;
    assert.is(request!.verified, 'ok', 'the Standard Webhooks library accepts the call');
    assert.is(request!.method, 'POST');
    assert.is(request!.url, '/hooks/customer');
    assert.is(
      request!.body,
      JSON.stringify({ id: event.id, type: 'customer-created', createdAt: event.createdAt, data: customer }),
    );
    assert.equal(Object.keys(JSON.parse(request!.body)), ['id', 'type', 'createdAt', 'data']);
    const { headers } = request!;
    assert.is(headers['content-type'], 'application/json');
    assert.is(headers['user-agent'], `customer-portal/${VERSION}`);
    assert.is(VERSION, '0.1.0');
    assert.is(headers['webhook-id'], event.id);
    assert.is(headers['webhook-timestamp'], String(app.time.now.getTime() / 1000));
    assert.match(headers['webhook-signature'] as string, /^v1,[A-Za-z0-9+/]{43}=$/);
    assert.is(headers['x-webhook-signature'], headers['webhook-signature']);
    assert.equal(verifyWebhook(app.webhook.secret!, headers as Record<string, string>, request!.body), event);

    await waitFor(async () => (await app.delivery()).status === 'succeeded', 'the attempt to be recorded');
    const delivery = await app.delivery();
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
    assert.equal(
      { ...delivery, attempts: [] },
      {
        id: delivery.id,
        webhookId: app.webhook.id,
        eventId: event.id,
        eventType: 'customer-created',
        status: 'succeeded',
        attempts: [],
        attemptCount: 1,
        nextAttemptAt: null,
        createdAt: event.createdAt,
        orderingKey: null,
        redeliverQueued: false,
      },
    );
    assert.equal(
      delivery.attempts.map(({ durationMs: _, ...rest }) => rest),
      [{ at: event.createdAt, statusCode: 200, error: null }],
    );
    assert.ok(Number.isInteger(delivery.attempts[0]!.durationMs) && delivery.attempts[0]!.durationMs >= 0);
  } finally {
    await app.close();
  }
});

test('a 500 is retried on schedule, the same webhook-id and a new timestamp; then a 200 ends it', async () => {
  const app = await setup();
  app.receiver.script([{ status: 500 }]);
  try {
    const event = await app.portal.events.publish('acct_a', 'customer-created', customer);
    await app.portal.worker!.tick();
    let delivery = await app.delivery();
    assert.equal([delivery.status, delivery.attempts.length, delivery.attempts[0]!.statusCode], ['pending', 1, 500]);
    const wait = secondsBetween(app.time.now, delivery.nextAttemptAt!);
    assert.ok(wait >= 9 && wait <= 11, `first retry after 10 s ± 10 % (got ${wait})`);

    app.time.advance(wait - 1);
    await app.portal.worker!.tick();
    assert.is(app.receiver.received.length, 1, 'nothing before it is due');
    app.time.to(delivery.nextAttemptAt!);
    await app.portal.worker!.tick();
    delivery = await app.delivery();
    assert.equal(
      [delivery.status, delivery.nextAttemptAt, delivery.attempts.map((a) => a.statusCode)],
      ['succeeded', null, [500, 200]],
    );
    const [first, second] = app.receiver.received;
    assert.equal([first!.verified, second!.verified], ['ok', 'ok']);
    assert.equal([first!.headers['webhook-id'], second!.headers['webhook-id']], [event.id, event.id]);
    assert.is(Number(second!.headers['webhook-timestamp']) - Number(first!.headers['webhook-timestamp']), wait);
    assert.is.not(first!.headers['webhook-signature'], second!.headers['webhook-signature']);
    assert.is(second!.body, first!.body);
    assert.is(delivery.attempts[1]!.at, atom(app.time.now), 'each attempt is logged at its own time');
  } finally {
    await app.close();
  }
});

test('410 Gone ends the delivery at once: failed, no retry', async () => {
  const app = await setup();
  app.receiver.script([{ status: 410 }]);
  try {
    await app.portal.events.publish('acct_a', 'customer-created', customer);
    await app.portal.worker!.tick();
    const delivery = await app.delivery();
    assert.equal(
      [delivery.status, delivery.nextAttemptAt, delivery.attempts.map((a) => a.statusCode)],
      ['failed', null, [410]],
    );
    app.time.advance(86_400);
    await app.portal.worker!.tick();
    assert.is(app.receiver.received.length, 1);
  } finally {
    await app.close();
  }
});

test('429 or 503 with Retry-After holds the webhook until then, sooner or later than the schedule, spending no retry and no health; on a 500 it changes nothing', async () => {
  const app = await setup({ retrySchedule: [10, 10] });
  const retryAt = new Date(app.time.now.getTime() + 250_000);
  app.receiver.script([
    { status: 429, headers: { 'Retry-After': '120' } },
    { status: 503, headers: { 'Retry-After': '2' } },
    { status: 500, headers: { 'Retry-After': '100' } },
    { status: 503, headers: { 'Retry-After': retryAt.toUTCString() } },
    { status: 429, headers: { 'Retry-After': '99999' } },
  ]);
  try {
    await app.portal.events.publish('acct_a', 'customer-created', customer);
    await app.portal.worker!.tick();
    const waits: number[] = [];
    const held: (string | null)[] = [];
    const failures: number[] = [];
    let dateWait = 0;
    for (let attempt = 0; attempt < 5; attempt++) {
      const delivery = await app.delivery();
      const health = (await app.portal.webhooks.health('acct_a', app.webhook.id))!;
      waits.push(secondsBetween(app.time.now, delivery.nextAttemptAt!));
      held.push(health.heldUntil);
      failures.push(health.consecutiveFailures);
      if (attempt === 3) dateWait = (retryAt.getTime() - app.time.now.getTime()) / 1000;
      // The last hold is an hour: the receiver's clock would refuse a call signed that far ahead.
      if (attempt === 4) break;
      app.time.to(delivery.nextAttemptAt!);
      await app.portal.worker!.tick();
    }
    assert.is(waits[0], 120, 'Retry-After: 120 on a 429');
    assert.is(waits[1], 2, 'a Retry-After sooner than the schedule is honoured too');
    assert.ok(waits[2]! >= 9 && waits[2]! <= 11, `Retry-After on a 500 is not honoured (${waits[2]})`);
    assert.ok(dateWait > 60, 'the date asks for longer than the schedule');
    assert.is(waits[3], dateWait, 'an HTTP-date Retry-After on a 503');
    assert.is(waits[4], 3600, 'a hold lasts an hour at most');
    assert.equal(
      held.map((until) => until !== null),
      [true, true, false, true, true],
      'the health says until when, while it holds',
    );
    assert.equal(failures, [0, 0, 1, 1, 1], 'only the 500 counts as a failure');
    const delivery = await app.delivery();
    assert.equal(
      [delivery.status, delivery.attempts.map((a) => a.statusCode), delivery.attempts.map((a) => a.held ?? false)],
      ['pending', [429, 503, 500, 503, 429], [true, true, false, true, true]],
      'five answers but one failure: a two-step schedule is not spent',
    );
    assert.ok(app.receiver.received.every((request) => request.verified === 'ok'));
  } finally {
    await app.close();
  }
});

test('a Retry-After holds only its own webhook: another webhook of the account is called meanwhile', async () => {
  const app = await setup();
  const other = await startReceiver({ secret: () => undefined });
  try {
    await app.portal.webhooks.create('acct_a', { type: 'customer-created', url: `${other.url}/hooks/other` });
    app.receiver.script([{ status: 429, headers: { 'Retry-After': '30' } }]);
    await app.portal.events.publish('acct_a', 'customer-created', customer);
    await app.portal.worker!.tick();
    assert.is(app.receiver.received.length, 1);
    assert.is(other.received.length, 1);
    app.time.advance(5);
    await app.portal.events.publish('acct_a', 'customer-created', customer);
    await app.portal.worker!.tick();
    assert.is(app.receiver.received.length, 1, 'the held webhook gets no call before its time');
    assert.is(other.received.length, 2, 'the other one is called at once');
    const log = (await app.portal.webhooks.deliveries('acct_a', app.webhook.id))!;
    const heldUntil = (await app.portal.webhooks.health('acct_a', app.webhook.id))!.heldUntil!;
    assert.ok(
      log.every((one) => one.status === 'pending' && one.nextAttemptAt === heldUntil),
      'both wait until then',
    );
    app.time.to(heldUntil);
    await app.portal.worker!.tick();
    assert.is(app.receiver.received.length, 3, 'both go when the hold ends');
    assert.is((await app.portal.webhooks.health('acct_a', app.webhook.id))!.heldUntil, null);
  } finally {
    await other.close();
    await app.close();
  }
});

test('a receiver that hangs past timeoutMs is a failed attempt with the timeout as its error', async () => {
  // A second, not less: the next call must answer within it on a machine busy with other tests.
  const app = await setup({ timeoutMs: 1000 });
  app.receiver.script([{ hang: true }]);
  try {
    await app.portal.events.publish('acct_a', 'customer-created', customer);
    await app.portal.worker!.tick();
    let delivery = await app.delivery();
    assert.equal(
      delivery.attempts.map(({ statusCode, error }) => ({ statusCode, error })),
      [{ statusCode: null, error: 'timed out after 1000 ms' }],
    );
    assert.is(delivery.status, 'pending');
    app.time.to(delivery.nextAttemptAt!);
    await app.portal.worker!.tick();
    delivery = await app.delivery();
    assert.equal([delivery.status, delivery.attempts.length], ['succeeded', 2]);
  } finally {
    await app.close();
  }
});

test('a redirect is a failed attempt, and the Location is never called', async () => {
  const app = await setup();
  app.receiver.script([{ status: 302, headers: { Location: '/somewhere-else' } }]);
  try {
    await app.portal.events.publish('acct_a', 'customer-created', customer);
    await app.portal.worker!.tick();
    const delivery = await app.delivery();
    assert.equal(
      delivery.attempts.map(({ statusCode, error }) => ({ statusCode, error })),
      [{ statusCode: 302, error: 'redirect not followed' }],
    );
    assert.is(delivery.status, 'pending');
    assert.equal(
      app.receiver.received.map((request) => request.url),
      ['/hooks/customer'],
    );
  } finally {
    await app.close();
  }
});

test('after the last retry the delivery is failed; redeliver starts a fresh schedule and keeps the log', async () => {
  const app = await setup({ retrySchedule: [10, 20] });
  app.receiver.script([], { status: 500 });
  try {
    await app.portal.events.publish('acct_a', 'customer-created', customer);
    await app.portal.worker!.tick();
    for (let retry = 0; retry < 2; retry++) {
      app.time.to((await app.delivery()).nextAttemptAt!);
      await app.portal.worker!.tick();
    }
    let delivery = await app.delivery();
    assert.equal([delivery.status, delivery.nextAttemptAt, delivery.attempts.length], ['failed', null, 3]);
    app.time.advance(3600);
    await app.portal.worker!.tick();
    assert.is(app.receiver.received.length, 3, 'a failed delivery is not tried again');

    app.time.advance(-3600 + 5);
    const again = await app.portal.webhooks.redeliver('acct_a', delivery.id);
    assert.equal([again!.status, again!.nextAttemptAt, again!.attempts.length], ['pending', atom(app.time.now), 3]);
    await waitFor(() => app.receiver.received.length === 4, 'the redelivery to go out at once');
    await app.portal.worker!.tick();
    delivery = await app.delivery();
    assert.equal([delivery.status, delivery.attempts.length], ['pending', 4]);
    const wait = secondsBetween(app.time.now, delivery.nextAttemptAt!);
    assert.ok(wait >= 9 && wait <= 11, `the schedule starts again at its first step (${wait})`);
    app.receiver.script([{ status: 204 }]);
    app.time.to(delivery.nextAttemptAt!);
    await app.portal.worker!.tick();
    delivery = await app.delivery();
    assert.equal(
      [delivery.status, delivery.attempts.map((a) => a.statusCode)],
      ['succeeded', [500, 500, 500, 500, 204]],
    );
    assert.ok(app.receiver.received.every((request) => request.verified === 'ok'));
  } finally {
    await app.close();
  }
});

test('without allowPrivateNetworks the default transport refuses the loopback receiver: nothing arrives', async () => {
  const receiver = await startReceiver();
  const time = manualClock();
  const portal = await webhookPortal({ clock: time.clock });
  try {
    const webhook = await portal.webhooks.create('acct_a', { type: 'customer-created', url: `${receiver.url}/hook` });
    await portal.events.publish('acct_a', 'customer-created', customer);
    await portal.worker!.tick();
    const [delivery] = (await portal.webhooks.deliveries('acct_a', webhook.id))!;
    assert.is(delivery!.attempts[0]!.statusCode, null);
    assert.match(delivery!.attempts[0]!.error!, /^refused to call 127\.0\.0\.1: a loopback address/);
    assert.is(delivery!.status, 'pending', 'a refused call is retried like any failure');
    assert.is(receiver.received.length, 0);
  } finally {
    await portal.close();
    await receiver.close();
  }
});

test('a host name resolving to a refused address: the delivery log names the host only, the operator log has the address', async () => {
  const receiver = await startReceiver();
  const time = manualClock();
  const warnings: Record<string, unknown>[] = [];
  const logger = { ...silentLogger, warn: (object: object) => warnings.push(object as Record<string, unknown>) };
  const portal = await webhookPortal({ clock: time.clock, logger });
  try {
    const port = new URL(receiver.url).port;
    const webhook = await portal.webhooks.create('acct_a', {
      type: 'customer-created',
      url: `http://localhost:${port}/hook`,
    });
    await portal.events.publish('acct_a', 'customer-created', customer);
    await portal.worker!.tick();
    const [delivery] = (await portal.webhooks.deliveries('acct_a', webhook.id))!;
    const error = delivery!.attempts[0]!.error!;
    assert.is(error, 'refused to call localhost: it has no address the portal may call (allowPrivateNetworks is off)');
    assert.not.match(error, /127\.0\.0\.1|::1|loopback/);
    const refusal = warnings.find((entry) => entry.hostname === 'localhost');
    assert.ok(refusal, 'the refusal is in the operator log');
    assert.ok((refusal!.addresses as string[]).some((address) => address === '127.0.0.1' || address === '::1'));
    assert.is(receiver.received.length, 0);
  } finally {
    await portal.close();
    await receiver.close();
  }
});

test.run();
