import type { Pool } from 'undici';

/**
 * undici pools, one per account and origin: a connection carries only one account's calls, so no
 * answer, late or stray, can reach another account's call. A pool is dropped once its last
 * connection has closed (idle ones close after the keep-alive timeout), so what is kept is bounded
 * by the connections open, not by every origin ever called.
 */
export function createPools(make: (origin: string) => Pool) {
  const pools = new Map<string, Pool>();

  function get(accountId: string, origin: string): Pool {
    const key = `${accountId} ${origin}`;
    let pool = pools.get(key);
    if (pool !== undefined) return pool;
    const created = make(origin);
    let connected = 0;
    const dropIfUnused = () => {
      if (connected > 0 || pools.get(key) !== created) return;
      pools.delete(key);
      // Graceful: a call queued on it still goes out; the next call gets a new pool.
      void created.close();
    };
    created
      .on('connect', () => connected++)
      .on('disconnect', () => {
        connected--;
        dropIfUnused();
      })
      .on('connectionError', dropIfUnused);
    pools.set(key, created);
    return created;
  }

  return {
    get,
    /** How many pools are kept (for the tests of the bound). */
    get size() {
      return pools.size;
    },
    async close(): Promise<void> {
      const all = [...pools.values()];
      pools.clear();
      await Promise.all(all.map((pool) => pool.destroy()));
    },
  };
}
