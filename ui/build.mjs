/**
 * Builds the portal page's assets from `dist/ui-build/` (what `tsc -p ui` emits, one ES module a
 * file) and `ui/portal.css`: ONE script and ONE stylesheet, named by the hash of their content, and
 * `dist/ui/manifest.json`, which the server reads to name them in the page.
 *
 * The modules are joined, not bundled by a tool: in dependency order, inside one function scope,
 * with their `import` lines dropped and `export` keywords removed. That is sound only for modules
 * written to a few rules, which this script checks and fails the build on: relative named imports
 * without renaming, `export` only before a declaration, and no top-level name declared twice.
 *
 * The signing page also gets pdf.js (`pdfjs-dist`, its legacy build for the widest reach of
 * browsers), copied as it is published: its module and its worker, which the page loads only to show
 * a document's pages. Every asset is written gzipped beside itself (`<file>.gz`), so the server
 * compresses nothing when it starts.
 */
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';

const root = path.dirname(fileURLToPath(new URL('.', import.meta.url)));
const PDFJS = path.join(root, 'node_modules/pdfjs-dist/legacy/build');
// `node ui/build.mjs [compiled out]`: by default from and into `dist/`; `npm start` builds elsewhere.
const compiled = path.resolve(root, process.argv[2] ?? 'dist/ui-build');
const out = path.resolve(root, process.argv[3] ?? 'dist/ui');
/** Each page's entry module: the portal page, and the signing page a signer's link opens. */
const ENTRIES = { portal: 'main.js', signing: 'sign.js' };
const IMPORT = /^import\s+(type\s+)?\{([^}]*)\}\s+from\s+['"](\.\/[\w-]+\.js)['"];?\s*$/;
const DECLARED = /^(?:export\s+)?(?:async\s+)?(?:function\*?|const|let|var|class)\s+([\w$]+)/;

function fail(message) {
  console.error(`build:ui: ${message}`);
  process.exit(1);
}

/** Every module some entry reaches: one no entry reaches fails the build. */
const reached = new Set();

/** The modules reachable from `entry`, each after the modules it imports. */
function ordered(entry) {
  const order = [];
  const seen = new Set();
  const visit = (file, chain) => {
    if (chain.includes(file)) fail(`an import cycle: ${[...chain, file].join(' → ')}`);
    if (seen.has(file)) return;
    seen.add(file);
    reached.add(file);
    const text = readFileSync(path.join(compiled, file), 'utf8');
    const body = [];
    for (const line of text.split('\n')) {
      // What tsc leaves of a module that held types only.
      if (/^export\s*\{\s*\};?\s*$/.test(line)) continue;
      if (/^\s*import\b/.test(line) || /^\s*export\s*(\{|\*|default)/.test(line)) {
        const match = IMPORT.exec(line);
        if (match === null || /\bas\b/.test(match[2]))
          fail(`${file}: only \`import { a, b } from './x.js'\` is joined: ${line}`);
        visit(match[3].slice(2), [...chain, file]);
        continue;
      }
      body.push(line.replace(/^export\s+/, ''));
    }
    order.push({ file, body: body.join('\n') });
  };
  visit(entry, []);
  return order;
}

function checkAllReached() {
  const holdsCode = (file) => !/^(\s*|export\s*\{\s*\};?)*$/.test(readFileSync(path.join(compiled, file), 'utf8'));
  const unused = readdirSync(compiled).filter((file) => file.endsWith('.js') && !reached.has(file) && holdsCode(file));
  if (unused.length > 0) fail(`modules no one imports: ${unused.join(', ')}`);
}

function joined(modules) {
  const owner = new Map();
  for (const { file, body } of modules) {
    for (const line of body.split('\n')) {
      const name = DECLARED.exec(line)?.[1];
      if (name === undefined) continue;
      if (owner.has(name)) fail(`\`${name}\` is declared at the top of both ${owner.get(name)} and ${file}`);
      owner.set(name, file);
    }
  }
  const parts = modules.map(({ file, body }) => `// ${file}\n${body.trim()}\n`);
  return `(() => {\n'use strict';\n${parts.join('\n')}})();\n`;
}

/** The asset under a name that changes with its content, and its Subresource Integrity value. */
function hashed(name, ext, content) {
  const hash = createHash('sha256').update(content).digest('base64url').slice(0, 16);
  const integrity = 'sha384-' + createHash('sha384').update(content).digest('base64');
  return { file: `${name}.${hash}.${ext}`, integrity, content };
}

const script = hashed('portal', 'js', Buffer.from(joined(ordered(ENTRIES.portal))));
const signing = hashed('signing', 'js', Buffer.from(joined(ordered(ENTRIES.signing))));
checkAllReached();
const style = hashed('portal', 'css', readFileSync(path.join(root, 'ui/portal.css')));
const pdfjs = (file) => {
  try {
    return readFileSync(path.join(PDFJS, file));
  } catch (error) {
    fail(`pdf.js is not installed (${error.message}); run \`npm ci\``);
  }
};
const pdf = hashed('pdf', 'mjs', pdfjs('pdf.min.mjs'));
const pdfWorker = hashed('pdf-worker', 'mjs', pdfjs('pdf.worker.min.mjs'));
rmSync(out, { recursive: true, force: true });
mkdirSync(out, { recursive: true });
for (const asset of [script, signing, style, pdf, pdfWorker]) {
  writeFileSync(path.join(out, asset.file), asset.content);
  writeFileSync(path.join(out, `${asset.file}.gz`), gzipSync(asset.content, { level: 9 }));
}
const named = (asset) => ({ file: asset.file, integrity: asset.integrity });
writeFileSync(
  path.join(out, 'manifest.json'),
  JSON.stringify(
    {
      script: named(script),
      signing: named(signing),
      style: named(style),
      pdf: named(pdf),
      pdfWorker: named(pdfWorker),
    },
    null,
    2,
  ) + '\n',
);
rmSync(compiled, { recursive: true, force: true });

const kb = (bytes) => `${(bytes / 1024).toFixed(1)} KB`;
for (const [label, code] of [
  ['portal page', script],
  ['signing page', signing],
]) {
  const raw = code.content.length + style.content.length;
  const gzipped = gzipSync(code.content, { level: 9 }).length + gzipSync(style.content, { level: 9 }).length;
  console.log(`${label}: ${code.file} + ${style.file}: ${kb(raw)}, ${kb(gzipped)} gzipped (budget 50 KB)`);
  if (gzipped > 50 * 1024) fail(`the ${label} is ${kb(gzipped)} gzipped, over its 50 KB budget`);
}
