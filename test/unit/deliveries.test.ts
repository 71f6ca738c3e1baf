import { test } from 'uvu';
import * as assert from 'uvu/assert';
import {
  MAX_ATTEMPTS_KEPT,
  cancel,
  compareDue,
  isClaimable,
  isDue,
  isLeased,
  lease,
  newDelivery,
  planClaim,
  recordAttempt,
  redeliver,
  isDueAfter,
} from '../../src/rules/deliveries.js';
import type { DeliveryAttempt, DeliveryRecord } from '../../src/records.js';
import { eventRecord } from '../conformance/fixtures.js';

const at = (second: number) => `2026-01-01T00:00:${String(second).padStart(2, '0')}+00:00`;

/** Frozen all the way down: a rule that changes its argument throws (ES modules are strict). */
function frozen<T>(value: T): T {
  if (value !== null && typeof value === 'object') {
    for (const inner of Object.values(value)) frozen(inner);
    Object.freeze(value);
  }
  return value;
}

function delivery(overrides: Partial<DeliveryRecord> = {}): DeliveryRecord {
  return frozen({
    id: 'whd_1',
    accountId: 'acct_a',
    webhookId: 'wbh_1',
    eventId: 'evt_1',
    eventType: 'agreement-signed',
    status: 'pending',
    attempts: [],
    attemptCount: 0,
    nextAttemptAt: at(10),
    createdAt: at(10),
    leaseOwner: null,
    leaseUntil: null,
    orderingKey: null,
    redeliverQueued: false,
    ...overrides,
  });
}

const attempt = (statusCode: number | null): DeliveryAttempt =>
  frozen({ at: at(20), statusCode, error: statusCode === null ? 'connect ECONNREFUSED' : null, durationMs: 7 });

const leased = (owner = 'worker-1', until = at(40), overrides: Partial<DeliveryRecord> = {}) =>
  delivery({ leaseOwner: owner, leaseUntil: until, ...overrides });

test('newDelivery: pending, due when the event happened, no attempts, no lease, the whd_ id of its event and webhook', () => {
  const event = frozen(eventRecord({ accountId: 'acct_b', createdAt: at(5) }));
  const made = newDelivery(event, 'wbh_x');
  assert.match(made.id, /^whd_[0-9A-Za-z]{22}$/);
  assert.equal(made, {
    id: made.id,
    accountId: 'acct_b',
    webhookId: 'wbh_x',
    eventId: event.id,
    eventType: event.type,
    status: 'pending',
    attempts: [],
    attemptCount: 0,
    nextAttemptAt: at(5),
    createdAt: at(5),
    leaseOwner: null,
    leaseUntil: null,
    orderingKey: null,
    redeliverQueued: false,
  });
  assert.is(newDelivery(event, 'wbh_x').id, made.id, 'the same pair, the same id');
  assert.is.not(newDelivery(event, 'wbh_y').id, made.id);
  assert.is.not(newDelivery(frozen(eventRecord({ accountId: 'acct_b', createdAt: at(5) })), 'wbh_x').id, made.id);
});

test('isDue: pending with a next attempt at or before now', () => {
  assert.ok(isDue(delivery(), at(10)), 'due at exactly now');
  assert.ok(isDue(delivery(), at(11)));
  assert.not.ok(isDue(delivery(), at(9)), 'not yet');
  assert.not.ok(isDue(delivery({ nextAttemptAt: null }), at(59)), 'pending with no next attempt is never due');
  for (const status of ['succeeded', 'failed', 'cancelled'] as const)
    assert.not.ok(isDue(delivery({ status }), at(59)), status);
});

test('isLeased: a lease holds until its end, that second included', () => {
  assert.not.ok(isLeased(delivery(), at(10)));
  assert.ok(isLeased(leased('w', at(40)), at(39)));
  assert.ok(isLeased(leased('w', at(40)), at(40)), 'a lease ending at exactly now still holds');
  assert.not.ok(isLeased(leased('w', at(40)), at(41)));
});

test('isClaimable: due and not leased', () => {
  assert.ok(isClaimable(delivery(), at(10)));
  assert.not.ok(isClaimable(delivery(), at(9)), 'not due');
  assert.not.ok(isClaimable(leased('w', at(40)), at(40)), 'leased');
  assert.ok(isClaimable(leased('w', at(40)), at(41)), 'the lease ran out');
  assert.not.ok(isClaimable(delivery({ status: 'cancelled', nextAttemptAt: null }), at(59)));
});

test('compareDue: earliest due first, then id in code-unit order; no next attempt sorts last', () => {
  const a = delivery({ id: 'whd_a', nextAttemptAt: at(2) });
  const upper = delivery({ id: 'whd_B', nextAttemptAt: at(2) });
  const early = delivery({ id: 'whd_z', nextAttemptAt: at(1) });
  const never = delivery({ id: 'whd_0', nextAttemptAt: null });
  const other = delivery({ id: 'whd_1', nextAttemptAt: null });
  assert.equal(
    [other, a, never, upper, early].sort(compareDue).map((d) => d.id),
    ['whd_z', 'whd_B', 'whd_a', 'whd_0', 'whd_1'],
  );
  assert.is(compareDue(a, a), 0);
});

test('lease: owner and end set, nothing else changed, the argument untouched', () => {
  const before = delivery({ attempts: [attempt(500)] });
  const after = lease(before, 'worker-2', at(50));
  assert.equal(after, { ...before, leaseOwner: 'worker-2', leaseUntil: at(50) });
  assert.is(before.leaseOwner, null);
});

test("recordAttempt: the owner's attempt is appended, the outcome set, the lease released", () => {
  const first = attempt(null);
  const before = leased('worker-1', at(40), { attempts: [first], attemptCount: 1 });
  const second = attempt(503);
  const after = recordAttempt(before, 'worker-1', second, { status: 'pending', nextAttemptAt: at(55) })!;
  assert.equal(after, {
    ...before,
    attempts: [first, second],
    attemptCount: 2,
    nextAttemptAt: at(55),
    leaseOwner: null,
    leaseUntil: null,
  });
  assert.is.not(after.attempts[1], second, 'the attempt is copied in');
  assert.equal(before.attempts, [first], 'the argument keeps its attempts');
  const done = recordAttempt(leased(), 'worker-1', attempt(204), { status: 'succeeded', nextAttemptAt: null })!;
  assert.equal([done.status, done.nextAttemptAt], ['succeeded', null]);
});

test('recordAttempt: null for another owner, no lease at all, or a delivery no longer pending', () => {
  const outcome = { status: 'succeeded' as const, nextAttemptAt: null };
  assert.is(recordAttempt(leased('worker-1'), 'worker-2', attempt(200), outcome), null);
  assert.is(recordAttempt(delivery(), 'worker-1', attempt(200), outcome), null);
  assert.is(
    recordAttempt(
      leased('worker-1', at(40), { status: 'cancelled', nextAttemptAt: null }),
      'worker-1',
      attempt(200),
      outcome,
    ),
    null,
  );
});

test('recordAttempt: a lease that ran out but was not taken over still lets its owner record', () => {
  // The rule has no clock: only another claim (which takes the lease) stops a slow call from recording.
  const after = recordAttempt(leased('worker-1', at(1)), 'worker-1', attempt(200), {
    status: 'succeeded',
    nextAttemptAt: null,
  });
  assert.is(after?.status, 'succeeded');
});

test('redeliver: from any status, pending again at the given time, lease dropped, attempts kept', () => {
  const attempts = [attempt(410)];
  for (const before of [
    delivery({ status: 'failed', nextAttemptAt: null, attempts }),
    delivery({ status: 'succeeded', nextAttemptAt: null, attempts }),
    delivery({ status: 'cancelled', nextAttemptAt: null, attempts }),
    // A lease that ran out (its worker died mid-call): no call is in flight any more.
    leased('worker-1', at(29), { attempts }),
  ]) {
    const after = redeliver(before, at(30));
    assert.equal(
      after,
      { ...before, status: 'pending', nextAttemptAt: at(30), leaseOwner: null, leaseUntil: null, attempts },
      before.status,
    );
  }
});

test('redeliver: queued while a lease holds the delivery, up to and including its last second: its call may be in flight', () => {
  for (const until of [at(40), at(30)]) {
    const before = leased('worker-1', until);
    assert.equal(
      redeliver(before, at(30)),
      { ...before, redeliverQueued: true },
      `lease until ${until}: queued, nothing else changes`,
    );
  }
  assert.equal(redeliver(leased('worker-1', at(30)), at(31)).redeliverQueued, false, 'a lease that ran out: due now');
});

test('recordAttempt: a queued redeliver wins over the outcome: pending, due as the call ended, queued no more', () => {
  const made = { ...attempt(204), at: at(40), durationMs: 2_500 };
  for (const outcome of [
    { status: 'succeeded' as const, nextAttemptAt: null },
    { status: 'failed' as const, nextAttemptAt: null },
    { status: 'pending' as const, nextAttemptAt: at(900) },
  ]) {
    const after = recordAttempt({ ...leased('worker-1', at(100)), redeliverQueued: true }, 'worker-1', made, outcome)!;
    assert.equal(
      [after.status, after.nextAttemptAt, after.redeliverQueued, after.leaseOwner],
      ['pending', at(42), false, null],
      outcome.status,
    );
    assert.ok(isDueAfter(after, made), 'due at once');
    assert.not.ok(
      isDueAfter(recordAttempt(leased('worker-1', at(100)), 'worker-1', made, outcome)!, made),
      'without one: the outcome stands',
    );
  }
});

test('lease: a new lease serves a redeliver queued behind a call that was never recorded', () => {
  assert.is(lease({ ...leased('worker-1', at(10)), redeliverQueued: true }, 'worker-2', at(80)).redeliverQueued, false);
});

test('recordAttempt: keeps the last MAX_ATTEMPTS_KEPT attempts and counts every one', () => {
  let current: DeliveryRecord = delivery();
  for (let n = 1; n <= MAX_ATTEMPTS_KEPT + 3; n++) {
    const made = { ...attempt(500), durationMs: n };
    current = recordAttempt(lease(current, 'worker-1', at(40)), 'worker-1', made, {
      status: 'pending',
      nextAttemptAt: at(10),
    })!;
  }
  assert.is(current.attemptCount, MAX_ATTEMPTS_KEPT + 3);
  assert.is(current.attempts.length, MAX_ATTEMPTS_KEPT);
  assert.equal(current.attempts.map((kept) => kept.durationMs).slice(0, 2), [4, 5], 'the oldest are dropped');
  assert.is(current.attempts.at(-1)!.durationMs, MAX_ATTEMPTS_KEPT + 3);
});

test('planClaim with perAccount: an account at its share is passed over; its count is read from own keys only', () => {
  const dues = [
    delivery({ id: 'whd_1', accountId: 'constructor', nextAttemptAt: at(1) }),
    delivery({ id: 'whd_2', accountId: 'constructor', nextAttemptAt: at(2) }),
    delivery({ id: 'whd_3', accountId: 'acct_b', nextAttemptAt: at(3) }),
    delivery({ id: 'whd_4', accountId: 'acct_b', nextAttemptAt: at(4) }),
  ];
  const plan = planClaim(
    dues,
    { now: at(30), leaseUntil: at(60), limit: 10, owner: 'w', perAccount: { max: 1, inFlight: { acct_b: 1 } } },
    { deliverable: () => true },
  );
  assert.equal(
    plan.leased.map((d) => d.id),
    ['whd_1'],
    'one of "constructor", none of acct_b, which holds its one already',
  );
});

test('cancel: a pending delivery, leased or not, ends cancelled; a finished one is null', () => {
  for (const before of [delivery(), leased(), delivery({ nextAttemptAt: null })]) {
    assert.equal(cancel(before), {
      ...before,
      status: 'cancelled',
      nextAttemptAt: null,
      leaseOwner: null,
      leaseUntil: null,
    });
  }
  for (const status of ['succeeded', 'failed', 'cancelled'] as const)
    assert.is(cancel(delivery({ status, nextAttemptAt: null })), null, status);
});

/** Deliveries `whd_<n>` due at second `n`, of webhook `wbh_live` unless listed in `orphans`. */
function queue(dues: number[], orphans: number[] = []): DeliveryRecord[] {
  return dues.map((n) =>
    delivery({ id: `whd_${n}`, nextAttemptAt: at(n), webhookId: orphans.includes(n) ? 'wbh_gone' : 'wbh_live' }),
  );
}
const live = (d: DeliveryRecord) => d.webhookId === 'wbh_live';
const claim = (now: number, limit: number) => ({ now: at(now), leaseUntil: at(now + 30), limit, owner: 'worker-9' });
const ids = (list: DeliveryRecord[]) => list.map((d) => d.id);

test('planClaim: leases claimable candidates in the order given, up to the limit, to the owner', () => {
  const plan = planClaim(queue([1, 2, 3, 4]), claim(3, 2), { deliverable: live });
  assert.equal(ids(plan.leased), ['whd_1', 'whd_2']);
  assert.ok(plan.leased.every((d) => d.leaseOwner === 'worker-9' && d.leaseUntil === at(33)));
  assert.equal(plan.cancelled, []);
  assert.equal(
    ids(planClaim(queue([1, 2, 3, 4]), claim(3, 10), { deliverable: live }).leased),
    ['whd_1', 'whd_2', 'whd_3'],
    'one not yet due is left',
  );
});

test('planClaim: leased and finished candidates are passed over', () => {
  const candidates = [
    leased('worker-1', at(40)),
    delivery({ id: 'whd_done', status: 'succeeded', nextAttemptAt: null }),
    ...queue([5]),
  ];
  assert.equal(ids(planClaim(candidates, claim(10, 10), { deliverable: () => true }).leased), ['whd_5']);
});

test('planClaim: one whose webhook is gone is cancelled instead, without using up the limit', () => {
  const plan = planClaim(queue([1, 2, 3, 4], [2]), claim(9, 2), { deliverable: live });
  assert.equal(ids(plan.leased), ['whd_1', 'whd_3']);
  assert.equal(ids(plan.cancelled), ['whd_2']);
  assert.equal([plan.cancelled[0]!.status, plan.cancelled[0]!.nextAttemptAt], ['cancelled', null]);
});

test('planClaim: the walk ends at the limit, so a webhook-less one after it is left for a later claim', () => {
  const candidates = queue([1, 2, 3], [3]);
  const plan = planClaim(candidates, claim(9, 2), { deliverable: live });
  assert.equal([ids(plan.leased), plan.cancelled], [['whd_1', 'whd_2'], []]);
  assert.equal(
    ids(planClaim(candidates, claim(9, 3), { deliverable: live }).cancelled),
    ['whd_3'],
    'a claim with room left reaches it',
  );
});

test('planClaim: a limit of 0 or less changes nothing; a leased webhook-less one is not cancelled', () => {
  assert.equal(planClaim(queue([1], [1]), claim(9, 0), { deliverable: live }), {
    leased: [],
    cancelled: [],
    deferred: [],
  });
  const held = leased('worker-1', at(40), { webhookId: 'wbh_gone' });
  assert.equal(planClaim([held], claim(9, 5), { deliverable: live }), { leased: [], cancelled: [], deferred: [] });
});

test("planClaim: a held webhook's due deliveries are deferred to the hold's end, not leased, and use up no limit", () => {
  const [a, b, c] = queue([1, 2, 3]);
  const heldUntil = (delivery: DeliveryRecord) => (delivery.id === b!.id ? at(60) : null);
  const plan = planClaim([a!, b!, c!], claim(9, 2), { deliverable: live, heldUntil });
  assert.equal(
    plan.leased.map((one) => one.id),
    [a!.id, c!.id],
  );
  assert.equal(plan.deferred, [{ ...b!, nextAttemptAt: at(60) }]);
  assert.equal(plan.cancelled, []);
  // One gone and held: cancelled, as it has nowhere to go.
  const gone = planClaim([b!], claim(9, 2), { deliverable: () => false, heldUntil });
  assert.equal([gone.cancelled.length, gone.deferred.length], [1, 0]);
});

test('planClaim: reads candidates lazily and stops taking them at the limit', () => {
  let taken = 0;
  function* counted() {
    for (const d of queue([1, 2, 3, 4, 5])) {
      taken++;
      yield d;
    }
  }
  planClaim(counted(), claim(9, 2), { deliverable: live });
  assert.is(taken, 2);
});

test.run();
