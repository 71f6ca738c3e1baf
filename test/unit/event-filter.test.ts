import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { FILTER_LIMITS, checkFilter, matchesFilter, type EventFilter } from '../../src/rules/event-filter.js';
import { isPortalError } from '../../src/errors.js';

const data = {
  amount: 120,
  currency: 'EUR',
  vip: false,
  note: null,
  customer: { id: 'cus_42', tier: 'gold', email: 'ana@example.com', address: { country: 'FR' } },
  tags: ['new', 'priority'],
  items: [
    { sku: 'A-1', qty: 2 },
    { sku: 'B-7', qty: 1 },
  ],
  'dotted.key': 'no',
  constructor: 'own',
};

const matches = (filter: EventFilter, on: unknown = data) => matchesFilter(checkFilter(filter, 'filter'), on);

/** The message of the 400 a bad filter is refused with. */
function refusal(filter: unknown): string {
  try {
    checkFilter(filter, 'webhook.filter');
  } catch (error) {
    assert.ok(isPortalError(error, 'INPUT_INVALID'), String(error));
    assert.is((error as { status: number }).status, 400);
    return (error as Error).message;
  }
  throw new Error(`accepted: ${JSON.stringify(filter)}`);
}

test('a path and a value: equality, of primitives and of whole objects and arrays', () => {
  assert.ok(matches({ currency: 'EUR' }));
  assert.not.ok(matches({ currency: 'USD' }));
  assert.ok(matches({ 'customer.tier': 'gold', amount: 120 }), 'every clause holds');
  assert.not.ok(matches({ 'customer.tier': 'gold', amount: 121 }), 'one fails: no match');
  assert.ok(matches({ note: null }), 'null equals null');
  assert.not.ok(matches({ missing: null }), 'a missing path is not null');
  assert.ok(matches({ tags: ['new', 'priority'] }));
  assert.not.ok(matches({ tags: ['priority', 'new'] }), 'arrays in order');
  assert.ok(matches({ 'customer.address': { $eq: { country: 'FR' } } }), '$eq compares objects whole');
  assert.not.ok(matches({ 'customer.address': { $eq: { country: 'FR', city: 'Lyon' } } }));
  assert.ok(matches({}), 'no clause: every event');
});

test('paths: dotted into objects and arrays, own properties only, missing anywhere is missing', () => {
  assert.ok(matches({ 'items.1.sku': 'B-7' }));
  assert.ok(matches({ 'customer.address.country': 'FR' }));
  assert.not.ok(matches({ 'items.2.sku': { $exist: true } }), 'past the end');
  assert.not.ok(matches({ 'items.01.sku': { $exist: true } }), 'not a canonical index');
  assert.not.ok(matches({ 'tags.length': { $exist: true } }), "an array's length is not a member");
  assert.not.ok(matches({ 'currency.length': { $exist: true } }), "nor is a string's");
  assert.not.ok(matches({ 'customer.toString': { $exist: true } }), "nor a prototype's method");
  assert.ok(matches({ constructor: 'own' }), 'an own key named constructor is a path like any other');
  assert.not.ok(matches({ 'amount.value': { $exist: true } }), 'below a number');
  assert.not.ok(matches({ 'note.x': { $exist: true } }), 'below null');
  assert.not.ok(matches({ 'dotted.key': 'no' }), 'a dot always separates segments');
  assert.not.ok(matches({ currency: 'EUR' }, null), 'data that is not an object');
  assert.not.ok(matchesFilter(checkFilter({ currency: 'EUR' }, 'filter'), undefined));
});

test('$eq and $neq; a missing path is never equal, and always not equal', () => {
  assert.ok(matches({ amount: { $eq: 120 } }));
  assert.ok(matches({ amount: { $neq: 100 } }));
  assert.not.ok(matches({ amount: { $neq: 120 } }));
  assert.ok(matches({ missing: { $neq: 1 } }));
  assert.not.ok(matches({ missing: { $eq: 1 } }));
  assert.not.ok(matches({ amount: { $eq: '120' } }), 'no conversion between kinds');
});

test('$gt $gte $lt $lte: numbers against numbers, strings against strings, nothing else', () => {
  assert.ok(matches({ amount: { $gt: 100, $lte: 120 } }), 'all operators of one path hold');
  assert.not.ok(matches({ amount: { $gt: 120 } }));
  assert.ok(matches({ amount: { $gte: 120 } }));
  assert.ok(matches({ amount: { $lt: 120.5 } }));
  assert.not.ok(matches({ amount: { $lt: 120 } }));
  assert.ok(matches({ 'customer.id': { $gt: 'cus_4', $lt: 'cus_5' } }), 'code unit order');
  assert.not.ok(matches({ amount: { $gt: '1' } }), 'a number is not compared with a string');
  assert.not.ok(matches({ 'customer.id': { $gt: 0 } }));
  assert.not.ok(matches({ missing: { $lt: 1 } }));
  assert.ok(
    matches({ at: { $gte: '2026-11-01T00:00:00+00:00' } }, { at: '2026-11-26T10:00:00+00:00' }),
    'ATOM times sort as text',
  );
});

test('$in and $nin: one of the values, or an array holding one of them; $nin the opposite, missing included', () => {
  assert.ok(matches({ currency: { $in: ['EUR', 'GBP'] } }));
  assert.not.ok(matches({ currency: { $in: ['USD'] } }));
  assert.ok(matches({ tags: { $in: ['priority'] } }), 'an array holding one');
  assert.not.ok(matches({ tags: { $in: ['old'] } }));
  assert.ok(matches({ 'customer.address': { $in: [{ country: 'FR' }] } }), 'objects compared whole');
  assert.ok(matches({ currency: { $nin: ['USD'] } }));
  assert.not.ok(matches({ tags: { $nin: ['new'] } }));
  assert.ok(matches({ missing: { $nin: ['x'] } }));
  assert.not.ok(matches({ missing: { $in: [null] } }), 'missing is not null');
  assert.ok(matches({ note: { $in: [null] } }));
});

test("$in over 100 objects against an event's 1,000 objects reads each object of the event a bounded number of times, not once per value of the list", () => {
  let reads = 0;
  const counted = (target: Record<string, unknown>) =>
    new Proxy(target, {
      get: (object, key) => (reads++, Reflect.get(object, key)),
      ownKeys: (object) => (reads++, Reflect.ownKeys(object)),
    });
  const items = Array.from({ length: 1000 }, () => counted({ a: 0, b: 0, c: 0, d: 'x' }));
  const filter = checkFilter(
    { items: { $in: Array.from({ length: 100 }, (_, i) => ({ a: 0, b: 0, c: 0, d: `y${i}` })) } },
    'filter',
  );
  assert.not.ok(matchesFilter(filter, { items }));
  // Spelling an object out reads its keys and each of its four values: a handful of reads per item.
  assert.ok(reads <= 10 * items.length, `${reads} reads of 1,000 objects`);
  reads = 0;
  assert.not.ok(matchesFilter(filter, { items }));
  assert.is(reads, 0, 'a second webhook with the filter reads the same event again at no cost');
});

test('$in over objects and arrays: equal whatever the key order, nested values compared whole, kinds kept apart', () => {
  const lines = {
    lines: [
      { sku: 'a', qty: 1, meta: { tags: ['x', 'y'] } },
      { sku: 'b', qty: 2, meta: { tags: [] } },
    ],
    pair: [1, 'one'],
  };
  const on = (filter: EventFilter) => matchesFilter(checkFilter(filter, 'filter'), lines);
  assert.ok(on({ lines: { $in: [{ meta: { tags: ['x', 'y'] }, qty: 1, sku: 'a' }] } }), 'another key order');
  assert.not.ok(
    on({ lines: { $in: [{ sku: 'a', qty: 1, meta: { tags: ['y', 'x'] } }] } }),
    'an array in another order is another value',
  );
  assert.not.ok(on({ lines: { $in: [{ sku: 'a', qty: 1 }] } }), 'a part of an object is not the object');
  assert.not.ok(on({ lines: { $in: [{ sku: 'a', qty: '1', meta: { tags: ['x', 'y'] } }] } }), '"1" is not 1');
  assert.ok(on({ pair: { $in: [[1, 'one']] } }), 'an array found whole');
  assert.not.ok(on({ pair: { $in: [{ 0: 1, 1: 'one' }] } }), 'an object with index keys is not an array');
  assert.ok(on({ lines: { $nin: [{ sku: 'c', qty: 3, meta: { tags: [] } }] } }));
  assert.not.ok(on({ lines: { $nin: [{ qty: 2, sku: 'b', meta: { tags: [] } }] } }));
});

test('$startsWith, $endsWith on strings; $exist, null counting as present', () => {
  assert.ok(matches({ 'customer.email': { $endsWith: '@example.com' } }));
  assert.ok(matches({ 'customer.id': { $startsWith: 'cus_' } }));
  assert.not.ok(matches({ 'customer.id': { $startsWith: 'usr_' } }));
  assert.not.ok(matches({ amount: { $startsWith: '1' } }), 'not a string');
  assert.ok(matches({ note: { $exist: true } }));
  assert.ok(matches({ missing: { $exist: false } }));
  assert.not.ok(matches({ vip: { $exist: false } }));
});

test('$and, $or, $not, and filters nested under a path, any depth within the limit', () => {
  assert.ok(matches({ $or: [{ currency: 'USD' }, { 'customer.tier': 'gold' }] }));
  assert.not.ok(matches({ $or: [{ currency: 'USD' }, { vip: true }] }));
  assert.ok(matches({ $and: [{ amount: { $gt: 100 } }, { $not: { vip: true } }] }));
  assert.not.ok(matches({ $not: { currency: 'EUR' } }));
  assert.ok(matches({ customer: { tier: 'gold', address: { country: { $in: ['FR', 'DE'] } } } }), 'nested under paths');
  assert.ok(
    matches({ customer: { $or: [{ tier: 'silver' }, { 'address.country': 'FR' }] } }),
    'logic inside a nested filter',
  );
  assert.not.ok(matches({ customer: { tier: 'silver' } }));
  assert.ok(matches({ missing: { $not: { x: 1 } } }), 'a nested filter over a missing path: its clauses see nothing');
  assert.not.ok(matches({ missing: { x: { $exist: true } } }));
});

test('a bad filter is a 400 naming the part that is wrong', () => {
  assert.match(
    refusal({ amount: { $gtx: 1 } }),
    /^webhook\.filter\.amount\.\$gtx: is not an operator; use one of \$eq, \$neq/,
  );
  assert.match(refusal({ amount: { $gt: 1, $gtx: 1 } }), /^webhook\.filter\.amount\.\$gtx: is not a value operator/);
  assert.match(refusal({ $nor: [] }), /^webhook\.filter\.\$nor: is not an operator/);
  assert.match(refusal({ $gte: 1 }), /^webhook\.filter\.\$gte: needs a path to test/);
  assert.match(refusal({ 'customer..tier': 'x' }), /^webhook\.filter\["customer\.\.tier"\]: is not a path/);
  assert.match(refusal({ '': 1 }), /is not a path/);
  assert.match(refusal({ 'a.': 1 }), /is not a path/);
  assert.match(refusal({ amount: { $gt: 1, total: 2 } }), /amount\.total: mixes a path with value operators/);
  assert.match(refusal({ amount: {} }), /amount: an empty object tests nothing/);
  assert.match(refusal({ amount: { $gt: true } }), /amount\.\$gt: must be a number or a string/);
  assert.match(refusal({ amount: { $gt: null } }), /must be a number or a string/);
  assert.match(refusal({ tags: { $in: [] } }), /tags\.\$in: must be an array of 1 to 100 values/);
  assert.match(refusal({ tags: { $in: 'vip' } }), /must be an array/);
  assert.match(refusal({ email: { $endsWith: 1 } }), /email\.\$endsWith: must be a string/);
  assert.match(refusal({ note: { $exist: 'yes' } }), /note\.\$exist: must be true/);
  assert.match(refusal({ $or: [] }), /webhook\.filter\.\$or: must be a non-empty array of filters/);
  assert.match(refusal({ $or: [{ a: 1 }, 'b'] }), /webhook\.filter\.\$or\[1\]: must be an object of clauses/);
  assert.match(refusal({ $not: [] }), /webhook\.filter\.\$not: must be an object/);
  assert.match(refusal([]), /^webhook\.filter: must be an object/);
  assert.match(refusal('amount > 1'), /^webhook\.filter: must be an object/);
});

test('the limits: clauses, depth, path segments, list length and size', () => {
  const many = Object.fromEntries(Array.from({ length: FILTER_LIMITS.clauses + 1 }, (_, i) => [`k${i}`, i]));
  assert.match(refusal(many), /holds at most 50 clauses/);
  checkFilter(Object.fromEntries(Object.entries(many).slice(1)), 'filter');
  let deep: EventFilter = { x: 1 };
  for (let i = 0; i < FILTER_LIMITS.depth; i++) deep = { $not: deep };
  assert.match(refusal(deep), /nest at most 8 deep/);
  assert.match(refusal({ [Array.from({ length: 17 }, () => 'a').join('.')]: 1 }), /at most 16 segments/);
  assert.match(refusal({ tags: { $in: Array.from({ length: 101 }, (_, i) => i) } }), /1 to 100 values/);
  assert.match(refusal({ note: 'x'.repeat(FILTER_LIMITS.chars) }), /at most 8192 characters as JSON/);
  const cyclic: Record<string, unknown> = {};
  cyclic.self = cyclic;
  assert.match(refusal(cyclic), /must be JSON/);
});

test('checkFilter stores a JSON copy: a Date is its text, undefined members vanish, the input is not kept', () => {
  const input: Record<string, unknown> = { at: { $gte: new Date('2026-11-01T00:00:00Z') }, gone: undefined };
  const stored = checkFilter(input, 'filter');
  assert.equal(stored, { at: { $gte: '2026-11-01T00:00:00.000Z' } });
  (input.at as Record<string, unknown>).$gte = 'changed';
  assert.ok(matchesFilter(stored, { at: '2026-11-02T00:00:00.000Z' }));
  assert.ok(
    matchesFilter({ amount: { $gt: 1 } }, { amount: 2 }),
    'a filter never checked here is compiled on first use',
  );
});

test.run();
