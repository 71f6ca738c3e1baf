import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { test } from 'uvu';
import * as assert from 'uvu/assert';

/** The sources (not the build): this file runs from dist/test/unit/, three levels below the repository. */
const ROOT = fileURLToPath(new URL('../../../', import.meta.url));

function sources(dir: string): string[] {
  return readdirSync(path.join(ROOT, dir), { recursive: true, encoding: 'utf8' })
    .filter((file) => file.endsWith('.ts'))
    .map((file) => path.posix.join(dir, file.split(path.sep).join('/')));
}

/** Every relative import of `file`, as a path from the repository root without extension. */
function importsOf(file: string): string[] {
  const text = readFileSync(path.join(ROOT, file), 'utf8');
  const found: string[] = [];
  for (const match of text.matchAll(/(?:from\s+|import\s*\(\s*)['"](\.{1,2}\/[^'"]+)['"]/g)) {
    found.push(path.posix.normalize(path.posix.join(path.posix.dirname(file), match[1]!)).replace(/\.js$/, ''));
  }
  return found;
}

const files = [...sources('src'), ...sources('adapters')];
const edges = files.flatMap((file) => importsOf(file).map((target) => ({ from: file, to: target })));
const under = (file: string, ...folders: string[]) =>
  folders.some((folder) => file === folder || file.startsWith(folder + '/'));
const broken = (rule: (edge: { from: string; to: string }) => boolean) =>
  edges.filter(rule).map((edge) => `${edge.from} → ${edge.to}`);

test('the layout: the rooms of src/ exist, and only the six shared files sit at its root', () => {
  const root = readdirSync(path.join(ROOT, 'src')).sort();
  assert.equal(root, [
    'domain',
    'errors.ts',
    'http',
    'index.ts',
    'openapi',
    'options.ts',
    'portal.ts',
    'ports.ts',
    'records.ts',
    'rules',
    'shapes',
    'shared',
    'webhooks',
  ]);
  assert.ok(edges.length > 100, `${edges.length} imports read`);
});

test('no arrow from the domain, the rules, the webhook engine or the shared helpers into http/ or openapi/', () => {
  assert.equal(
    broken(
      ({ from, to }) =>
        under(from, 'src/domain', 'src/rules', 'src/webhooks', 'src/shared') && under(to, 'src/http', 'src/openapi'),
    ),
    [],
  );
});

test('the domain does not reach into the webhook engine; the HTTP layer does not reach into the OpenAPI document', () => {
  assert.equal(
    broken(({ from, to }) => under(from, 'src/domain') && under(to, 'src/webhooks')),
    [],
  );
  assert.equal(
    broken(({ from, to }) => under(from, 'src/http') && under(to, 'src/openapi')),
    [],
  );
});

test('the shared helpers, the shapes, ports, records and errors import no room of src/', () => {
  const leaves = ['src/shared', 'src/shapes', 'src/ports.ts', 'src/records.ts', 'src/errors.ts'];
  const rooms = [
    'src/http',
    'src/domain',
    'src/rules',
    'src/webhooks',
    'src/openapi',
    'src/portal',
    'src/options',
    'src/index',
  ];
  assert.equal(
    broken(({ from, to }) => under(from, ...leaves) && under(to, ...rooms)),
    [],
  );
});

test('the shapes import only each other and the shared helpers: the records derive their types from them', () => {
  assert.ok(sources('src/shapes').length >= 2, 'the shapes are read');
  assert.equal(
    broken(({ from, to }) => under(from, 'src/shapes') && !under(to, 'src/shapes', 'src/shared')),
    [],
  );
});

test('adapters import only the ports, the records, the errors, the pure rules and the shared helpers of src/', () => {
  // rules/ is the part of the domain the adapters share: pure transitions and counts, no I/O.
  const allowed = ['src/ports', 'src/records', 'src/errors', 'src/shared', 'src/rules'];
  assert.equal(
    broken(({ from, to }) => under(from, 'adapters') && under(to, 'src') && !under(to, ...allowed)),
    [],
  );
});

test('the pure rules import only each other, the shared helpers, the shapes, the ports, the records and the errors', () => {
  const allowed = ['src/rules', 'src/shared', 'src/shapes', 'src/ports', 'src/records', 'src/errors'];
  assert.ok(sources('src/rules').length >= 5, 'the rules are read');
  assert.equal(
    broken(({ from, to }) => under(from, 'src/rules') && !under(to, ...allowed)),
    [],
  );
});

test('the core reaches into an adapter in one place only: portal.ts, for the defaults', () => {
  assert.equal(
    broken(({ from, to }) => under(from, 'src') && from !== 'src/portal.ts' && under(to, 'adapters')),
    [],
  );
});

test('the portal page (ui/) stands apart: it imports only its own modules and nothing of npm, and no server code imports it', () => {
  const page = sources('ui/src');
  assert.ok(page.length > 3, `${page.length} page modules read`);
  const outside = page.flatMap((file) =>
    importsOf(file)
      .filter((target) => !under(target, 'ui/src'))
      .map((target) => `${file} → ${target}`),
  );
  assert.equal(outside, []);
  // A bare specifier would be a front-end dependency (or node: in the browser): the page has none.
  const bare = page.filter((file) =>
    /(?:from\s+|import\s*\(\s*)['"][^.'"][^'"]*['"]/.test(readFileSync(path.join(ROOT, file), 'utf8')),
  );
  assert.equal(bare, []);
  assert.equal(
    broken(({ to }) => under(to, 'ui')),
    [],
  );
});

test.run();
