/** Code-unit order of two strings, which for ATOM date-times is time order. */
export const compareKeys = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

/** Oldest first: by `createdAt`, then by id, so records made in the same second keep one stable order. */
export const oldestFirst = (a: { createdAt: string; id: string }, b: { createdAt: string; id: string }): number =>
  compareKeys(a.createdAt, b.createdAt) || compareKeys(a.id, b.id);

/** Newest first: the reverse of `oldestFirst`. */
export const newestFirst = (a: { createdAt: string; id: string }, b: { createdAt: string; id: string }): number => oldestFirst(b, a);

interface Listed {
  type: string;
  name: string;
  id: string;
}

/**
 * `entries` in the listing order of a directory: directories first, then files; each by name
 * without regard to case, then by id. A new array; each name is lowered once, not per comparison.
 */
export function inListingOrder<T extends Listed>(entries: readonly T[]): T[] {
  return entries
    .map((entry) => ({ rank: entry.type === 'directory' ? 0 : 1, sortName: entry.name.toLowerCase(), id: entry.id, entry }))
    .sort((a, b) => {
      if (a.rank !== b.rank) return a.rank - b.rank;
      if (a.sortName !== b.sortName) return a.sortName < b.sortName ? -1 : 1;
      return a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
    })
    .map((item) => item.entry);
}
