/**
 * Webhook filters: how long one event takes to test against a filter of 10 clauses, each event
 * timed alone (p50 and p99 of 200,000, the timer's own cost included), beside the same test written
 * by hand as a JavaScript function, the fastest form a host would write. Events alternate between
 * three shapes: one that matches, one that fails on the last clause, one with most paths missing.
 *
 *   npm run build:bench && node dist/bench/filter.bench.js
 */
import { checkFilter, matchesFilter } from '../src/rules/event-filter.js';
import { emit } from './support/row.js';

const SAMPLES = Number(process.env.BENCH_FILTER_SAMPLES ?? 200_000);
const TARGET_P99_US = 10;

const filter = checkFilter(
  {
    'customer.tier': { $in: ['gold', 'platinum'] },
    'customer.email': { $endsWith: '@example.com' },
    'customer.id': { $startsWith: 'cus_' },
    amount: { $gte: 100, $lt: 10_000 },
    currency: { $neq: 'USD' },
    'customer.address.country': { $nin: ['US', 'CA'] },
    $or: [{ tags: { $in: ['vip'] } }, { 'customer.since': { $lt: '2026-01-01T00:00:00+00:00' } }],
    'items.0.sku': { $exist: true },
  },
  'filter',
);

/** The same test, written by hand. */
function byHand(data: any): boolean {
  const customer = data?.customer;
  if (customer === null || typeof customer !== 'object') return false;
  if (customer.tier !== 'gold' && customer.tier !== 'platinum') return false;
  if (typeof customer.email !== 'string' || !customer.email.endsWith('@example.com')) return false;
  if (typeof customer.id !== 'string' || !customer.id.startsWith('cus_')) return false;
  if (typeof data.amount !== 'number' || !(data.amount >= 100 && data.amount < 10_000)) return false;
  if (data.currency === 'USD') return false;
  const country = customer.address?.country;
  if (country === 'US' || country === 'CA') return false;
  const vip = Array.isArray(data.tags) && data.tags.includes('vip');
  if (!vip && !(typeof customer.since === 'string' && customer.since < '2026-01-01T00:00:00+00:00')) return false;
  return Array.isArray(data.items) && data.items[0]?.sku !== undefined;
}

const base = {
  customer: {
    id: 'cus_8Hq2',
    tier: 'gold',
    email: 'grace@example.com',
    name: 'Grace Hopper',
    since: '2025-03-04T10:00:00+00:00',
    address: { line1: '1 Main St', city: 'Lyon', country: 'FR' },
  },
  amount: 420,
  currency: 'EUR',
  tags: ['new', 'vip'],
  items: [
    { sku: 'A-1', qty: 2, price: 100 },
    { sku: 'B-7', qty: 1, price: 220 },
  ],
};
const events = [base, { ...base, items: [] }, { note: 'an event of the type with other data' }];
const expected = events.map((event) => matchesFilter(filter, event));
if (expected.join() !== 'true,false,false' || events.map(byHand).join() !== expected.join()) {
  throw new Error(
    `the filter and the hand-written test disagree: ${expected.join()} against ${events.map(byHand).join()}`,
  );
}

function measure(test: (data: unknown) => boolean): { p50: number; p99: number } {
  let sink = 0;
  // Warm-up: both compiled by the optimizing tier before timing.
  for (let i = 0; i < 50_000; i++) if (test(events[i % 3])) sink++;
  const samples = new Float64Array(SAMPLES);
  for (let i = 0; i < SAMPLES; i++) {
    const event = events[i % 3];
    const started = process.hrtime.bigint();
    if (test(event)) sink++;
    samples[i] = Number(process.hrtime.bigint() - started) / 1000;
  }
  if (sink < 0) console.log(sink);
  samples.sort();
  return { p50: samples[Math.floor(SAMPLES / 2)]!, p99: samples[Math.floor(SAMPLES * 0.99)]! };
}

// Interleaved, three rounds each, the median round's figures.
const rounds: { filter: { p50: number; p99: number }; hand: { p50: number; p99: number } }[] = [];
for (let round = 0; round < 3; round++)
  rounds.push({ filter: measure((data) => matchesFilter(filter, data)), hand: measure(byHand) });
rounds.sort((a, b) => a.filter.p99 - b.filter.p99);
const { filter: compiled, hand } = rounds[1]!;
const round2 = (value: number) => Math.round(value * 100) / 100;

emit({
  scenario: 'webhook filter, 10 clauses: p99 of one event, µs',
  figure: round2(compiled.p99),
  unit: 'µs',
  baselineName: 'the same test written by hand',
  baseline: round2(hand.p99),
  ratio: round2(compiled.p99 / hand.p99),
  target: `≤ ${TARGET_P99_US} µs p99`,
  holds: compiled.p99 <= TARGET_P99_US,
});
emit({
  scenario: 'webhook filter, 10 clauses: p50 of one event, µs',
  figure: round2(compiled.p50),
  unit: 'µs',
  baselineName: 'the same test written by hand',
  baseline: round2(hand.p50),
  ratio: round2(compiled.p50 / hand.p50),
  target: 'none (reported)',
  holds: true,
});
