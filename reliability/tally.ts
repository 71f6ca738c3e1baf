/**
 * The suite's bookkeeping: one row per category, each request or fault counted once as answered
 * correctly, 5xx, hung, lost (data acknowledged and then missing) or wrong (any other answer that
 * breaks the contract: a 2xx where a refusal was due, a body that is not `{message}`, a leak).
 */
export type Outcome = 'correct' | '5xx' | 'hung' | 'lost' | 'wrong';

export interface Row {
  section: string;
  category: string;
  tried: number;
  correct: number;
  fiveXx: number;
  hung: number;
  lost: number;
  wrong: number;
  /** What went wrong, first few of each kind, for the report under the table. */
  failures: string[];
  /** A line of context printed under the table (seed, figures, reasons for a skip). */
  notes: string[];
  skipped?: string;
}

const rows: Row[] = [];

export function row(section: string, category: string): Row {
  const made: Row = {
    section,
    category,
    tried: 0,
    correct: 0,
    fiveXx: 0,
    hung: 0,
    lost: 0,
    wrong: 0,
    failures: [],
    notes: [],
  };
  rows.push(made);
  return made;
}

export function count(target: Row, outcome: Outcome, detail?: string): void {
  target.tried++;
  if (outcome === 'correct') target.correct++;
  else if (outcome === '5xx') target.fiveXx++;
  else if (outcome === 'hung') target.hung++;
  else if (outcome === 'lost') target.lost++;
  else target.wrong++;
  if (outcome !== 'correct' && target.failures.length < 8)
    target.failures.push(`${outcome}: ${detail ?? ''}`.slice(0, 400));
}

/** Counts `ok` as correct, otherwise as `outcome` with `detail`. */
export function check(target: Row, ok: boolean, detail: string, outcome: Outcome = 'wrong'): boolean {
  count(target, ok ? 'correct' : outcome, detail);
  return ok;
}

export function allRows(): readonly Row[] {
  return rows;
}

export function failed(): boolean {
  return rows.some((r) => r.fiveXx + r.hung + r.lost + r.wrong > 0);
}

/** The summary table, Markdown-shaped so that it reads the same in a terminal and in the README. */
export function table(): string {
  const head = ['category', 'tried', 'correct', '5xx', 'hung', 'lost', 'wrong'];
  const body = rows.map((r) =>
    r.skipped !== undefined
      ? [`${r.section}: ${r.category}`, 'skipped', '', '', '', '', '']
      : [`${r.section}: ${r.category}`, r.tried, r.correct, r.fiveXx, r.hung, r.lost, r.wrong].map(String),
  );
  const widths = head.map((h, i) => Math.max(h.length, ...body.map((line) => String(line[i]).length)));
  const line = (cells: string[]) =>
    '| ' + cells.map((cell, i) => (i === 0 ? cell.padEnd(widths[i]!) : cell.padStart(widths[i]!))).join(' | ') + ' |';
  const rule = '|' + widths.map((w, i) => (i === 0 ? '-'.repeat(w + 2) : '-'.repeat(w + 1) + ':')).join('|') + '|';
  const total = rows.reduce(
    (sum, r) => sum.map((value, i) => value + [r.tried, r.correct, r.fiveXx, r.hung, r.lost, r.wrong][i]!),
    [0, 0, 0, 0, 0, 0],
  );
  return [
    line(head),
    rule,
    ...body.map((cells) => line(cells as string[])),
    line(['total', ...total.map(String)]),
  ].join('\n');
}

export function details(): string {
  const out: string[] = [];
  for (const r of rows) {
    if (r.skipped !== undefined) out.push(`${r.section}: ${r.category}: skipped: ${r.skipped}`);
    for (const note of r.notes) out.push(`${r.section}: ${r.category}: ${note}`);
    for (const failure of r.failures) out.push(`${r.section}: ${r.category}: FAILED ${failure}`);
  }
  return out.join('\n');
}

/** Resolves `run()`, or `'hung'` once `ms` have passed without an answer. */
export async function within<T>(ms: number, run: () => Promise<T>): Promise<T | 'hung'> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<'hung'>((resolve) => (timer = setTimeout(() => resolve('hung'), ms)));
  try {
    return await Promise.race([run(), timeout]);
  } finally {
    clearTimeout(timer);
  }
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
