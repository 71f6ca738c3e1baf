/** Code-unit order of two strings, which for ATOM date-times is time order. */
export const compareKeys = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

/** Oldest first: by `createdAt`, then by id, so records made in the same second keep one stable order. */
export const oldestFirst = (a: { createdAt: string; id: string }, b: { createdAt: string; id: string }): number =>
  compareKeys(a.createdAt, b.createdAt) || compareKeys(a.id, b.id);

/** Newest first: the reverse of `oldestFirst`. */
export const newestFirst = (a: { createdAt: string; id: string }, b: { createdAt: string; id: string }): number => oldestFirst(b, a);
