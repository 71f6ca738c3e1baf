/**
 * Part of `npm run lint`: every ```ts block of the README and docs/ is type-checked against the
 * package's sources, as a module of its own. The names a snippet takes from the text around it
 * (`portal`, `app`, `accountId`…) are declared once in `scripts/doc-snippets.d.ts`; a snippet that
 * declares one itself shadows it. A snippet whose first line names a file of the repository
 * (`// test/adapters/mine.test.ts`) has its relative imports read from there; one that names a
 * file the example only imagines (`../../adapters/mine/index.js`) takes those names from the
 * declarations too.
 */
import { existsSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const out = path.join(root, 'dist/doc-snippets');
rmSync(out, { recursive: true, force: true });
mkdirSync(out, { recursive: true });

const sources = [
  'README.md',
  ...readdirSync(path.join(root, 'docs'))
    .filter((file) => file.endsWith('.md'))
    .map((file) => `docs/${file}`),
];
let count = 0;
for (const source of sources) {
  const text = readFileSync(path.join(root, source), 'utf8');
  const blocks = [...text.matchAll(/^```ts\n([\s\S]*?)^```$/gm)];
  blocks.forEach((block, i) => {
    const line = text.slice(0, block.index).split('\n').length + 1;
    const name = `${source.replace(/[/.]/g, '_')}_${i + 1}.ts`;
    let code = block[1];
    const home = /^\/\/ ((?:test|src|adapters|examples)\/[\w./-]+\.ts)\n/.exec(code)?.[1];
    if (home !== undefined) {
      code = code.replace(/^import (.+) from '(\.{1,2}\/[^']+)';$/gm, (whole, names, specifier) => {
        const target = path.resolve(root, path.dirname(home), specifier).replace(/\.js$/, '.ts');
        return existsSync(target)
          ? `import ${names} from '${target.replace(/\.ts$/, '.js')}';`
          : `// ${whole} (imagined: its names are declared)`;
      });
    }
    writeFileSync(path.join(out, name), `// ${source}:${line}\n${code}\nexport {};\n`);
    count++;
  });
}
writeFileSync(
  path.join(out, 'tsconfig.json'),
  JSON.stringify(
    {
      extends: '../../tsconfig.json',
      compilerOptions: {
        noEmit: true,
        noUnusedLocals: false,
        rootDir: '../..',
        paths: {
          'customer-portal': ['../../src/index.ts'],
          'customer-portal/adapters/*': ['../../adapters/*/index.ts'],
        },
      },
      include: ['./*.ts', '../../scripts/doc-snippets.d.ts'],
      exclude: [],
    },
    null,
    2,
  ),
);
try {
  execFileSync(
    process.execPath,
    [path.join(root, 'node_modules/typescript/bin/tsc'), '-p', path.join(out, 'tsconfig.json')],
    { stdio: 'inherit' },
  );
} catch {
  console.error(`doc snippets: the errors above are in dist/doc-snippets/, each file naming its source and line`);
  process.exit(1);
}
console.log(`doc snippets: ${count} TypeScript blocks of the README and docs/ type-check`);
