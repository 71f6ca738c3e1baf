import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { DueByAccount } from '../../adapters/in-process/due-queue.js';
import { Timeline } from '../../adapters/in-process/timeline.js';
import { newDelivery, planClaim } from '../../src/rules/deliveries.js';
import type { DeliveryRecord } from '../../src/records.js';
import { memoryStorage } from '../../adapters/memory/index.js';
import { at, attempt, eventRecord, webhookRecord } from '../conformance/fixtures.js';

const due = (accountId: string, seconds: number): DeliveryRecord =>
  newDelivery(eventRecord({ accountId, createdAt: at(seconds) }), 'wbh_1');

test('due by account: an account at its share is looked at once, however long its backlog', () => {
  const queues = new DueByAccount();
  for (let i = 0; i < 10_000; i++) queues.update(due('acct_a', i % 100));
  const mine = due('acct_b', 150);
  queues.update(mine);
  const walk = queues.dueBy(at(200));
  let read = 0;
  const counted = (function* () {
    for (const row of walk.rows) {
      read++;
      yield row;
    }
  })();
  const claim = {
    now: at(200),
    leaseUntil: at(260),
    limit: 10,
    owner: 'w',
    perAccount: { max: 4, inFlight: { acct_a: 4 } },
  };
  const plan = planClaim(counted, claim, { deliverable: () => true, accountFull: walk.skip });
  assert.equal(
    plan.leased.map((row) => row.id),
    [mine.id],
  );
  assert.is(read, 2, "one of A's, then B's");
});

test('due by account: the walk merges accounts in due order, and stops at what is not yet due', () => {
  const queues = new DueByAccount();
  const rows = [
    due('acct_a', 5),
    due('acct_b', 1),
    due('acct_c', 3),
    due('acct_a', 2),
    due('acct_b', 9),
    due('acct_c', 40),
  ];
  for (const row of rows) queues.update(row);
  const order = [...queues.dueBy(at(10)).rows].map((row) => row.createdAt);
  assert.equal(order, [at(1), at(2), at(3), at(5), at(9)]);
  // A delivery that is no longer pending leaves its queue, and an emptied account its heap.
  for (const row of rows) queues.update({ ...row, status: 'succeeded', nextAttemptAt: null });
  assert.equal([...queues.dueBy(at(100)).rows], []);
});

test('timeline: newest first from a cursor, past a removed record, within until', () => {
  const timeline = new Timeline();
  for (let i = 0; i < 6; i++) timeline.add('wbh_1', `d${i}`, at(Math.floor(i / 2)));
  assert.equal([...timeline.newestFirst('wbh_1')], ['d5', 'd4', 'd3', 'd2', 'd1', 'd0']);
  assert.equal([...timeline.newestFirst('wbh_1', { id: 'd4', createdAt: at(2) })], ['d3', 'd2', 'd1', 'd0']);
  timeline.remove('d3');
  assert.equal(
    [...timeline.newestFirst('wbh_1', { id: 'd3', createdAt: at(1) })],
    ['d1', 'd0'],
    'a removed record: from the second before its own',
  );
  assert.equal([...timeline.newestFirst('wbh_1', undefined, at(1))], ['d1', 'd0'], 'until is exclusive');
  for (const id of ['d0', 'd1', 'd2', 'd4', 'd5']) timeline.remove(id);
  assert.equal([...timeline.newestFirst('wbh_1')], []);
  assert.is(timeline.holds('wbh_1', 'd5'), false);
});

test('the delivery log: a filter that matches few of many ends pages early, and the cursors still reach every match', async () => {
  const storage = memoryStorage();
  const webhook = webhookRecord();
  await storage.insertWebhook(webhook);
  const made: DeliveryRecord[] = [];
  for (let i = 0; i < 12_000; i += 500) {
    const batch = Array.from({ length: 500 }, (_, j) => eventRecord({ createdAt: at(i + j) }));
    made.push(...(await storage.publishEvents(batch)));
  }
  // Three of the 12,000 fail, far apart.
  const failing = [made[10]!, made[6000]!, made[11_990]!];
  const claimed = await storage.claimDeliveries({ now: at(20_000), leaseUntil: at(20_060), limit: 12_000, owner: 'w' });
  assert.is(claimed.length, 12_000);
  for (const delivery of failing)
    await storage.recordAttempt({
      id: delivery.id,
      owner: 'w',
      attempt: attempt(500),
      outcome: { status: 'failed', nextAttemptAt: null },
    });
  const found: string[] = [];
  const sizes: number[] = [];
  let page = await storage.listDeliveries('acct_a', webhook.id, { limit: 50, status: 'failed' });
  for (;;) {
    found.push(...page.deliveries.map((delivery) => delivery.id));
    sizes.push(page.deliveries.length);
    if (page.next === null) break;
    page = await storage.listDeliveries('acct_a', webhook.id, { limit: 50, status: 'failed', after: page.next });
  }
  assert.equal(found, failing.map((delivery) => delivery.id).reverse());
  assert.ok(sizes.length > 2, `the walk took ${sizes.length} pages`);
});

test.run();
