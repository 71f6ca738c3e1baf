interface Place {
  id: string;
  createdAt: string;
  /** Set when the record left; the place is skipped, and swept out in bulk later. */
  removed: boolean;
}

/** Where a walk newest first starts: just past the record `id`, made at `createdAt` (when known). */
export interface TimelinePosition {
  createdAt?: string;
  id: string;
}

/**
 * Records in creation order (by `createdAt`, and within one second in the order added), grouped by
 * a key (an account, a webhook), for stores that keep no index of their own: a page newest first
 * from a given place costs a search and the page, not a sort of everything the group holds.
 * Removal marks the place (retention removes the oldest by the hundred; a splice each would move
 * the whole array); marked places are swept when they are many.
 */
export class Timeline {
  private readonly groups = new Map<string, { places: Place[]; removed: number }>();
  private readonly placeOf = new Map<string, Place & { key: string }>();

  /** Adds the record, after every one of the group made at or before its `createdAt`; one already added keeps its place. */
  add(key: string, id: string, createdAt: string): void {
    if (this.placeOf.has(id)) return;
    let group = this.groups.get(key);
    if (group === undefined) this.groups.set(key, (group = { places: [], removed: 0 }));
    const { places } = group;
    // Almost always the newest: appended without a search.
    const at = places.length === 0 || places.at(-1)!.createdAt <= createdAt ? places.length : after(places, createdAt);
    const place = { id, createdAt, removed: false, key };
    places.splice(at, 0, place);
    this.placeOf.set(id, place);
  }

  remove(id: string): void {
    const place = this.placeOf.get(id);
    if (place === undefined) return;
    this.placeOf.delete(id);
    place.removed = true;
    const group = this.groups.get(place.key)!;
    group.removed++;
    if (group.removed * 2 > group.places.length) {
      group.places = group.places.filter((kept) => !kept.removed);
      group.removed = 0;
      if (group.places.length === 0) this.groups.delete(place.key);
    }
  }

  /** Whether `id` is one of the group's records. */
  holds(key: string, id: string): boolean {
    return this.placeOf.get(id)?.key === key;
  }

  /**
   * The group's ids, newest first, from just past `from` (from the newest without it), made before
   * `until` when given. When `from` names a record no longer held, the walk starts at the records
   * made before its `createdAt`, or yields nothing without one.
   */
  *newestFirst(key: string, from?: TimelinePosition, until?: string): Generator<string> {
    const places = this.groups.get(key)?.places ?? [];
    let end = places.length;
    if (until !== undefined) end = before(places, until);
    if (from !== undefined) {
      const held = this.placeOf.get(from.id);
      let start = from.createdAt === undefined ? 0 : before(places, from.createdAt);
      if (held !== undefined && held.key === key) {
        // Search to the end of its second, then back to it: a second holds few records.
        start = after(places, held.createdAt) - 1;
        while (places[start] !== held) start--;
      }
      end = Math.min(end, start);
    }
    for (let i = end - 1; i >= 0; i--) {
      const place = places[i]!;
      if (!place.removed) yield place.id;
    }
  }

  /** The group's ids, oldest first, made before `before`. */
  *oldestFirst(key: string, before: string): Generator<string> {
    const group = this.groups.get(key);
    if (group === undefined) return;
    // A removal inside the walk may sweep the group's array: the walk keeps the one it started on.
    const places = group.places;
    for (const place of places) {
      if (place.createdAt >= before) return;
      if (!place.removed) yield place.id;
    }
  }
}

/** The index of the first place made after `createdAt`. */
function after(places: Place[], createdAt: string): number {
  let low = 0;
  let high = places.length;
  while (low < high) {
    const middle = (low + high) >>> 1;
    if (places[middle]!.createdAt <= createdAt) low = middle + 1;
    else high = middle;
  }
  return low;
}

/** The index of the first place made at or after `createdAt`. */
function before(places: Place[], createdAt: string): number {
  let low = 0;
  let high = places.length;
  while (low < high) {
    const middle = (low + high) >>> 1;
    if (places[middle]!.createdAt < createdAt) low = middle + 1;
    else high = middle;
  }
  return low;
}
