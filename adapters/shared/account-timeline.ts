interface Place {
  id: string;
  createdAt: string;
}

/**
 * Each account's records in creation order (by `createdAt`, and within one second in the order
 * added), for stores that keep no index of their own: a page newest first, from just after a
 * given record, costs a search and the page, not a sort of everything the account holds.
 */
export class AccountTimeline {
  private readonly byAccount = new Map<string, Place[]>();
  private readonly placeOf = new Map<string, Place & { accountId: string }>();

  /** Adds the record, after every one of the account made at or before its `createdAt`; one already added keeps its place. */
  add(accountId: string, id: string, createdAt: string): void {
    if (this.placeOf.has(id)) return;
    let places = this.byAccount.get(accountId);
    if (places === undefined) this.byAccount.set(accountId, (places = []));
    // Almost always the newest: appended without a search.
    const at = places.length === 0 || places.at(-1)!.createdAt <= createdAt ? places.length : this.after(places, createdAt);
    places.splice(at, 0, { id, createdAt });
    this.placeOf.set(id, { id, createdAt, accountId });
  }

  remove(id: string): void {
    const place = this.placeOf.get(id);
    if (place === undefined) return;
    const places = this.byAccount.get(place.accountId)!;
    places.splice(places.findIndex((candidate) => candidate.id === id), 1);
    if (places.length === 0) this.byAccount.delete(place.accountId);
    this.placeOf.delete(id);
  }

  /**
   * Up to `limit` ids of the account, newest first, starting after the record `after` (from the
   * newest without it); `null` when `after` is not one of the account's records.
   */
  newestFirst(accountId: string, limit: number, after?: string): string[] | null {
    const places = this.byAccount.get(accountId) ?? [];
    let end = places.length;
    if (after !== undefined) {
      const place = this.placeOf.get(after);
      if (place === undefined || place.accountId !== accountId) return null;
      // Search to the end of its second, then back to it: a second holds few records.
      end = this.after(places, place.createdAt) - 1;
      while (places[end]!.id !== after) end--;
    }
    const ids: string[] = [];
    for (let i = end - 1; i >= 0 && ids.length < limit; i--) ids.push(places[i]!.id);
    return ids;
  }

  /** The index of the first place made after `createdAt`. */
  private after(places: Place[], createdAt: string): number {
    let low = 0;
    let high = places.length;
    while (low < high) {
      const middle = (low + high) >>> 1;
      if (places[middle]!.createdAt <= createdAt) low = middle + 1;
      else high = middle;
    }
    return low;
  }
}
