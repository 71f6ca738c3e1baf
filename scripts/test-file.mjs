// One compiled test file, run as uvu's own CLI runs it (its suites deferred, then run in order):
// the child process scripts/test.mjs starts for each file.
import path from 'node:path';
import { run } from 'uvu/run';

const file = path.resolve(process.argv[2]);
await run([{ name: path.basename(file), file }], {});
