import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { promisify } from 'node:util';

export interface Started {
  child: ChildProcess;
  /** Every stdout line so far. */
  lines: string[];
  /** Every stderr line so far. */
  errorLines: string[];
  /** Resolves the first stdout line (past or future) that `match` accepts; rejects after `timeoutMs` (60 s: a bound on a hang, on a loaded machine). */
  waitFor(match: (line: string) => boolean, timeoutMs?: number): Promise<string>;
  /** Resolves the exit code once the process has ended. */
  exited: Promise<number | null>;
}

/** Starts `node script` with `env` added, and follows its stdout line by line. */
export function startNode(script: string, env: Record<string, string>): Started {
  const child = spawn(process.execPath, [script], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const lines: string[] = [];
  const waiting = new Set<{
    match: (line: string) => boolean;
    resolve: (line: string) => void;
    timer?: NodeJS.Timeout;
  }>();
  createInterface({ input: child.stdout! }).on('line', (line) => {
    lines.push(line);
    for (const waiter of waiting) {
      if (waiter.match(line)) {
        waiting.delete(waiter);
        clearTimeout(waiter.timer);
        waiter.resolve(line);
      }
    }
  });
  const errorLines: string[] = [];
  createInterface({ input: child.stderr! }).on('line', (line) => errorLines.push(line));
  const exited = new Promise<number | null>((resolve) => child.once('close', (code) => resolve(code)));
  return {
    child,
    lines,
    errorLines,
    exited,
    waitFor(match, timeoutMs = 60_000) {
      const seen = lines.find(match);
      if (seen !== undefined) return Promise.resolve(seen);
      return new Promise((resolve, reject) => {
        const waiter: { match: (line: string) => boolean; resolve: (line: string) => void; timer?: NodeJS.Timeout } = {
          match,
          resolve,
        };
        waiting.add(waiter);
        const timer = (waiter.timer = setTimeout(() => {
          waiting.delete(waiter);
          reject(
            new Error(
              `no matching line within ${timeoutMs} ms; stdout:\n${lines.join('\n')}\nstderr:\n${errorLines.join('\n')}`,
            ),
          );
        }, timeoutMs));
        exited.then(() => {
          if (!waiting.has(waiter)) return;
          clearTimeout(timer);
          waiting.delete(waiter);
          reject(new Error(`process exited; stdout:\n${lines.join('\n')}\nstderr:\n${errorLines.join('\n')}`));
        });
      });
    },
  };
}

/** Parses a JSON log line, or returns null for any other line. */
export function logLine(line: string): Record<string, unknown> | null {
  try {
    const value = JSON.parse(line);
    return typeof value === 'object' && value !== null ? value : null;
  } catch {
    return null;
  }
}

/** Runs an ES module script in a Node process of its own (`node --input-type=module -e script`) and resolves what it printed. */
export function runModuleScript(script: string, timeoutMs = 20_000): Promise<{ stdout: string; stderr: string }> {
  return promisify(execFile)(process.execPath, ['--input-type=module', '-e', script], {
    encoding: 'utf8',
    timeout: timeoutMs,
  });
}

/**
 * Lines for such a script that define `loaded()`: whether a file of the package `name` has been
 * loaded. The CommonJS modules an ES module imports are in `require.cache`.
 */
export function loadedProbe(name: string): string {
  return `const { createRequire } = await import('node:module');
      const loaded = () => Object.keys(createRequire(import.meta.url).cache).some((file) => file.includes(${JSON.stringify(`/node_modules/${name}/`)}));`;
}
