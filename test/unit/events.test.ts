import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { memoryStorage, memoryTransport } from '../../adapters/memory/index.js';
import { HttpError } from '../../src/index.js';
import { rejects } from '../helpers/server.js';
import { manualClock, webhookPortal } from '../helpers/webhooks.js';

const HOOK = { type: 'customer-created', url: 'https://receiver.example/hook' };

test('publish refuses an unknown type, data that is not a JSON object, and an empty account, storing nothing', async () => {
  const storage = memoryStorage();
  const portal = await webhookPortal({ storage, transport: memoryTransport() });
  try {
    const webhook = await portal.webhooks.create('acct_a', HOOK);
    const cycle: Record<string, unknown> = {};
    cycle.self = cycle;
    for (const [account, type, data, pattern] of [
      [
        'acct_a',
        'customer-deleted',
        {},
        /eventType: must be one of: customer-created, agreement-created, agreement-signed/,
      ],
      ['acct_a', 'customer-created', [1, 2], /JSON object/],
      ['acct_a', 'customer-created', 'text', /JSON object/],
      ['acct_a', 'customer-created', null, /JSON object/],
      ['acct_a', 'customer-created', undefined, /JSON object/],
      ['acct_a', 'customer-created', { big: 10n }, /cannot be written as JSON/],
      ['acct_a', 'customer-created', cycle, /cannot be written as JSON/],
      ['', 'customer-created', {}, /accountId/],
    ] as const) {
      const error = await rejects(() => portal.events.publish(account, type, data), pattern);
      assert.instance(error, HttpError);
      assert.is(error.status, 400);
    }
    assert.equal(await portal.webhooks.deliveries('acct_a', webhook.id), []);
  } finally {
    await portal.close();
  }
});

test('publish stores data as the JSON it is sent as, and eventTypes decides what may be published', async () => {
  const transport = memoryTransport();
  const portal = await webhookPortal({ transport, eventTypes: ['invoice-paid'] });
  try {
    await portal.webhooks.create('acct_a', { ...HOOK, type: 'invoice-paid' });
    const event = await portal.events.publish('acct_a', 'invoice-paid', {
      at: new Date('2026-01-02T03:04:05Z'),
      skip: undefined,
      n: 1,
    });
    assert.equal(event.data, { at: '2026-01-02T03:04:05.000Z', n: 1 });
    await portal.worker!.tick();
    assert.equal(JSON.parse(transport.calls[0]!.body).data, event.data);
    await rejects(() => portal.events.publish('acct_a', 'customer-created', {}), /must be one of: invoice-paid/);
  } finally {
    await portal.close();
  }
});

test('an event reaches only the webhooks of its account and type', async () => {
  const transport = memoryTransport();
  const portal = await webhookPortal({ transport });
  try {
    const mine = await portal.webhooks.create('acct_a', HOOK);
    const second = await portal.webhooks.create('acct_a', { ...HOOK, url: 'https://second.example/hook' });
    const otherType = await portal.webhooks.create('acct_a', { ...HOOK, type: 'agreement-signed' });
    const otherAccount = await portal.webhooks.create('acct_b', HOOK);
    const event = await portal.events.publish('acct_a', 'customer-created', { customer: { id: 'cus_1' } });
    await portal.worker!.tick();
    assert.equal(transport.calls.map((call) => call.url).sort(), [
      'https://receiver.example/hook',
      'https://second.example/hook',
    ]);
    assert.ok(transport.calls.every((call) => call.headers['webhook-id'] === event.id));
    assert.is.not(
      transport.calls[0]!.headers['webhook-signature'],
      transport.calls[1]!.headers['webhook-signature'],
      'each signed with its own secret',
    );
    assert.is((await portal.webhooks.deliveries('acct_a', mine.id))!.length, 1);
    assert.is((await portal.webhooks.deliveries('acct_a', second.id))!.length, 1);
    assert.equal(await portal.webhooks.deliveries('acct_a', otherType.id), []);
    assert.equal(await portal.webhooks.deliveries('acct_b', otherAccount.id), []);
  } finally {
    await portal.close();
  }
});

test('deliveries: newest first, null for an unknown webhook or one of another account', async () => {
  const time = manualClock(new Date('2026-05-01T00:00:00Z'));
  const portal = await webhookPortal({ clock: time.clock, transport: memoryTransport() });
  try {
    const webhook = await portal.webhooks.create('acct_a', HOOK);
    const events = [];
    for (let i = 0; i < 3; i++) {
      events.push(await portal.events.publish('acct_a', 'customer-created', { n: i }));
      time.advance(60);
    }
    const log = (await portal.webhooks.deliveries('acct_a', webhook.id))!;
    assert.equal(
      log.map((delivery) => delivery.eventId),
      events.map((event) => event.id).reverse(),
    );
    assert.ok(log.every((delivery) => /^whd_[0-9A-Za-z]{22}$/.test(delivery.id)));
    assert.is(await portal.webhooks.deliveries('acct_b', webhook.id), null);
    assert.is(await portal.webhooks.deliveries('acct_a', 'wbh_unknown'), null);
  } finally {
    await portal.close();
  }
});

test('redeliver: null for an unknown delivery or another account; a 409 once the webhook is gone', async () => {
  const storage = memoryStorage();
  const portal = await webhookPortal({ storage, transport: memoryTransport({ respond: () => 410 }) });
  try {
    const webhook = await portal.webhooks.create('acct_a', HOOK);
    await portal.events.publish('acct_a', 'customer-created', {});
    await portal.worker!.tick();
    const [delivery] = (await portal.webhooks.deliveries('acct_a', webhook.id))!;
    assert.is(delivery!.status, 'failed');
    assert.is(await portal.webhooks.redeliver('acct_b', delivery!.id), null);
    assert.is(await portal.webhooks.redeliver('acct_a', 'whd_unknown'), null);
    await portal.webhooks.delete('acct_a', webhook.id);
    const error = await rejects(() => portal.webhooks.redeliver('acct_a', delivery!.id), /its webhook was deleted/);
    assert.is(error.status, 409);
    assert.is((await storage.getDelivery('acct_a', delivery!.id))!.status, 'failed', 'left as it was');
  } finally {
    await portal.close();
  }
});

test.run();
