import { api } from './api.js';
import { details, el, replace, type errorBox } from './dom.js';
import { duration } from './format.js';

interface Bucket {
  start: string;
  succeeded: number;
  failed: number;
  errors: number;
  p50Ms: number | null;
  p95Ms: number | null;
}

interface Stats {
  window: '24h' | '7d';
  from: string;
  until: string;
  bucketSeconds: number;
  buckets: Bucket[];
  totals: Bucket;
}

const SVG = 'http://www.w3.org/2000/svg';
const WIDTH = 600;
const HEIGHT = 140;
const count = new Intl.NumberFormat();
const hourFormat = new Intl.DateTimeFormat(undefined, { hour: 'numeric', minute: '2-digit' });
const dayFormat = new Intl.DateTimeFormat(undefined, { weekday: 'short', hour: 'numeric' });

/** An SVG element with attributes: the charts are drawn as DOM, never parsed from text. */
function svg<K extends keyof SVGElementTagNameMap>(
  tag: K,
  attributes: Record<string, string | number>,
  ...children: (SVGElement | string)[]
): SVGElementTagNameMap[K] {
  const node = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, String(value));
  for (const child of children) node.append(child);
  return node;
}

const calls = (bucket: Bucket) => bucket.succeeded + bucket.failed + bucket.errors;

function label(stats: Stats, bucket: Bucket): string {
  const start = new Date(bucket.start);
  const end = new Date(start.getTime() + stats.bucketSeconds * 1000);
  const format = stats.window === '24h' ? hourFormat : dayFormat;
  return `${format.format(start)}–${format.format(end)}`;
}

/** A chart's frame: its title and description for screen readers, and the axis labels. */
function frame(id: string, title: string, description: string, stats: Stats, max: string): SVGSVGElement {
  const chart = svg('svg', {
    viewBox: `0 0 ${WIDTH} ${HEIGHT + 20}`,
    role: 'img',
    'aria-labelledby': `${id}-title ${id}-desc`,
    class: 'chart',
    id,
  });
  chart.append(
    svg('title', { id: `${id}-title` }, title),
    svg('desc', { id: `${id}-desc` }, description),
    svg('line', { x1: 0, y1: HEIGHT, x2: WIDTH, y2: HEIGHT, class: 'axis' }),
    svg('text', { x: 0, y: 10, class: 'tick' }, max),
    svg('text', { x: 0, y: HEIGHT + 16, class: 'tick' }, label(stats, stats.buckets[0]!).split('–')[0]!),
    svg('text', { x: WIDTH, y: HEIGHT + 16, class: 'tick end' }, 'now'),
  );
  return chart;
}

/** Calls by outcome, one stacked bar a bucket: succeeded at the bottom, then failed, then no answer. */
function outcomeChart(stats: Stats): SVGSVGElement {
  const most = Math.max(1, ...stats.buckets.map(calls));
  const { totals } = stats;
  const chart = frame(
    'calls-chart',
    'Calls by outcome',
    `${count.format(calls(totals))} calls: ${count.format(totals.succeeded)} succeeded, ${count.format(totals.failed)} failed, ${count.format(totals.errors)} with no answer.`,
    stats,
    `${count.format(most)} calls`,
  );
  const slot = WIDTH / stats.buckets.length;
  stats.buckets.forEach((bucket, i) => {
    let top = HEIGHT;
    const bar = svg('g', { class: 'bar', 'data-calls': calls(bucket) });
    bar.append(
      svg(
        'title',
        {},
        `${label(stats, bucket)}: ${bucket.succeeded} succeeded, ${bucket.failed} failed, ${bucket.errors} no answer`,
      ),
    );
    for (const [kind, count] of [
      ['succeeded', bucket.succeeded],
      ['failed', bucket.failed],
      ['errors', bucket.errors],
    ] as const) {
      if (count === 0) continue;
      const height = (count / most) * (HEIGHT - 14);
      top -= height;
      bar.append(svg('rect', { x: i * slot + slot * 0.1, y: top, width: slot * 0.8, height, class: `bar-${kind}` }));
    }
    chart.append(bar);
  });
  return chart;
}

/** The p50 and p95 durations, one line each; a bucket without calls breaks the line. */
function latencyChart(stats: Stats): SVGSVGElement {
  const most = Math.max(1, ...stats.buckets.map((bucket) => bucket.p95Ms ?? 0));
  const { totals } = stats;
  const chart = frame(
    'latency-chart',
    'Call durations',
    totals.p50Ms === null
      ? 'No calls in this window.'
      : `Median ${duration(totals.p50Ms)}, 95th percentile ${duration(totals.p95Ms!)}.`,
    stats,
    duration(most),
  );
  const slot = WIDTH / stats.buckets.length;
  for (const key of ['p95Ms', 'p50Ms'] as const) {
    let points: string[] = [];
    const flush = () => {
      if (points.length === 1) points.push(points[0]!.replace(/^([\d.]+)/, (x) => String(Number(x) + 2)));
      if (points.length > 0) chart.append(svg('polyline', { points: points.join(' '), class: `line-${key}` }));
      points = [];
    };
    for (const [i, bucket] of stats.buckets.entries()) {
      const value = bucket[key];
      if (value === null) flush();
      else points.push(`${(i + 0.5) * slot},${HEIGHT - (value / most) * (HEIGHT - 14)}`);
    }
    flush();
  }
  return chart;
}

/**
 * How the webhook's calls went over the last 24 hours or 7 days (`GET /webhooks/{id}/stats`): calls by
 * outcome and their p50 and p95 durations, drawn as inline SVG, with the totals as text beside them.
 */
export function callCharts(base: string, errors: ReturnType<typeof errorBox>) {
  let window: Stats['window'] = '24h';
  const body = el('div', { class: 'charts' });
  const choices = (['24h', '7d'] as const).map((value) => {
    const button = el(
      'button',
      { type: 'button', 'aria-pressed': value === window ? 'true' : 'false' },
      value === '24h' ? 'Last 24 hours' : 'Last 7 days',
    );
    button.addEventListener('click', () => {
      window = value;
      for (const [i, other] of choices.entries())
        other.setAttribute('aria-pressed', String((['24h', '7d'] as const)[i] === window));
      void refresh();
    });
    return button;
  });
  const node = el(
    'section',
    { class: 'panel', 'aria-labelledby': 'calls-heading' },
    el(
      'div',
      { class: 'section-head' },
      el('h2', { id: 'calls-heading' }, 'Calls'),
      el('div', { class: 'choices', role: 'group', 'aria-label': 'Window' }, ...choices),
    ),
    body,
  );

  /** Bumped by each read: an answer for a window no longer chosen is dropped. */
  let asked = 0;
  async function refresh() {
    const mine = ++asked;
    try {
      const stats = await api<Stats>('GET', `${base}/stats?window=${window}`);
      if (mine !== asked) return;
      const { totals } = stats;
      replace(
        body,
        details([
          ['Calls', count.format(calls(totals))],
          ['Succeeded', count.format(totals.succeeded)],
          ['Failed', count.format(totals.failed)],
          ['No answer', count.format(totals.errors)],
          ['Median duration', totals.p50Ms === null ? '—' : duration(totals.p50Ms)],
          ['95th percentile', totals.p95Ms === null ? '—' : duration(totals.p95Ms)],
        ]),
        el(
          'figure',
          {},
          outcomeChart(stats),
          el(
            'figcaption',
            { class: 'legend' },
            key('succeeded', 'Succeeded'),
            key('failed', 'Failed'),
            key('errors', 'No answer'),
          ),
        ),
        el(
          'figure',
          {},
          latencyChart(stats),
          el('figcaption', { class: 'legend' }, key('p50Ms', 'Median'), key('p95Ms', '95th percentile')),
        ),
      );
    } catch (error) {
      errors.show(error);
    }
  }
  return { node, refresh };
}

function key(kind: string, text: string): HTMLSpanElement {
  return el('span', { class: `key key-${kind}` }, text);
}
