import { readFileSync, readdirSync } from 'node:fs';

/** USER_HZ: the unit of the CPU times in /proc/<pid>/stat (100 on Linux everywhere in practice). */
export const CLOCK_TICKS = 100;

/** CPU ticks (user + system) a process has used, from /proc; undefined for one that is gone. */
export function cpuTicks(pid: number): number | undefined {
  try {
    // The fields after the command (which may hold spaces), from the third: utime and stime are the 14th and 15th.
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return Number(fields[11]) + Number(fields[12]);
  } catch {
    return undefined;
  }
}

/**
 * Every process of the PostgreSQL server: the backends of whatever connects meanwhile (a pool opens
 * and closes connections as the load asks), autovacuum and the WAL writer. Where one contender runs
 * at a time, the server's CPU over its round is that contender's. Empty where /proc is missing.
 */
export function postgresPids(): number[] {
  const pids: number[] = [];
  let entries: string[];
  try {
    entries = readdirSync('/proc');
  } catch {
    return pids;
  }
  for (const entry of entries) {
    if (!/^[0-9]+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/comm`, 'utf8').trim() === 'postgres') pids.push(Number(entry));
    } catch {
      // Gone meanwhile.
    }
  }
  return pids;
}

/**
 * The PostgreSQL server's CPU seconds from now until `seconds()` is called: a process that starts
 * meanwhile counts from zero; one that ends before the end is left out. `null` without /proc.
 */
export function postgresCpu(): { seconds(): number } | null {
  const first = new Map<number, number>();
  for (const pid of postgresPids()) {
    const ticks = cpuTicks(pid);
    if (ticks !== undefined) first.set(pid, ticks);
  }
  if (first.size === 0) return null;
  return {
    seconds() {
      let ticks = 0;
      for (const pid of postgresPids()) {
        // Gone between the listing and the read: left out, as one gone before the listing is.
        const now = cpuTicks(pid);
        if (now !== undefined) ticks += now - (first.get(pid) ?? 0);
      }
      return ticks / CLOCK_TICKS;
    },
  };
}
