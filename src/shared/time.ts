/**
 * A date-time in the API's ATOM form: UTC, second precision, `+00:00` offset
 * (`2026-11-21T09:05:07+00:00`). Strings of this form sort in time order.
 */
export function atom(date: Date): string {
  return date.toISOString().slice(0, 19) + '+00:00';
}

/**
 * `date` plus `ms`, as ATOM, rounded up to the whole second: what it names never comes before the
 * time asked (a grace, a retry, a hold), whatever ATOM's second precision drops.
 */
export function atomAtLeast(date: Date, ms: number): string {
  return atom(new Date(Math.ceil((date.getTime() + ms) / 1000) * 1000));
}

/** `date` plus `seconds`, as ATOM; fractions of a second are truncated. */
export function atomAfter(date: Date, seconds: number): string {
  return atom(new Date(date.getTime() + seconds * 1000));
}

/** The earliest and latest instants a stored date may be: years 0001 to 9999 in UTC, what every store can hold. */
const EARLIEST = new Date('0001-01-01T00:00:00Z').getTime();
const LATEST = new Date('9999-12-31T23:59:59Z').getTime();

/** Whether `date` is a valid instant from year 0001 to 9999 (UTC). */
export const inDateRange = (date: Date) =>
  !Number.isNaN(date.getTime()) && date.getTime() >= EARLIEST && date.getTime() <= LATEST;

const RFC3339_PARTS = /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.\d+)?(?:[Zz]|[+-](\d{2}):(\d{2}))$/;

/**
 * Whether `text` is an RFC 3339 date-time that names a real instant: every field within its range
 * (February 30 or hour 24 is refused, where `Date.parse` would move it on), and the instant within
 * years 0001 to 9999 in UTC.
 */
export function isRealDateTime(text: string): boolean {
  const parts = RFC3339_PARTS.exec(text);
  if (parts === null) return false;
  const [year, month, day, hour, minute, second] = parts.slice(1, 7).map(Number) as [
    number,
    number,
    number,
    number,
    number,
    number,
  ];
  if (month < 1 || month > 12 || day < 1 || day > daysIn(year, month) || hour > 23 || minute > 59 || second > 59)
    return false;
  if (parts[7] !== undefined && (Number(parts[7]) > 23 || Number(parts[8]) > 59)) return false;
  return inDateRange(new Date(text));
}

const DAYS_IN_MONTH = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
const isLeapYear = (year: number) => (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0;
const daysIn = (year: number, month: number) => (month === 2 && isLeapYear(year) ? 29 : DAYS_IN_MONTH[month - 1]!);
