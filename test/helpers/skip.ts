import type { Test } from 'uvu';

/**
 * A stand-in for `test`, for tests that cannot run here: each test registered on it is counted as
 * skipped in uvu's summary, and its title printed with `reason`. A skip always says why.
 */
export function skipping(test: Test, reason: string): Test {
  const skip = (title: string) => {
    test.skip(title, () => {});
    console.log(`SKIP "${title}": ${reason}`);
  };
  return Object.assign(skip, { skip, only: skip }) as unknown as Test;
}
