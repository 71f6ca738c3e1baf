/** One row of the bench's table: a figure, its baseline from the same run, and the target on their ratio. */
export interface Row {
  scenario: string;
  figure: number;
  unit: string;
  baselineName: string;
  baseline: number;
  /** figure / baseline, or baseline / figure where lower is better; `target` applies to it. */
  ratio: number;
  target: string;
  holds: boolean;
}

/** The target of a row that only reports its figure. */
export const REPORTED = 'none (reported)';

/** Prints a row as the `BENCH {json}` line `run.js` collects from each `*.bench.js`. */
export const emit = (row: Row): void => console.log(`BENCH ${JSON.stringify(row)}`);
