/**
 * Builds the portal page's assets from `dist/ui-build/` (what `tsc -p ui` emits, one ES module a
 * file) and `ui/portal.css`: ONE script and ONE stylesheet, named by the hash of their content, and
 * `dist/ui/manifest.json`, which the server reads to name them in the page.
 *
 * The modules are joined, not bundled by a tool: in dependency order, inside one function scope,
 * with their `import` lines dropped and `export` keywords removed. That is sound only for modules
 * written to a few rules, which this script checks and fails the build on: relative named imports
 * without renaming, `export` only before a declaration, and no top-level name declared twice.
 */
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';

const root = path.dirname(fileURLToPath(new URL('.', import.meta.url)));
const compiled = path.join(root, 'dist/ui-build');
const out = path.join(root, 'dist/ui');
const ENTRY = 'main.js';
const IMPORT = /^import\s+(type\s+)?\{([^}]*)\}\s+from\s+['"](\.\/[\w-]+\.js)['"];?\s*$/;
const DECLARED = /^(?:export\s+)?(?:async\s+)?(?:function\*?|const|let|var|class)\s+([\w$]+)/;

function fail(message) {
  console.error(`build:ui: ${message}`);
  process.exit(1);
}

/** The modules reachable from the entry, each after the modules it imports. */
function ordered() {
  const order = [];
  const seen = new Set();
  const visit = (file, chain) => {
    if (chain.includes(file)) fail(`an import cycle: ${[...chain, file].join(' → ')}`);
    if (seen.has(file)) return;
    seen.add(file);
    const text = readFileSync(path.join(compiled, file), 'utf8');
    const body = [];
    for (const line of text.split('\n')) {
      // What tsc leaves of a module that held types only.
      if (/^export\s*\{\s*\};?\s*$/.test(line)) continue;
      if (/^\s*import\b/.test(line) || /^\s*export\s*(\{|\*|default)/.test(line)) {
        const match = IMPORT.exec(line);
        if (match === null || /\bas\b/.test(match[2])) fail(`${file}: only \`import { a, b } from './x.js'\` is joined: ${line}`);
        visit(match[3].slice(2), [...chain, file]);
        continue;
      }
      body.push(line.replace(/^export\s+/, ''));
    }
    order.push({ file, body: body.join('\n') });
  };
  visit(ENTRY, []);
  const holdsCode = (file) => !/^(\s*|export\s*\{\s*\};?)*$/.test(readFileSync(path.join(compiled, file), 'utf8'));
  const unused = readdirSync(compiled).filter((file) => file.endsWith('.js') && !seen.has(file) && holdsCode(file));
  if (unused.length > 0) fail(`modules no one imports: ${unused.join(', ')}`);
  return order;
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

const script = hashed('portal', 'js', Buffer.from(joined(ordered())));
const style = hashed('portal', 'css', readFileSync(path.join(root, 'ui/portal.css')));
rmSync(out, { recursive: true, force: true });
mkdirSync(out, { recursive: true });
for (const asset of [script, style]) writeFileSync(path.join(out, asset.file), asset.content);
writeFileSync(path.join(out, 'manifest.json'), JSON.stringify({ script: { file: script.file, integrity: script.integrity }, style: { file: style.file, integrity: style.integrity } }, null, 2) + '\n');
rmSync(compiled, { recursive: true, force: true });

const kb = (bytes) => `${(bytes / 1024).toFixed(1)} KB`;
const raw = script.content.length + style.content.length;
const gzipped = gzipSync(script.content, { level: 9 }).length + gzipSync(style.content, { level: 9 }).length;
console.log(`portal page: ${script.file} + ${style.file}: ${kb(raw)}, ${kb(gzipped)} gzipped (budget 50 KB)`);
if (gzipped > 50 * 1024) fail(`the page is ${kb(gzipped)} gzipped, over its 50 KB budget`);
