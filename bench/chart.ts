/**
 * The chart of `docs/performance.md` (SVG): the portal's requests/s as a ratio to each baseline's,
 * one bar per comparison, with its target marked. Ratios, not requests/s: absolute figures on a
 * shared host move with its other tenants, a ratio within one run far less.
 */
import type { Row } from './run.js';

const COLORS: Record<string, string> = {
  bare: '#6b7280',
  fastify: '#059669',
  express: '#d97706',
  'Fastify + pg': '#059669',
};

const escapeXml = (text: string) => text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

/** The target's ratio of a row (`≥ 0.9×` → 0.9), or undefined for a reported row. */
const targetOf = (row: Row) => {
  const match = /^≥ ([\d.]+)×$/.exec(row.target);
  return match ? Number(match[1]) : undefined;
};

/** Rows shown: every requests/s comparison of the portal with a peer (HTTP scenarios and the PostgreSQL path). */
const charted = (rows: Row[]) =>
  rows.filter((row) => row.unit === 'req/s' && row.baselineName !== 'memory' && !row.scenario.includes('server CPU'));

export function renderChart(rows: Row[]): string {
  const shown = charted(rows);
  const barHeight = 16;
  const gap = 5;
  const left = 360;
  const plotWidth = 420;
  const top = 44;
  // The axis stops at 2×: Express's ratios (4–8×) would squeeze every other bar; longer bars are cut
  // there and carry their figure.
  const maxRatio = 2;
  const x = (ratio: number) => left + (plotWidth * Math.min(ratio, maxRatio)) / maxRatio;
  const height = top + shown.length * (barHeight + gap) + 40;
  const width = left + plotWidth + 90;
  const parts: string[] = [];
  parts.push(
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" font-family="sans-serif" font-size="11">`,
  );
  parts.push(
    `<text x="10" y="18" font-size="13" font-weight="bold">The portal's requests/s over each peer's (median of interleaved rounds; higher is better)</text>`,
  );
  parts.push(
    `<text x="10" y="34" fill="#555">black tick: the target; rows without a target (pipelined) are reported only</text>`,
  );
  for (let tick = 0; tick <= maxRatio + 1e-9; tick += 0.25) {
    const tx = x(tick);
    const strong = Math.abs(tick - 1) < 1e-9;
    parts.push(
      `<line x1="${tx}" x2="${tx}" y1="${top - 4}" y2="${height - 30}" stroke="${strong ? '#9ca3af' : '#e5e7eb'}"/>`,
    );
    if (Math.abs(tick * 2 - Math.round(tick * 2)) < 1e-9)
      parts.push(`<text x="${tx}" y="${height - 16}" text-anchor="middle">${tick.toFixed(1)}×</text>`);
  }
  shown.forEach((row, i) => {
    const y = top + i * (barHeight + gap);
    const target = targetOf(row);
    const color = COLORS[row.baselineName] ?? '#2563eb';
    const label = `${row.scenario} vs ${row.baselineName}`;
    parts.push(`<text x="${left - 6}" y="${y + barHeight - 4}" text-anchor="end">${escapeXml(label)}</text>`);
    const opacity = target === undefined ? ' fill-opacity="0.45"' : '';
    parts.push(
      `<rect x="${left}" y="${y}" width="${x(row.ratio) - left}" height="${barHeight}" fill="${color}"${opacity}><title>${escapeXml(label)}: ${row.ratio.toFixed(2)}×</title></rect>`,
    );
    parts.push(
      `<text x="${x(row.ratio) + 4}" y="${y + barHeight - 4}">${row.ratio.toFixed(2)}×${target !== undefined && !row.holds ? ' (missed)' : ''}</text>`,
    );
    if (target !== undefined)
      parts.push(
        `<line x1="${x(target)}" x2="${x(target)}" y1="${y - 1}" y2="${y + barHeight + 1}" stroke="#111" stroke-width="2"/>`,
      );
  });
  parts.push('</svg>');
  return parts.join('\n') + '\n';
}
