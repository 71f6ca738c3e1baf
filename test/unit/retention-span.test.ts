import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { generationSpan, resolveRetention } from '../../src/domain/retention.js';

const DAY = 24 * 60 * 60 * 1000;
const span = (retention: { eventsMs?: number; deliveriesMs?: number }) => generationSpan(resolveRetention(retention));

test('a generation is an eighth of the shorter retention, a day at most', () => {
  assert.is(span({}), DAY, 'the default, 30 days: a day');
  assert.is(span({ eventsMs: 8 * DAY, deliveriesMs: 30 * DAY }), DAY);
  assert.is(span({ eventsMs: 30 * DAY, deliveriesMs: 4 * DAY }), DAY / 2, 'the shorter one counts');
  assert.is(span({ deliveriesMs: 2 * 60 * 60 * 1000 }), 15 * 60 * 1000);
});

test('a generation is a minute at least, and none starts when nothing is ever removed', () => {
  assert.is(span({ eventsMs: 60_000, deliveriesMs: 60_000 }), 60_000);
  assert.is(span({ deliveriesMs: 5 * 60_000 }), 60_000);
  assert.is(span({ eventsMs: Infinity, deliveriesMs: Infinity }), Infinity);
  assert.is(span({ eventsMs: Infinity, deliveriesMs: 16 * 60 * 60 * 1000 }), 2 * 60 * 60 * 1000);
});

test.run();
