import { test } from 'uvu';
import * as assert from 'uvu/assert';
import * as v from 'valibot';
import { parseInput } from '../../src/domain/inputs.js';
import { PortalError } from '../../src/errors.js';

const shape = v.strictObject(
  { filter: v.string(), limit: v.optional(v.number()) },
  'must be an object such as {"filter": "…"}',
);

function refusal(input: unknown): string {
  try {
    parseInput(shape, input, 'thing');
  } catch (error) {
    assert.ok(error instanceof PortalError, String(error));
    assert.is((error as { status: number }).status, 400);
    return (error as Error).message;
  }
  throw new Error('accepted');
}

test('an unknown field is named first, before a required one is said to be missing', () => {
  assert.is(refusal({ filtre: 'x' }), 'thing has an unknown field "filtre".');
  assert.is(refusal({ filter: 'x', colour: 1 }), 'thing has an unknown field "colour".');
  assert.is(refusal({ limit: 'x', colour: 1 }), 'thing has an unknown field "colour".');
});

test("an array, or null, is no object: the object's own message", () => {
  for (const input of [[], [{ filter: 'x' }], null, 'text'])
    assert.match(refusal(input), /^thing: must be an object such as/, JSON.stringify(input));
});

test('a field of the wrong kind or missing is named with its path', () => {
  assert.match(refusal({}), /^thing\.filter: /);
  assert.match(refusal({ filter: 1 }), /^thing\.filter: /);
  assert.equal(parseInput(shape, { filter: 'x' }, 'thing'), { filter: 'x' });
});

test.run();
