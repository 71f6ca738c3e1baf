import { test } from 'uvu';
import * as assert from 'uvu/assert';
import fc from 'fast-check';
import { ID_PREFIXES, deliveryIdOf, isId, newId } from '../../src/shared/ids.js';
import { newDelivery, recoveredDelivery } from '../../src/rules/deliveries.js';
import { newWebhookSecret } from '../../src/domain/webhooks.js';
import { atom, atomAfter } from '../../src/shared/time.js';
import { validateHeaderValue } from 'node:http';
import * as v from 'valibot';
import { mediaType } from '../../src/domain/inputs.js';

test('ids: every prefix, 22 base-62 characters, no repeats over 100,000', () => {
  for (const prefix of ID_PREFIXES) assert.match(newId(prefix), new RegExp(`^${prefix}_[0-9A-Za-z]{22}$`));
  const seen = new Set<string>();
  for (let i = 0; i < 100_000; i++) seen.add(newId('wbh'));
  assert.is(seen.size, 100_000);
});

test('ids: characters are spread evenly over the 62 (no modulo bias)', () => {
  const counts = new Map<string, number>();
  const samples = 20_000;
  for (let i = 0; i < samples; i++)
    for (const char of newId('evt').slice(4)) counts.set(char, (counts.get(char) ?? 0) + 1);
  assert.is(counts.size, 62);
  const expected = (samples * 22) / 62;
  for (const [char, count] of counts) {
    // ±6 % is far beyond chance for 7,000 draws a character, and far below the 25 % skew of `byte % 62`.
    assert.ok(Math.abs(count - expected) / expected < 0.06, `${char}: ${count} vs ${expected}`);
  }
});

test("delivery ids: a publish's are the event's and webhook's, the same every time; a recovery's are new", () => {
  const event = { id: newId('evt'), accountId: 'acct_1', type: 'ticket-created', createdAt: atom(new Date(0)) };
  const [one, other] = [newId('wbh'), newId('wbh')];
  const id = newDelivery(event, one).id;
  assert.match(id, /^whd_[0-9A-Za-z]{22}$/);
  assert.ok(isId('whd', id));
  assert.is(newDelivery(event, one).id, id);
  assert.is(deliveryIdOf(event.id, one), id);
  assert.is.not(newDelivery(event, other).id, id);
  assert.is.not(newDelivery({ ...event, id: newId('evt') }, one).id, id);
  // The pair is split where it was split: not "ab" + "c" as "a" + "bc".
  assert.is.not(deliveryIdOf('evt_ab', 'c'), deliveryIdOf('evt_a', 'bc'));
  const recovered = recoveredDelivery(event, one, atom(new Date(1000)));
  assert.match(recovered.id, /^whd_[0-9A-Za-z]{22}$/);
  assert.is.not(recovered.id, id);
  const seen = new Set<string>();
  for (let i = 0; i < 20_000; i++) seen.add(deliveryIdOf(`evt_${i}`, one));
  assert.is(seen.size, 20_000);
});

test('isId: prefix and shape', () => {
  assert.ok(isId('fsd', 'fsd_abcXYZ019'));
  assert.ok(isId('tck', newId('tck')));
  for (const bad of [
    'fsf_abc',
    'fsd_',
    'fsd-abc',
    'fsd_ab-c',
    'fsd_' + 'a'.repeat(65),
    ' fsd_abc',
    'fsd_abc\n',
    42,
    null,
  ]) {
    assert.not.ok(isId('fsd', bad), String(bad));
  }
});

test('ATOM date-times: UTC, second precision, +00:00', () => {
  assert.is(atom(new Date('2026-11-21T09:05:07.999Z')), '2026-11-21T09:05:07+00:00');
  assert.is(atom(new Date(Date.UTC(1999, 0, 1))), '1999-01-01T00:00:00+00:00');
  assert.is(atomAfter(new Date('2026-11-21T23:58:00.500Z'), 300), '2026-11-22T00:03:00+00:00');
});

test('webhook secrets: whsec_ + base64 of 32 random bytes', () => {
  const a = newWebhookSecret();
  assert.match(a, /^whsec_[A-Za-z0-9+/]{43}=$/);
  assert.is(Buffer.from(a.slice(6), 'base64').length, 32);
  assert.is.not(a, newWebhookSecret());
});

const isMediaType = (text: string) => v.safeParse(mediaType, text).success;

test('media types: RFC 9110 type "/" subtype *( OWS ";" OWS parameter ), token characters, quoted strings', () => {
  for (const good of [
    'application/pdf',
    'text/plain; charset=utf-8',
    'text/plain;charset=UTF-8',
    'multipart/form-data; boundary="a b;c"',
    'application/vnd.api+json',
    "application/x-my~type!#$%&'*+-.^_`|",
    'text/plain; a=1; b="two"; c="esc\\"aped"',
    'image/svg+xml ; q=1',
  ]) {
    assert.ok(isMediaType(good), good);
  }
  for (const bad of [
    'text',
    'text/',
    '/plain',
    'text/plain;',
    'text/plain; charset',
    'text/plain; charset=',
    'text/pl ain',
    'text/plain\r\nX-Injected: 1',
    'text/plain\n',
    'text/plain;\ncharset=utf-8',
    'text/plain; charset="utf\r\n-8"',
    'text/plain; a="x\u2028y"',
    'text/plain\u2028; a=b',
    'text/plain;\u2029a=b',
    'text/plain; a="x\u0000y"',
    'text/plain; a="x\u007fy"',
    'text/plain; a="x\u0085y"',
    'text/plain;\ta=b',
    'text/plain; a="unterminated',
    'text/plain; a="x"y',
    'text/pla(in)',
    'tëxt/plain',
    'text/plain; a=é',
    'text/plain; a="é"',
    'a/' + 'b'.repeat(254),
  ]) {
    assert.not.ok(isMediaType(bad), JSON.stringify(bad));
  }
});

test('media types: whatever is accepted can go out as a Content-Type header (a download never answers 500)', () => {
  fc.assert(
    fc.property(
      fc.string({ unit: 'binary', maxLength: 60 }),
      fc.string({ unit: 'binary', maxLength: 20 }),
      (tail, quoted) => {
        for (const candidate of [`text/${tail}`, `text/plain; a="${quoted}"`, `text/plain;${tail}`]) {
          if (!isMediaType(candidate)) continue;
          validateHeaderValue('Content-Type', candidate);
        }
      },
    ),
    { numRuns: 5000 },
  );
});

test.run();
