import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { afterCall, freshLimit, slowStart } from '../../src/rules/in-flight.js';
import { InFlightLimits } from '../../src/webhooks/in-flight-limits.js';

test('afterCall: overload halves the limit once for the calls in flight then, never below one', () => {
  const fresh = freshLimit(8);
  const fallen = afterCall(fresh, 'overloaded', 0, 100, 8);
  assert.equal(fallen, { limit: 4, threshold: 4, successes: 0, fellAt: 100, overloadedAt: 8 });
  assert.is(afterCall(fallen, 'overloaded', 50, 120, 8), fallen, 'started before the fall: no second fall');
  const twice = afterCall(fallen, 'overloaded', 100, 130, 8);
  assert.is(twice.limit, 2, 'one started at or after the fall lowers it again');
  const floor = afterCall(afterCall(twice, 'overloaded', 200, 200, 8), 'overloaded', 300, 300, 8);
  assert.is(floor.limit, 1);
  assert.is(afterCall(floor, 'overloaded', 400, 400, 8).limit, 1, 'never below one');
  assert.is(afterCall(fresh, 'other', 0, 1, 8), fresh, 'a 500 says nothing of load');
});

test('afterCall: overloaded again where the last overload came, the limit climbs back one a success to nine tenths of it', () => {
  const again = afterCall(
    { limit: 10, threshold: 9, successes: 0, fellAt: 0, overloadedAt: 10 },
    'overloaded',
    5,
    50,
    16,
  );
  assert.equal(again, { limit: 5, threshold: 9, successes: 0, fellAt: 50, overloadedAt: 10 });
  let climb = again;
  const seen: number[] = [];
  for (let n = 0; n < 5; n++) {
    climb = afterCall(climb, 'ok', 60, 70, 16);
    seen.push(climb.limit);
  }
  assert.equal(seen, [6, 7, 8, 9, 9], 'one a success up to the threshold, then near the overload: slowly');
  const elsewhere = afterCall(
    { limit: 20, threshold: 9, successes: 0, fellAt: 0, overloadedAt: 10 },
    'overloaded',
    5,
    50,
    32,
  );
  assert.equal(
    [elsewhere.limit, elsewhere.threshold],
    [10, 10],
    'far from the last overload: from the half, one a window',
  );
});

test('afterCall: one more a window of successes above the threshold, one more a success below it; never above the ceiling', () => {
  let limit = { limit: 4, threshold: 4, successes: 0, fellAt: 0, overloadedAt: 0 };
  const seen: number[] = [];
  for (let n = 0; n < 9; n++) {
    limit = afterCall(limit, 'ok', 10, 20, 6);
    seen.push(limit.limit);
  }
  assert.equal(seen, [4, 4, 4, 5, 5, 5, 5, 5, 6], 'a window is as many successes as the limit');
  assert.is(afterCall(limit, 'ok', 10, 20, 6), limit, 'at the ceiling it stays');
  // Within a tenth of where the last overload came (10: from 9 to 10), 64 windows for each one more;
  // from 11 on, one a window again.
  let near = { limit: 8, threshold: 5, successes: 0, fellAt: 0, overloadedAt: 10 };
  const nearSeen: number[] = [];
  for (let n = 0; n < 8 + 576 + 640 + 11; n++) {
    near = afterCall(near, 'ok', 10, 20, 16);
    nearSeen.push(near.limit);
  }
  assert.equal(
    [nearSeen.indexOf(9), nearSeen.indexOf(10), nearSeen.indexOf(11), nearSeen.indexOf(12)],
    [7, 7 + 576, 7 + 576 + 640, 7 + 576 + 640 + 11],
    '8 successes to reach 9, 576 (64 windows of 9) to reach 10, 640 to reach 11, then 11',
  );
  let start = slowStart(4);
  const climb: number[] = [];
  for (let n = 0; n < 4; n++) {
    start = afterCall(start, 'ok', 10, 20, 8);
    climb.push(start.limit);
  }
  assert.equal(climb, [2, 3, 4, 4], 'slow start: one more a success up to the threshold');
});

test('InFlightLimits: room, the full list below the share, a recovery from one call, and a disable', () => {
  const limits = new InFlightLimits(4);
  for (let n = 0; n < 4; n++) limits.started('wbh_a');
  assert.not.ok(limits.hasRoom('wbh_a'), 'at its share: no room');
  assert.equal(limits.full(), [], 'at the share, the account keeps the claim away: not listed');
  assert.equal(limits.ended('wbh_a', 'overloaded', 0, 10), { limit: 2, changed: true, pauseMs: null });
  for (const _ of [1, 2, 3]) limits.ended('wbh_a', 'overloaded', 0, 11);
  assert.is(limits.limitOf('wbh_a'), 2, 'the calls in flight at the fall lower it once');
  limits.started('wbh_a');
  limits.started('wbh_a');
  assert.equal(limits.full(), ['wbh_a'], 'below the share and full: listed');
  limits.ended('wbh_a', 'overloaded', 20, 30);
  limits.started('wbh_a');
  assert.equal(
    limits.ended('wbh_a', 'overloaded', 20, 31),
    { limit: 1, changed: false, pauseMs: null },
    'in flight at the fall',
  );
  // Down: at one call, each overload pauses the webhook, 1 s, then twice as long.
  const pauses: (number | null)[] = [];
  for (const at of [40, 50, 60, 70, 80]) {
    limits.started('wbh_a');
    pauses.push(limits.ended('wbh_a', 'overloaded', at, at).pauseMs);
  }
  assert.equal(pauses, [1000, 2000, 2000, 2000, 2000], 'doubling, at most 2 s');
  limits.started('wbh_a');
  assert.equal(
    limits.ended('wbh_a', 'ok', 90, 100),
    { limit: 1, changed: false, pauseMs: null },
    'back: slow start from one',
  );
  limits.started('wbh_a');
  assert.equal(limits.ended('wbh_a', 'ok', 110, 120), { limit: 2, changed: true, pauseMs: null });
  limits.started('wbh_a');
  limits.ended('wbh_a', 'overloaded', 130, 130);
  limits.started('wbh_a');
  assert.is(limits.ended('wbh_a', 'overloaded', 140, 140).pauseMs, 1000, 'a success began the pauses again');
  assert.ok(limits.hasRoom('wbh_b'), 'an unknown webhook has room');
  limits.disabled('wbh_b');
  assert.is(limits.limitOf('wbh_b'), 1, 'enabled again, it starts from one call');
});

test('InFlightLimits: webhooks kept with no call in flight are bounded; past 10,000 they are forgotten, those in flight kept', () => {
  const limits = new InFlightLimits(4);
  limits.started('wbh_busy');
  // 9,999 limited and idle, and one in flight: 10,000 kept.
  for (let n = 0; n < 9_999; n++) {
    limits.started(`wbh_${n}`);
    limits.ended(`wbh_${n}`, 'overloaded', 0, 1);
  }
  assert.is(limits.limitOf('wbh_0'), 2, 'kept while under the bound');
  limits.started('wbh_new');
  assert.is(limits.limitOf('wbh_0'), 4, 'forgotten: back at the share');
  assert.ok(limits.hasRoom('wbh_new'));
  assert.equal(
    limits.ended('wbh_busy', 'ok', 0, 1),
    { limit: 4, changed: false, pauseMs: null },
    'one in flight is kept',
  );
});

test.run();
