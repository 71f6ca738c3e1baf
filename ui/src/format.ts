/** Dates in the viewer's locale and time zone; the machine-readable instant stays in `datetime`. */
const dateTime = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'medium' });

export function time(atom: string | null): HTMLTimeElement | string {
  if (atom === null) return '—';
  const date = new Date(atom);
  if (Number.isNaN(date.getTime())) return atom;
  const node = document.createElement('time');
  node.dateTime = atom;
  node.textContent = dateTime.format(date);
  return node;
}

const units = ['bytes', 'KB', 'MB', 'GB'];
const number = new Intl.NumberFormat(undefined, { maximumFractionDigits: 1 });

/** `1536` → `1.5 KB` (1 KB = 1,024 bytes), in the viewer's number format. */
export function size(bytes: number): string {
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return unit === 0 && value === 1 ? '1 byte' : `${number.format(value)} ${units[unit]}`;
}

export function duration(ms: number): string {
  return ms < 1000 ? `${Math.round(ms)} ms` : `${number.format(ms / 1000)} s`;
}
