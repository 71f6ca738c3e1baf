import { execFile, execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { median } from './median.js';
import type { Row } from './row.js';

/**
 * `wrk`, a load generator written in C (Debian's package `wrk`): one of its threads sends more
 * requests a second than the fastest server here answers on one core, where autocannon in the
 * bench's own process saturates its core first and compresses every ratio toward 1. Where it is
 * missing the bench loads with autocannon and says why.
 */
export const wrkPath: string | null = (() => {
  try {
    return execFileSync('sh', ['-c', 'command -v wrk'], { encoding: 'utf8' }).trim() || null;
  } catch {
    return null;
  }
})();

/** Clock ticks a second of `/proc/<pid>/stat` times (`getconf CLK_TCK`, 100 on Linux). */
const TICKS = (() => {
  try {
    return Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
  } catch {
    return 100;
  }
})();

const scripts = new Map<string, string>();

/** A Lua script that sends `paths` in turn on each connection, with `headers`: every request formatted once, in `init`. */
function scriptFor(paths: string[], headers: Record<string, string>): string {
  const key = JSON.stringify([paths, headers]);
  const known = scripts.get(key);
  if (known !== undefined) return known;
  const lua = (text: string) => JSON.stringify(text);
  const file = path.join(mkdtempSync(path.join(tmpdir(), 'bench-wrk-')), 'paths.lua');
  writeFileSync(
    file,
    [
      `local paths = { ${paths.map(lua).join(', ')} }`,
      `local headers = { ${Object.entries(headers)
        .map(([name, value]) => `[${lua(name)}] = ${lua(value)}`)
        .join(', ')} }`,
      'local requests = {}',
      'local i = 0',
      'function init(args)',
      '  for n, p in ipairs(paths) do requests[n] = wrk.format("GET", p, headers) end',
      // Each connection's thread starts at another place in the list.
      '  i = math.random(#paths) - 1',
      'end',
      'function request()',
      '  i = i % #requests + 1',
      '  return requests[i]',
      'end',
      '',
    ].join('\n'),
  );
  scripts.set(key, file);
  return file;
}

export interface WrkRound {
  answered: number;
  seconds: number;
  /** Answers whose status is not 2xx or 3xx. */
  non2xx: number;
  /** Connect, read, write errors and timeouts. */
  errors: number;
  /** wrk's own CPU time (user + system) over the round's wall time: 1 is its whole core. */
  loadCpuShare: number;
}

/**
 * One round of `seconds` with one wrk thread and `connections` connections, one request in flight
 * on each. wrk runs under `sh`, which reads its own children's CPU times (`cutime`, `cstime` of
 * `/proc/<pid>/stat`) once wrk has exited: wrk's CPU, counted by the kernel.
 */
export function wrkRound(
  port: number,
  paths: string[],
  headers: Record<string, string>,
  seconds: number,
  connections: number,
): Promise<WrkRound> {
  const script = scriptFor(paths, headers);
  const command = `"$0" -t1 -c${connections} -d${seconds}s --latency -s "$1" "$2" && cat /proc/$$/stat`;
  return new Promise((resolve, reject) => {
    const started = process.hrtime.bigint();
    execFile(
      'sh',
      ['-c', command, wrkPath!, script, `http://127.0.0.1:${port}`],
      { encoding: 'utf8' },
      (error, stdout, stderr) => {
        if (error) return reject(new Error(`wrk: ${stderr || error.message}`));
        const wall = Number(process.hrtime.bigint() - started) / 1e9;
        const total = /(\d+) requests in ([\d.]+)(m?s)/.exec(stdout);
        if (total === null) return reject(new Error(`wrk: no total in ${stdout}`));
        const socket = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(stdout);
        const non2xx = /Non-2xx or 3xx responses: (\d+)/.exec(stdout);
        // The last line is sh's own stat: fields 16 and 17 (1-based) are its waited-for children's times.
        const stat = stdout.trim().split('\n').pop()!;
        const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
        const childTicks = Number(fields[13]) + Number(fields[14]);
        resolve({
          answered: Number(total[1]),
          seconds: Number(total[2]) / (total[3] === 'ms' ? 1000 : 1),
          non2xx: non2xx === null ? 0 : Number(non2xx[1]),
          errors: socket === null ? 0 : socket.slice(1).reduce((sum, n) => sum + Number(n), 0),
          loadCpuShare: childTicks / TICKS / Math.min(wall, Number(total[2]) / (total[3] === 'ms' ? 1000 : 1)),
        });
      },
    );
  });
}

/** The most of its core the load generator may use while it loads the fastest contender: past it, it may be what limits. */
const LOAD_CPU_LIMIT = 0.8;

/**
 * The check that the load generator is not the bottleneck: wrk's share of its core over the rounds
 * it loaded the fastest contender of `scenario` (the median of `shares`), at most `LOAD_CPU_LIMIT`.
 */
export function loadCheckRow(scenario: string, fastest: string, shares: number[]): Row {
  const share = median(shares);
  return {
    scenario: `${scenario}, wrk's CPU loading the fastest (${fastest})`,
    figure: share * 100,
    unit: '% of a core',
    baselineName: 'limit',
    baseline: LOAD_CPU_LIMIT * 100,
    ratio: share / LOAD_CPU_LIMIT,
    target: `≤ ${LOAD_CPU_LIMIT * 100} %`,
    holds: share <= LOAD_CPU_LIMIT,
  };
}
