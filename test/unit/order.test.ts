import { test } from 'uvu';
import * as assert from 'uvu/assert';
import fc from 'fast-check';
import { inListingOrder } from '../../src/shared/order.js';

interface Entry {
  id: string;
  type: 'file' | 'directory';
  name: string;
}

/** The listing order as the spec words it, written plainly: every name lowered into a key, then one sort. */
function reference(entries: Entry[]): Entry[] {
  return entries
    .map((entry) => ({ rank: entry.type === 'directory' ? 0 : 1, key: entry.name.toLowerCase(), entry }))
    .sort(
      (a, b) =>
        a.rank - b.rank ||
        (a.key < b.key ? -1 : a.key > b.key ? 1 : 0) ||
        (a.entry.id < b.entry.id ? -1 : a.entry.id > b.entry.id ? 1 : 0),
    )
    .map((item) => item.entry);
}

// Letters whose lowering is not one ASCII code unit each: Σ (final σ/ς), İ (two code units), Ä, ß, an emoji (a surrogate pair).
const name = fc
  .array(
    fc.constantFrom(
      'a',
      'B',
      'b',
      'A',
      'z',
      'Z',
      '-',
      '.',
      '1',
      '_',
      'Σ',
      'σ',
      'ς',
      'İ',
      'i',
      'Ä',
      'ä',
      'ß',
      '😀',
      ' ',
    ),
    { maxLength: 6 },
  )
  .map((chars) => chars.join(''));
const entries = fc.uniqueArray(
  fc.record({
    id: fc.stringMatching(/^fs[fd]_[0-9A-Za-z]{1,4}$/),
    type: fc.constantFrom<'file' | 'directory'>('file', 'directory'),
    name,
  }),
  { selector: (entry) => entry.id, maxLength: 40 },
);

test('listing order: the same as lowering every name and sorting, for names within ASCII and beyond', () => {
  fc.assert(
    fc.property(entries, (list) => assert.equal(inListingOrder(list), reference(list))),
    { numRuns: 2000 },
  );
});

test('listing order: entries given in that order, or in the reverse order, come out in it', () => {
  fc.assert(
    fc.property(entries, (list) => {
      const expected = reference(list);
      assert.equal(inListingOrder(expected), expected);
      assert.equal(inListingOrder([...expected].reverse()), expected);
    }),
    { numRuns: 1000 },
  );
});

test('listing order: a new array; the entries given are left in their order', () => {
  const given: Entry[] = [
    { id: 'fsf_2', type: 'file', name: 'b.pdf' },
    { id: 'fsf_1', type: 'file', name: 'B.pdf' },
    { id: 'fsd_1', type: 'directory', name: 'z' },
  ];
  const copy = [...given];
  const ordered = inListingOrder(given);
  assert.equal(
    ordered.map((entry) => entry.id),
    ['fsd_1', 'fsf_1', 'fsf_2'],
  );
  assert.equal(given, copy);
  assert.is.not(ordered, given);
});

test.run();
