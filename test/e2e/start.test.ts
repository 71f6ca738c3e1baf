import { cp, mkdtemp, readdir, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { logLine, startNode, type Started } from '../helpers/process.js';

const root = path.resolve(fileURLToPath(import.meta.url), '../../../..');
const KEY = 'start-key-0123456789abcdef';

/** A copy of the sources `npm start` builds from, sharing this checkout's node_modules. */
async function project(): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), 'portal-start-'));
  for (const entry of [
    'src',
    'adapters',
    'examples',
    'ui',
    'scripts',
    'package.json',
    'package-lock.json',
    'tsconfig.json',
  ]) {
    await cp(path.join(root, entry), path.join(dir, entry), { recursive: true });
  }
  await symlink(path.join(root, 'node_modules'), path.join(dir, 'node_modules'));
  return dir;
}

async function start(dir: string, dataDir: string) {
  const server = startNode(path.join(dir, 'scripts/start.mjs'), {
    PORT: '0',
    HOST: '127.0.0.1',
    DATA_DIR: dataDir,
    PORTAL_API_KEYS: KEY,
  });
  const listening = logLine(await server.waitFor((line) => logLine(line)?.msg === 'listening', 60_000));
  const said = server.errorLines.filter((line) => line.startsWith('npm start: ')).join('\n');
  return { server, url: String(listening!.url), said };
}

async function stop(server: Started) {
  server.child.kill('SIGTERM');
  assert.is(await server.exited, 0);
}

const builds = async (dir: string) => (await readdir(path.join(dir, '.start'))).sort();
const served = async (url: string) =>
  (await fetch(`${url}/files`, { headers: { authorization: `Bearer ${KEY}` } })).status;

test('npm start builds once into .start/, reuses it, and a rebuild never pulls it from under a running server', async () => {
  const dir = await project();
  try {
    const first = await start(dir, path.join(dir, 'data-1'));
    assert.match(first.said, /building into \.start\/[0-9a-f]{16}/);
    const [built] = await builds(dir);
    assert.is(await served(first.url), 200);
    // Laid out as the package is: the server reads its version from the package.json beside dist/.
    const layout = await readdir(path.join(dir, '.start', built!));
    assert.ok(
      ['complete', 'dist', 'in-use', 'package.json'].every((entry) => layout.includes(entry)),
      layout.join(' '),
    );
    assert.equal(await readdir(path.join(dir, '.start', built!, 'in-use')), [String(first.server.child.pid)]);

    const again = await start(dir, path.join(dir, 'data-2'));
    assert.match(again.said, `sources unchanged, starting the build in .start/${built}`);
    await stop(again.server);

    // A change to a source builds anew; the first server still runs from its own build, and keeps it.
    const source = path.join(dir, 'examples/standalone.ts');
    await writeFile(source, (await readFile(source, 'utf8')) + '\n// changed\n');
    const changed = await start(dir, path.join(dir, 'data-2'));
    assert.match(changed.said, 'building into');
    assert.is((await builds(dir)).length, 2);
    await rm(path.join(dir, 'dist'), { recursive: true, force: true });
    assert.is(await served(first.url), 200, 'the first server is untouched by the new build');
    await stop(changed.server);
    await stop(first.server);

    // With no live server on it, the old build goes at the next start.
    const last = await start(dir, path.join(dir, 'data-2'));
    assert.match(last.said, 'sources unchanged');
    assert.is((await builds(dir)).length, 1);
    assert.is.not((await builds(dir))[0], built);
    await stop(last.server);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test.run();
