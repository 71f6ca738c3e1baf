import type { Test } from 'uvu';
import { skipping } from '../helpers/skip.js';
import type { Reopening } from './types.js';

/** `test`, for the tests that reopen a store; for a factory whose stores cannot be reopened, a stand-in that skips them and prints why. */
export function reopenable<T>(test: Test, factory: { name: string } & Reopening<T>): Test {
  return factory.reopen ? test : skipping(test, `${factory.name} cannot reopen a store: ${factory.whyNoReopen}`);
}
