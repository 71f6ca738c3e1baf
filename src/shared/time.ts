/**
 * A date-time in the API's ATOM form: UTC, second precision, `+00:00` offset
 * (`2026-11-21T09:05:07+00:00`). Strings of this form sort in time order.
 */
export function atom(date: Date): string {
  return date.toISOString().slice(0, 19) + '+00:00';
}

/** `date` plus `seconds`, as ATOM; fractions of a second are truncated. */
export function atomAfter(date: Date, seconds: number): string {
  return atom(new Date(date.getTime() + seconds * 1000));
}
