/** A grouped bar chart (SVG) of requests per second, one group per scenario, one bar per contender. */
const COLORS: Record<string, string> = { portal: '#2563eb', bare: '#6b7280', fastify: '#059669', express: '#d97706' };

const escape = (text: string) => text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

export function renderChart(figures: Record<string, Record<string, number>>): string {
  const scenarios = Object.keys(figures);
  const contenders = [...new Set(scenarios.flatMap((name) => Object.keys(figures[name]!)))];
  const max = Math.max(...scenarios.flatMap((name) => Object.values(figures[name]!)));
  const bar = 26;
  const gap = 34;
  const groupWidth = contenders.length * bar + gap;
  const left = 70;
  const top = 40;
  const height = 260;
  const width = left + scenarios.length * groupWidth + 20;
  const parts: string[] = [];
  parts.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${top + height + 70}" font-family="sans-serif" font-size="11">`);
  parts.push(`<text x="${left}" y="20" font-size="13" font-weight="bold">Requests per second (median round; higher is better)</text>`);
  for (let i = 0; i <= 4; i++) {
    const value = (max * i) / 4;
    const y = top + height - (height * i) / 4;
    parts.push(`<line x1="${left}" x2="${width - 10}" y1="${y}" y2="${y}" stroke="#e5e7eb"/>`);
    parts.push(`<text x="${left - 6}" y="${y + 4}" text-anchor="end">${Math.round(value).toLocaleString('en')}</text>`);
  }
  scenarios.forEach((scenario, s) => {
    const x0 = left + 10 + s * groupWidth;
    contenders.forEach((name, c) => {
      const value = figures[scenario]![name];
      if (value === undefined) return;
      const h = (height * value) / max;
      parts.push(`<rect x="${x0 + c * bar}" y="${top + height - h}" width="${bar - 4}" height="${h}" fill="${COLORS[name] ?? '#999'}"><title>${escape(name)}: ${Math.round(value)} req/s</title></rect>`);
    });
    parts.push(`<text x="${x0 + (contenders.length * bar) / 2}" y="${top + height + 16}" text-anchor="middle">${escape(scenario)}</text>`);
  });
  contenders.forEach((name, c) => {
    const x = left + c * 90;
    parts.push(`<rect x="${x}" y="${top + height + 36}" width="12" height="12" fill="${COLORS[name] ?? '#999'}"/>`);
    parts.push(`<text x="${x + 16}" y="${top + height + 46}">${escape(name)}</text>`);
  });
  parts.push('</svg>');
  return parts.join('\n') + '\n';
}
