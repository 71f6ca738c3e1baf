/**
 * `npm start`: the standalone server, run from a build of its own under `.start/<fingerprint>/`.
 *
 * The fingerprint is a hash of every source the server is built from, so a start with nothing
 * changed builds nothing, and a change builds once. A build is made in a temporary directory and
 * renamed into place whole; a running server keeps the build it started from, whatever
 * `npm run build` (which empties `dist/`) or a later start does. A build no live server uses is
 * removed by the next start.
 */
import { execFileSync, execSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const builds = path.join(root, '.start');
const SOURCES = ['src', 'adapters', 'examples', 'ui', 'scripts', 'package.json', 'package-lock.json', 'tsconfig.json'];
const say = (message) => process.stderr.write(`npm start: ${message}\n`);

if (!existsSync(path.join(root, 'node_modules/.package-lock.json'))) {
  execSync('npm ci --no-audit --no-fund --ignore-scripts', { cwd: root, stdio: 'inherit' });
}

/** Every file under `entry`, as paths relative to the project, in a stable order. */
function files(entry) {
  const full = path.join(root, entry);
  if (!existsSync(full)) return [];
  if (!statSync(full).isDirectory()) return [entry];
  return readdirSync(full).sort().flatMap((name) => files(path.join(entry, name)));
}

function fingerprint() {
  const hash = createHash('sha256');
  for (const file of SOURCES.flatMap(files)) hash.update(`${file}\0`).update(readFileSync(path.join(root, file))).update('\0');
  return hash.digest('hex').slice(0, 16);
}

const alive = (pid) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return error.code === 'EPERM';
  }
};

/** Builds into a temporary directory, then renames it to `target`; another start that won the race is fine. */
function build(target) {
  const temp = `${target}.tmp-${process.pid}`;
  rmSync(temp, { recursive: true, force: true });
  const tsc = path.join(root, 'node_modules/typescript/bin/tsc');
  const run = (args) => execFileSync(process.execPath, args, { cwd: root, stdio: ['ignore', 'inherit', 'inherit'] });
  run([tsc, '-p', 'scripts/tsconfig.start.json', '--outDir', temp]);
  run([tsc, '-p', 'ui/tsconfig.json', '--outDir', path.join(temp, 'ui-build')]);
  run(['ui/build.mjs', path.join(temp, 'ui-build'), path.join(temp, 'ui')]);
  try {
    renameSync(temp, target);
  } catch (error) {
    if (!existsSync(target)) throw error;
    rmSync(temp, { recursive: true, force: true });
  }
}

/** Removes the builds and leftovers no live process uses. */
function sweep(keep) {
  for (const name of existsSync(builds) ? readdirSync(builds) : []) {
    if (name === keep) continue;
    const dir = path.join(builds, name);
    const leftover = /\.tmp-(\d+)$/.exec(name);
    const users = leftover ? [Number(leftover[1])] : existsSync(path.join(dir, 'in-use')) ? readdirSync(path.join(dir, 'in-use')).map(Number) : [];
    if (!users.some(alive)) rmSync(dir, { recursive: true, force: true });
  }
}

const started = Date.now();
const current = fingerprint();
const target = path.join(builds, current);
if (existsSync(target)) {
  say(`sources unchanged, starting the build in .start/${current}`);
} else {
  say(`building into .start/${current}`);
  mkdirSync(builds, { recursive: true });
  build(target);
  say(`built in ${((Date.now() - started) / 1000).toFixed(1)} s`);
}
mkdirSync(path.join(target, 'in-use'), { recursive: true });
writeFileSync(path.join(target, 'in-use', String(process.pid)), '');
sweep(current);
await import(pathToFileURL(path.join(target, 'examples/standalone.js')).href);
