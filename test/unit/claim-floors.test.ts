import { test } from 'uvu';
import * as assert from 'uvu/assert';
import {
  FRESH_SLACK_MS,
  RESCUE_MS,
  RESCUE_SHARE,
  WIDE_SCAN_MS,
  WIDE_SLACK_MS,
  claimFloors,
} from '../../adapters/sql/outbox/floors.js';
import type { DeliveryRecord } from '../../src/records.js';

/** Floors on a clock the test moves (ms). */
function onClock() {
  const clock = { ms: 0 };
  return { clock, floors: claimFloors(() => clock.ms) };
}

const leased = (accountId: string, nextAttemptAt: string) => ({ accountId, nextAttemptAt }) as DeliveryRecord;
const T = '2026-12-06T10:00:05+00:00';
const atSecond = (offset: number) => new Date(Date.parse(T) + offset * 1000).toISOString().slice(0, 19) + '+00:00';
const claim = { limit: 10, max: 4, inFlight: {} };
/** What the claim statement's first row says it looked at: the accounts and the floor each was walked from. */
const looked = (accounts: string[], floors: string[]) => ({ f_accounts: accounts, f_floors: floors });

test('a first claim, and one whose clock went back or a minute ahead, walks every account from the start', () => {
  const { clock, floors } = onClock();
  assert.is(floors.windowFrom(T), null);
  floors.claimed(T, clock.ms, [], looked([], []), claim);
  clock.ms += 2 * WIDE_SCAN_MS;
  assert.is(floors.windowFrom(atSecond(-1)), null, 'clock gone back');
  assert.is(floors.windowFrom(atSecond(61)), null, 'more than a minute ahead');
  assert.is.not(floors.windowFrom(atSecond(60)), null, 'a minute ahead is a window');
});

test('a wide scan looks back a whole second, at most once every WIDE_SCAN_MS; the others only as far as they must', () => {
  const { clock, floors } = onClock();
  floors.claimed(T, clock.ms, [], looked([], []), claim);
  // A second claim in the same second, FRESH_SLACK_MS after the first began: a delivery it missed
  // was made within FRESH_SLACK_MS before it, in this second.
  clock.ms += FRESH_SLACK_MS;
  floors.claimed(T, clock.ms, [], looked([], []), claim);
  assert.is(floors.windowFrom(T), atSecond(-WIDE_SLACK_MS / 1000), 'the first window is wide');
  clock.ms += WIDE_SCAN_MS - 1;
  assert.is(floors.windowFrom(T), T, 'within WIDE_SCAN_MS: from this second');
  clock.ms += 1;
  assert.is(floors.windowFrom(T), atSecond(-1), 'wide again once WIDE_SCAN_MS has passed');
  // A claim in a new second is 0 ms into it: the window takes in the second before.
  floors.claimed(atSecond(1), clock.ms, [], looked([], []), claim);
  assert.is(floors.windowFrom(atSecond(1)), T);
});

test('each account leased for starts at its first delivery leased; one with room and nothing due is forgotten', () => {
  const { clock, floors } = onClock();
  floors.claimed(
    T,
    clock.ms,
    [leased('acct_a', atSecond(-3)), leased('acct_a', atSecond(-5)), leased('acct_b', atSecond(-1))],
    looked(['acct_a', 'acct_b', 'acct_c'], ['-infinity', '-infinity', atSecond(-9)]),
    claim,
  );
  assert.equal(
    [...floors.known].sort(),
    [
      ['acct_a', atSecond(-5)],
      ['acct_b', atSecond(-1)],
    ],
    'acct_c had room in its share and the claim room left: nothing due from its floor on',
  );
});

test('an account left out for want of room keeps the floor the claim walked it from', () => {
  const { clock, floors } = onClock();
  // acct_c holds its whole share in flight.
  floors.claimed(T, clock.ms, [], looked(['acct_c'], [atSecond(-9)]), { ...claim, inFlight: { acct_c: 4 } });
  assert.equal([...floors.known], [['acct_c', atSecond(-9)]]);
  // The claim filled its limit: an account it passed over keeps its floor too.
  const full = Array.from({ length: claim.limit }, () => leased('acct_a', atSecond(-2)));
  floors.claimed(T, clock.ms, full, looked(['acct_a', 'acct_d'], [atSecond(-4), atSecond(-7)]), claim);
  assert.equal([...floors.known].sort(), [
    ['acct_a', atSecond(-2)],
    ['acct_c', atSecond(-9)],
    ['acct_d', atSecond(-7)],
  ]);
});

test('the rescue runs every RESCUE_MS, lowers floors it finds below, and backs off when slow', async () => {
  const { clock, floors } = onClock();
  floors.claimed(T, clock.ms, [leased('acct_a', atSecond(-1))], looked(['acct_a'], ['-infinity']), claim);
  let reads = 0;
  const rows = [
    { account_id: 'acct_a', due: atSecond(-30) },
    { account_id: 'acct_z', due: '-infinity' },
  ];
  const read = async () => {
    reads++;
    return rows;
  };
  floors.rescue(read);
  assert.is(reads, 0, 'not before RESCUE_MS');
  clock.ms = RESCUE_MS;
  floors.rescue(async () => {
    reads++;
    // It took 1 s: the next is 50 s later, more than RESCUE_MS.
    clock.ms += 1000;
    return rows;
  });
  floors.rescue(read);
  assert.is(reads, 1, 'one at a time');
  await new Promise((resolve) => setImmediate(resolve));
  assert.equal([...floors.known].sort(), [
    ['acct_a', atSecond(-30)],
    ['acct_z', '-infinity'],
  ]);
  clock.ms += RESCUE_SHARE * 1000 - 1;
  floors.rescue(read);
  assert.is(reads, 1, 'backed off to RESCUE_SHARE times its duration');
  clock.ms += 1;
  floors.rescue(read);
  assert.is(reads, 2);
});

test('a rescue that failed leaves the floors as they were and is tried again later', async () => {
  const { clock, floors } = onClock();
  floors.claimed(T, clock.ms, [leased('acct_a', atSecond(-1))], looked(['acct_a'], ['-infinity']), claim);
  clock.ms = RESCUE_MS;
  floors.rescue(async () => {
    throw new Error('the database is away');
  });
  await new Promise((resolve) => setImmediate(resolve));
  assert.equal([...floors.known], [['acct_a', atSecond(-1)]]);
  clock.ms += RESCUE_MS;
  let read = false;
  floors.rescue(async () => {
    read = true;
    return [];
  });
  assert.ok(read);
});

test.run();
