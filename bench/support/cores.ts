import { execFileSync, spawn, type ChildProcess, type SpawnOptions } from 'node:child_process';
import { createInterface } from 'node:readline';

/** Set by `spawnNode` in the processes it starts: the core taskset placed them on. */
const PLACED = 'BENCH_CORE';

/**
 * Whether `taskset` exists here; where it does, importing this pins the importing process (the load),
 * every thread of it, to core 1, and `spawnNode` puts servers on core 0. Children of the load inherit
 * core 1. A process `spawnNode` started is on its core already and stays there: a server that
 * imports this (a bench file serving from itself: the upload bench's `--serve`, the tenants bench's
 * `--portal`) must not move its main thread onto the load's core.
 */
export const pinned: boolean = (() => {
  try {
    if (process.env[PLACED] === undefined)
      execFileSync('taskset', ['-a', '-cp', '1', String(process.pid)], { stdio: 'ignore' });
    else execFileSync('taskset', ['-p', String(process.pid)], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
})();

/**
 * `node ...args` on `core` where `taskset` exists, else unpinned. taskset execs node in place: the
 * pid stays the server's, which /proc is read by.
 */
export function spawnNode(
  core: number,
  args: readonly string[],
  options: SpawnOptions,
  node = process.execPath,
): ChildProcess {
  const placed = { ...options, env: { ...(options.env ?? process.env), [PLACED]: String(core) } };
  return pinned ? spawn('taskset', ['-c', String(core), node, ...args], placed) : spawn(node, args, placed);
}

/** The JSON after `READY ` on the first such line a bench server prints, or a rejection when it exits first. */
export function readyLine(name: string, child: ChildProcess): Promise<Record<string, unknown>> {
  return new Promise((resolve, reject) => {
    createInterface({ input: child.stdout! }).on(
      'line',
      (text) => text.startsWith('READY ') && resolve(JSON.parse(text.slice(6))),
    );
    child.once('exit', (code) => reject(new Error(`${name} server exited with ${code}`)));
  });
}
