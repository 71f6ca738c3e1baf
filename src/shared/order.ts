/** Code-unit order of two strings, which for ATOM date-times is time order. */
export const compareKeys = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

const byCreatedAt = (a: { createdAt: string }, b: { createdAt: string }): number =>
  compareKeys(a.createdAt, b.createdAt);

/**
 * Oldest first, in place. `records` come in creation order (how the memory and filesystem stores
 * keep them); ATOM times hold whole seconds, so records made within one second keep that order,
 * which the stable sort preserves.
 */
export const oldestFirst = <T extends { createdAt: string }>(records: T[]): T[] => records.sort(byCreatedAt);

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
    .map((entry) => ({ key: entry.name.toLowerCase(), entry }))
    .sort((a, b) => compareListed(a.entry, a.key, b.entry, b.key))
    .map((item) => item.entry);
}

/** The listing order of two entries, given their names lowered. */
function compareListed(a: Listed, aKey: string, b: Listed, bKey: string): number {
  const aRank = a.type === 'directory' ? 0 : 1;
  const bRank = b.type === 'directory' ? 0 : 1;
  if (aRank !== bRank) return aRank - bRank;
  if (aKey !== bKey) return aKey < bKey ? -1 : 1;
  return a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
}
