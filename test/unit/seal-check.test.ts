import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { gapIsContents } from '../../src/domain/seal-check.js';

/**
 * The bytes a seal leaves out must be exactly its own /Contents hex string: a /ByteRange that skips
 * anything else (bytes an attacker changed) is not a seal of the file.
 */

const bytes = (text: string) => new Uint8Array(Buffer.from(text, 'latin1'));
const contents = new Uint8Array([0x0a, 0xbc, 0x00]);

test('the gap is the hex string of /Contents, delimiters included', () => {
  const file = bytes('head /Contents <0abc00> tail');
  const from = 'head /Contents '.length;
  assert.ok(gapIsContents(file, from, from + 8, contents));
  assert.ok(gapIsContents(bytes('head /Contents <0ABC00> tail'), from, from + 8, contents), 'upper-case hex');
});

test('anything else is refused: a wider gap, a narrower one, other bytes, other values, no delimiters', () => {
  const file = bytes('head /Contents <0abc00> tail');
  const from = 'head /Contents '.length;
  assert.not.ok(gapIsContents(file, from - 1, from + 8, contents), 'one byte more before');
  assert.not.ok(gapIsContents(file, from, from + 9, contents), 'one byte more after');
  assert.not.ok(gapIsContents(file, from + 1, from + 7, contents), 'the delimiters left signed');
  assert.not.ok(gapIsContents(bytes('head /Contents <0abc0g> tail'), from, from + 8, contents), 'not hex');
  assert.not.ok(gapIsContents(bytes('head /Contents <0abc01> tail'), from, from + 8, contents), 'not the value parsed');
  assert.not.ok(gapIsContents(bytes('head /Contents (0abc00) tail'), from, from + 8, contents), 'a literal string');
  // Bytes of a changed page skipped beside the signature: the gap is longer than its /Contents.
  const forged = bytes('head /Contents <0abc00> CHANGED PAGE tail');
  assert.not.ok(gapIsContents(forged, from, from + 8 + ' CHANGED PAGE'.length, contents));
});

test.run();
