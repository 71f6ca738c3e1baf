import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { paceSlots, restartedPace } from '../../src/rules/rate-limit.js';
import { StartWindow } from '../../src/webhooks/start-window.js';

const at = (second: number) => new Date(Date.UTC(2026, 0, 1, 0, 0, second)).toISOString().slice(0, 19) + '+00:00';

test('paceSlots: at most rateLimit to a second, in order, from where the pacing stood or from now when that is past', () => {
  const first = paceSlots(null, at(10), 2, 5);
  assert.equal(first.slots, [at(10), at(10), at(11), at(11), at(12)]);
  assert.equal(first.pace, { second: at(12), used: 1 });
  const next = paceSlots(first.pace, at(10), 2, 2);
  assert.equal(next.slots, [at(12), at(13)], 'on from the slot given last');
  assert.equal(next.pace, { second: at(13), used: 1 });
  const later = paceSlots(next.pace, at(20), 2, 1);
  assert.equal(later.slots, [at(20)], 'a pacing long past starts again at now');
  assert.equal(paceSlots(next.pace, at(20), 2, 0), { slots: [], pace: next.pace }, 'none to pace changes nothing');
  const full = paceSlots({ second: at(10), used: 3 }, at(10), 3, 1);
  assert.equal(full.slots, [at(11)], 'a full second gives the next');
});

test('restartedPace: back to now, with its slots spent, when it stood beyond; as it was otherwise', () => {
  assert.equal(restartedPace({ second: at(15), used: 1 }, at(10), 3), { second: at(10), used: 3 });
  assert.equal(restartedPace({ second: at(10), used: 2 }, at(10), 3), { second: at(10), used: 2 });
  assert.equal(restartedPace({ second: at(5), used: 2 }, at(10), 3), { second: at(5), used: 2 });
});

test('StartWindow: at most rateLimit starts in any window of a second and 50 ms for transit; the next waits until the oldest is out of it', () => {
  const window = new StartWindow();
  assert.is(window.wait('wbh_a', 2, 0), 0);
  window.started('wbh_a', 2, 0);
  assert.is(window.wait('wbh_a', 2, 100), 390, 'evenly: 500 ms apart, 10 ms early at most');
  window.started('wbh_a', 2, 490);
  assert.is(window.wait('wbh_a', 2, 600), 450, 'two in the window: wait for the first to leave it');
  assert.is(window.wait('wbh_b', 2, 600), 0, 'another webhook is not held');
  assert.is(window.wait('wbh_a', 2, 1050), 0, 'at 1050 the first is out of the window');
  window.started('wbh_a', 2, 1050);
  assert.is(window.wait('wbh_a', 2, 1060), 480, 'the one at 490 leaves the window at 1540');
  assert.is(window.wait('wbh_a', 2, 5000), 0, 'long after: free again');
});

test('StartWindow: calls start evenly, 1000 / rateLimit ms apart, at most 10 ms worth at once', () => {
  const window = new StartWindow();
  const starts: number[] = [];
  // A thousand due at once, at 1,000 a second: each tried as soon as the window says.
  for (let now = 0; starts.length < 30; ) {
    const wait = window.wait('wbh_a', 1000, now);
    if (wait > 0) {
      now += wait;
      continue;
    }
    window.started('wbh_a', 1000, now);
    starts.push(now);
  }
  assert.equal(starts.slice(0, 11), Array(11).fill(0), 'ten milliseconds worth, and one, at once');
  assert.equal(starts.slice(11, 14), [1, 2, 3], 'then one a millisecond');
  assert.is(new StartWindow().wait('wbh_b', 1, 0), 0);
});

test.run();
