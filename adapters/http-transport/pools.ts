import type { Pool } from 'undici';

/**
 * undici pools, one per account and origin: a connection carries only one account's calls, so no
 * answer, late or stray, can reach another account's call. A pool is dropped once its last
 * connection has closed (idle ones close after the keep-alive timeout), so what is kept is bounded
 * by the connections open, not by every origin ever called.
 */
export function createPools(make: (origin: string) => Pool) {
  /** Account → origin → pool: two lookups instead of a key string made for every call. */
  const pools = new Map<string, Map<string, Pool>>();
  let size = 0;

  function get(accountId: string, origin: string): Pool {
    let ofAccount = pools.get(accountId);
    const pool = ofAccount?.get(origin);
    if (pool !== undefined) return pool;
    if (ofAccount === undefined) pools.set(accountId, (ofAccount = new Map()));
    const created = make(origin);
    const kept = ofAccount;
    let connected = 0;
    const dropIfUnused = () => {
      if (connected > 0 || kept.get(origin) !== created) return;
      kept.delete(origin);
      size--;
      if (kept.size === 0 && pools.get(accountId) === kept) pools.delete(accountId);
      // Graceful: a call queued on it still goes out; the next call gets a new pool.
      created.close().catch(() => {});
    };
    created
      .on('connect', () => connected++)
      .on('disconnect', () => {
        connected--;
        dropIfUnused();
      })
      .on('connectionError', dropIfUnused);
    ofAccount.set(origin, created);
    size++;
    return created;
  }

  return {
    get,
    /** How many pools are kept (for the tests of the bound). */
    get size() {
      return size;
    },
    async close(): Promise<void> {
      const all = [...pools.values()].flatMap((ofAccount) => {
        const kept = [...ofAccount.values()];
        ofAccount.clear();
        return kept;
      });
      pools.clear();
      size = 0;
      await Promise.all(all.map((pool) => pool.destroy()));
    },
  };
}
