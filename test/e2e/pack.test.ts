import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { test } from 'uvu';
import * as assert from 'uvu/assert';

const run = promisify(execFile);
const root = path.resolve(fileURLToPath(import.meta.url), '../../../..');
const pkg = JSON.parse(await readFile(path.join(root, 'package.json'), 'utf8'));
/** The module export paths; `./openapi.json` is data, checked on its own. */
const exportPaths = Object.keys(pkg.exports).filter((key) => !key.endsWith('.json'));

let work = '';
let tarball = '';

test.before(async () => {
  work = await mkdtemp(path.join(tmpdir(), 'customer-portal-pack-'));
  // --ignore-scripts: pack the dist/ this test run built, without rebuilding it under the other suites.
  const { stdout } = await run('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', work], {
    cwd: root,
  });
  const [packed] = JSON.parse(stdout);
  tarball = path.join(work, packed.filename);
  const consumer = path.join(work, 'app');
  await run('mkdir', ['-p', consumer]);
  await writeFile(path.join(consumer, 'package.json'), JSON.stringify({ name: 'app', private: true, type: 'module' }));
  await run('npm', ['install', '--no-audit', '--no-fund', '--prefer-offline', tarball], {
    cwd: consumer,
    timeout: 180_000,
  });
});

test.after(async () => {
  if (work !== '') await rm(work, { recursive: true, force: true });
});

test('the tarball holds the built library and its declarations, not the tests or sources', async () => {
  const { stdout } = await run('tar', ['-tzf', tarball]);
  const files = stdout.split('\n').filter(Boolean);
  assert.ok(files.includes('package/dist/src/index.js'));
  assert.ok(files.includes('package/dist/src/index.d.ts'));
  assert.ok(files.includes('package/dist/openapi.json'), 'the OpenAPI document');
  // The portal and signing pages, as the build made them: the manifest, three assets of their own
  // and pdf.js's two, each beside its gzipped copy; nothing else.
  const page = files.filter((file) => file.startsWith('package/dist/ui/'));
  assert.is(page.length, 11, page.join(', '));
  for (const asset of page.filter((file) => !file.endsWith('.gz') && !file.endsWith('manifest.json')))
    assert.ok(page.includes(`${asset}.gz`), `${asset} gzipped beside it`);
  assert.ok(
    page.some((file) => /^package\/dist\/ui\/pdf\.[\w-]{16}\.mjs$/.test(file)),
    "pdf.js's module",
  );
  assert.ok(
    page.some((file) => /^package\/dist\/ui\/pdf-worker\.[\w-]{16}\.mjs$/.test(file)),
    "pdf.js's worker",
  );
  assert.ok(
    page.some((file) => /^package\/dist\/ui\/signing\.[\w-]{16}\.js$/.test(file)),
    'the signing page script',
  );
  assert.ok(page.includes('package/dist/ui/manifest.json'));
  assert.ok(
    page.some((file) => /^package\/dist\/ui\/portal\.[\w-]{16}\.js$/.test(file)),
    'the page script',
  );
  assert.ok(
    page.some((file) => /^package\/dist\/ui\/portal\.[\w-]{16}\.css$/.test(file)),
    'the page stylesheet',
  );
  assert.ok(files.includes('package/LICENSE'));
  assert.ok(files.includes('package/README.md'));
  assert.not.ok(
    files.some((file) => file.startsWith('package/dist/test/') || file.startsWith('package/test/')),
    'no tests',
  );
  assert.not.ok(
    files.some((file) => file.startsWith('package/src/')),
    'no TypeScript sources',
  );
  assert.not.ok(
    files.some((file) => /^package\/(dist\/)?(bench|reliability)\//.test(file)),
    'no bench or reliability tooling',
  );
  // The sources are not shipped, so neither are maps that point at them; the published build has none.
  assert.not.ok(
    files.some((file) => file.endsWith('.map')),
    'no source maps',
  );
  assert.match(pkg.scripts.prepack, /--sourceMap false/, 'the build before packing writes no maps');
});

test('the published manifest has no install-time build: npm would warn about (or run) a prepare script', async () => {
  const { stdout } = await run('tar', ['-xzOf', tarball, 'package/package.json']);
  const published = JSON.parse(stdout);
  assert.is(published.scripts?.prepare, undefined);
  assert.is(published.scripts?.install, undefined);
  assert.is(published.scripts?.postinstall, undefined);
});

test('an installed tarball serves requests: createPortal and every adapter path import', async () => {
  const consumer = path.join(work, 'app');
  const imports = exportPaths.map((key, i) => `import * as m${i} from 'customer-portal${key.slice(1)}';`).join('\n');
  await writeFile(
    path.join(consumer, 'smoke.mjs'),
    `${imports}
import http from 'node:http';
import { createRequire } from 'node:module';
import { createPortal, openapi } from 'customer-portal';
import { memoryStorage } from 'customer-portal/adapters/memory';
const loaded = [${exportPaths.map((_, i) => `Object.keys(m${i}).length`).join(', ')}];
const portal = await createPortal({ storage: memoryStorage(), auth: { apiKeys: ['pack-key-0123456789'] } });
const hook = await portal.webhooks.create('default', { type: 'customer-created', url: 'https://r.example/' });
const server = http.createServer(portal.handler).listen(0, '127.0.0.1');
await new Promise((resolve) => server.once('listening', resolve));
const res = await fetch('http://127.0.0.1:' + server.address().port + '/v1/webhooks/' + hook.id, { headers: { authorization: 'Bearer pack-key-0123456789' } });
const document = createRequire(import.meta.url)('customer-portal/openapi.json');
console.log(JSON.stringify({ loaded, status: res.status, id: (await res.json()).id === hook.id, openapi: JSON.stringify(document) === JSON.stringify(openapi) && document.openapi }));
server.close();
await portal.close();
`,
  );
  const { stdout } = await run('node', ['smoke.mjs'], { cwd: consumer });
  const result = JSON.parse(stdout.trim());
  assert.is(result.status, 200);
  assert.ok(result.id);
  assert.is(result.openapi, '3.1.0', 'customer-portal/openapi.json is the exported openapi document');
  assert.ok(
    result.loaded.every((count: number) => count > 0),
    `every export path has exports: ${result.loaded}`,
  );
});

test('the shipped declarations typecheck a consumer, and catch a misuse', async () => {
  const consumer = path.join(work, 'app');
  const tsc = path.join(root, 'node_modules', '.bin', 'tsc');
  const tsconfig = {
    compilerOptions: {
      module: 'NodeNext',
      moduleResolution: 'NodeNext',
      target: 'ES2022',
      strict: true,
      noEmit: true,
      typeRoots: [path.join(root, 'node_modules', '@types')],
      types: ['node'],
    },
    files: ['use.ts'],
  };
  await writeFile(path.join(consumer, 'tsconfig.json'), JSON.stringify(tsconfig));
  const good = `import { createPortal, type Portal, type PortalOptions, type Storage, type BlobStore, type WebhookTransport, type Webhook, type FileEntry } from 'customer-portal';
import { memoryStorage, memoryBlobs, memoryTransport } from 'customer-portal/adapters/memory';
const storage: Storage = memoryStorage();
const blobs: BlobStore = memoryBlobs();
const transport: WebhookTransport = memoryTransport();
const options: PortalOptions = { storage, blobs, transport, auth: { apiKeys: { 'pack-key-0123456789': 'acct' } } };
const portal: Portal = await createPortal(options);
const hook: Webhook | null = await portal.webhooks.get('acct', 'wbh_x');
const entries: FileEntry[] = await portal.files.list('acct');
export { hook, entries };
`;
  await writeFile(path.join(consumer, 'use.ts'), good);
  await run(tsc, ['-p', 'tsconfig.json'], { cwd: consumer });
  await writeFile(
    path.join(consumer, 'use.ts'),
    good.replace("auth: { apiKeys: { 'pack-key-0123456789': 'acct' } }", 'auth: { apiKeys: 42 }'),
  );
  let failed = false;
  await run(tsc, ['-p', 'tsconfig.json'], { cwd: consumer }).catch(() => (failed = true));
  assert.ok(failed, 'a wrong option type is a compile error');
});

test.run();
