import { test } from 'uvu';
import * as assert from 'uvu/assert';
import {
  LATENCY_BINS,
  emptyHour,
  hourOf,
  latencyBin,
  percentile,
  statsWindow,
  summarize,
} from '../../src/rules/call-stats.js';

const bins = (entries: Record<number, number>) => {
  const latency = new Array<number>(LATENCY_BINS).fill(0);
  for (const [bin, count] of Object.entries(entries)) latency[Number(bin)] = count;
  return latency;
};

test('latencyBin: each bound belongs to its own bin; beyond the last, the last bin', () => {
  assert.equal([0, 50, 51, 100, 101, 999, 1000, 10000, 10001, 60000].map(latencyBin), [0, 0, 1, 1, 2, 4, 4, 7, 8, 8]);
});

test('percentile: interpolated within the bin the rank falls in; null without calls', () => {
  assert.is(percentile(bins({}), 0.5), null);
  assert.is(percentile(bins({ 0: 10 }), 0.5), 25, 'half of 0–50 ms');
  assert.is(percentile(bins({ 0: 5, 2: 5 }), 0.5), 50, 'the rank at the end of the first bin');
  assert.is(percentile(bins({ 0: 5, 2: 5 }), 0.9), 220, '100 + 4/5 of 150');
  assert.is(percentile(bins({ 8: 3 }), 0.95), 10000, 'beyond the last bound: that bound');
});

test('summarize: buckets end with the current hour, hours outside the window are left out, totals add up', () => {
  const now = new Date('2026-05-01T10:20:00Z');
  const at = (iso: string, succeeded: number, failed: number) => ({
    ...emptyHour(hourOf(iso)),
    succeeded,
    failed,
    latency: bins({ 1: succeeded + failed }),
  });
  const stored = [
    at('2026-05-01T10:05:00+00:00', 3, 1),
    at('2026-04-30T11:00:00+00:00', 2, 0),
    at('2026-04-30T10:59:00+00:00', 7, 7),
  ];
  const day = summarize('24h', now, stored);
  assert.equal(
    [day.from, day.until, day.buckets.length],
    ['2026-04-30T11:00:00+00:00', '2026-05-01T11:00:00+00:00', 24],
  );
  assert.equal([day.buckets[0]!.succeeded, day.buckets[23]!.succeeded, day.buckets[23]!.failed], [2, 3, 1]);
  assert.equal(
    [day.totals.succeeded, day.totals.failed, day.totals.p50Ms],
    [5, 1, 75],
    'the 10:00 of the day before is outside',
  );
  const week = summarize('7d', now, stored);
  assert.equal([week.buckets.length, week.totals.succeeded, week.totals.failed], [28, 12, 8]);
  assert.is(week.buckets.at(-1)!.start, '2026-05-01T05:00:00+00:00', 'the last bucket ends with the current hour');
});

test('statsWindow: 24h by default, 7d, anything else a 400 naming window', () => {
  assert.equal([statsWindow(undefined), statsWindow('7d')], ['24h', '7d']);
  assert.throws(
    () => statsWindow('30d'),
    (error: Error) => error.message.includes('window'),
  );
});

test.run();
