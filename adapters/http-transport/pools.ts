import type { Pool } from 'undici';

export interface PoolsOptions {
  /**
   * Open connections kept across all pools. Once a new connection takes the count past it, idle
   * pools are closed, least recently called first, until what stays open fits: however many
   * accounts and origins are called, and however long their receivers ask sockets to be kept.
   */
  maxConnections?: number;
}

/** What the pools keep open by default: far more than one worker's calls in flight, far fewer than a process's file descriptors. */
const MAX_CONNECTIONS = 256;

interface Entry {
  pool: Pool;
  /** Its connections open now. */
  connected: number;
  drop(): void;
}

/**
 * undici pools, one per account and origin: a connection carries only one account's calls, so no
 * answer, late or stray, can reach another account's call. A pool is dropped once its last
 * connection has closed (idle ones close after the keep-alive timeout), so what is kept is bounded
 * by the connections open, not by every origin ever called; and the connections open are bounded
 * by `maxConnections`.
 */
export function createPools(make: (origin: string) => Pool, options: PoolsOptions = {}) {
  const maxConnections = options.maxConnections ?? MAX_CONNECTIONS;
  /** Account → origin → pool: two lookups instead of a key string made for every call. */
  const pools = new Map<string, Map<string, Entry>>();
  /** Every kept pool, least recently called first (a Set keeps insertion order). */
  const recency = new Set<Entry>();
  /** The connections open in the kept pools: a dropped pool's are no longer counted, as trim closed them. */
  let connected = 0;

  /**
   * Closes idle pools, least recently called first, until the connections left open fit. A pool with
   * a call running or queued is passed over: undici closes its idle sockets after their keep-alive.
   */
  function trim(): void {
    let over = connected - maxConnections;
    for (const entry of recency) {
      if (over <= 0) return;
      const { stats } = entry.pool;
      if (stats.running > 0 || stats.pending > 0 || stats.queued > 0) continue;
      over -= entry.connected;
      entry.drop();
    }
  }

  function get(accountId: string, origin: string): Pool {
    let ofAccount = pools.get(accountId);
    const found = ofAccount?.get(origin);
    if (found !== undefined) {
      recency.delete(found);
      recency.add(found);
      return found.pool;
    }
    if (ofAccount === undefined) pools.set(accountId, (ofAccount = new Map()));
    const kept = ofAccount;
    const entry: Entry = {
      pool: make(origin),
      connected: 0,
      drop() {
        if (kept.get(origin) !== entry) return;
        kept.delete(origin);
        recency.delete(entry);
        connected -= entry.connected;
        if (kept.size === 0 && pools.get(accountId) === kept) pools.delete(accountId);
        // Graceful: a call queued on it still goes out; the next call gets a new pool.
        entry.pool.close().catch(() => {});
      },
    };
    entry.pool
      .on('connect', () => {
        entry.connected++;
        if (!recency.has(entry)) return;
        if (++connected > maxConnections) trim();
      })
      .on('disconnect', () => {
        entry.connected--;
        if (!recency.has(entry)) return;
        connected--;
        if (entry.connected === 0) entry.drop();
      })
      .on('connectionError', () => {
        if (entry.connected === 0) entry.drop();
      });
    kept.set(origin, entry);
    recency.add(entry);
    return entry.pool;
  }

  return {
    get,
    /** How many pools are kept (for the tests of the bounds). */
    get size() {
      return recency.size;
    },
    /** How many connections are open across the pools (for the tests of the bounds). */
    get connected() {
      return connected;
    },
    async close(): Promise<void> {
      const all = [...recency].map((entry) => entry.pool);
      pools.clear();
      recency.clear();
      connected = 0;
      await Promise.all(all.map((pool) => pool.destroy()));
    },
  };
}
