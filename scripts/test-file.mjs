// Compiled test files, run as uvu's own CLI runs them (their suites deferred, then run in order,
// one file after another): the child process scripts/test.mjs starts for a file or a group.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { run } from 'uvu/run';

// The CPU the file cost, its own and its reaped children's (a PDF tool, a child server), in the
// last line it writes: /proc/self/stat's utime, stime, cutime and cstime, in clock ticks.
process.on('exit', () => {
  try {
    const stat = readFileSync('/proc/self/stat', 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const ticks = fields.slice(11, 15).reduce((sum, field) => sum + Number(field), 0);
    process.stdout.write(`\ncpu: ${(ticks / 100).toFixed(1)} s\n`);
  } catch {}
});

const files = process.argv.slice(2).map((file) => path.resolve(file));
await run(
  files.map((file) => ({ name: path.relative(path.resolve('dist/test'), file), file })),
  {},
);
