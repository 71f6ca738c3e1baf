import { readFileSync, readdirSync } from 'node:fs';

/** USER_HZ: the unit of the CPU times in /proc/<pid>/stat (100 on Linux everywhere in practice). */
export const CLOCK_TICKS = 100;

/** A process's parent, its CPU ticks (user + system) and those of its children it has reaped. */
interface ProcessTimes {
  ppid: number;
  own: number;
  reaped: number;
}

/** `ProcessTimes` from /proc; undefined for a process that is gone. */
function processTimes(pid: number): ProcessTimes | undefined {
  try {
    // The fields after the command (which may hold spaces), from the third: ppid is the 4th,
    // utime and stime the 14th and 15th, cutime and cstime the 16th and 17th.
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return {
      ppid: Number(fields[1]),
      own: Number(fields[11]) + Number(fields[12]),
      reaped: Number(fields[13]) + Number(fields[14]),
    };
  } catch {
    return undefined;
  }
}

/** CPU ticks (user + system) a process has used, from /proc; undefined for one that is gone. */
export function cpuTicks(pid: number): number | undefined {
  return processTimes(pid)?.own;
}

/**
 * Every process of the PostgreSQL server: the backends of whatever connects meanwhile (a pool opens
 * and closes connections as the load asks), autovacuum and the WAL writer. Where one contender runs
 * at a time, the server's CPU over its round is that contender's. Empty where /proc is missing.
 */
function postgresPids(): number[] {
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
 * The CPU ticks the PostgreSQL server has used so far, all its processes together: those running
 * now, and those that have ended, which the postmaster reaped (its children's times, in its own
 * /proc entry). A backend that starts and ends between two readings counts in full; one that
 * ends before the second counts to its end. `undefined` without /proc or a server on this host.
 *
 * The postmaster is the server's process whose parent is not one of its processes. Every server on
 * the host is counted.
 */
export function postgresTicks(): number | undefined {
  const times = new Map<number, ProcessTimes>();
  for (const pid of postgresPids()) {
    const read = processTimes(pid);
    if (read !== undefined) times.set(pid, read);
  }
  if (times.size === 0) return undefined;
  let ticks = 0;
  for (const read of times.values()) {
    ticks += read.own;
    if (!times.has(read.ppid)) ticks += read.reaped;
  }
  return ticks;
}

/**
 * The PostgreSQL server's CPU seconds from now until `seconds()` is called, the processes that
 * ended meanwhile included (`postgresTicks`). `null` without /proc.
 */
export function postgresCpu(): { seconds(): number } | null {
  const first = postgresTicks();
  if (first === undefined) return null;
  return {
    seconds() {
      const now = postgresTicks();
      return now === undefined ? Number.NaN : (now - first) / CLOCK_TICKS;
    },
  };
}
