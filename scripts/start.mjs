/**
 * `npm start`: the standalone server, run from a build of its own under `.start/<fingerprint>/`.
 *
 * The fingerprint is a hash of every source the server is built from, so a start with nothing
 * changed builds nothing, and a change builds once. A build is made in a temporary directory, marked
 * complete, and renamed into place whole; it is laid out as the package is (`dist/` beside a copy of
 * `package.json`, which the server reads its version from). A running server keeps the build it
 * started from, whatever `npm run build` (which empties `dist/`) or a later start does: a start marks
 * the build it uses before anything else, and a build no live process has marked is moved aside
 * whole, then removed, by the next start.
 */
import { execFileSync, execSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
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
  return readdirSync(full)
    .sort()
    .flatMap((name) => files(path.join(entry, name)));
}

function fingerprint() {
  const hash = createHash('sha256');
  for (const file of SOURCES.flatMap(files))
    hash
      .update(`${file}\0`)
      .update(readFileSync(path.join(root, file)))
      .update('\0');
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
  const dist = path.join(temp, 'dist');
  const tsc = path.join(root, 'node_modules/typescript/bin/tsc');
  const run = (args) => execFileSync(process.execPath, args, { cwd: root, stdio: ['ignore', 'inherit', 'inherit'] });
  run([tsc, '-p', 'scripts/tsconfig.start.json', '--outDir', dist]);
  run([tsc, '-p', 'ui/tsconfig.json', '--outDir', path.join(dist, 'ui-build')]);
  run(['ui/build.mjs', path.join(dist, 'ui-build'), path.join(dist, 'ui')]);
  copyFileSync(path.join(root, 'package.json'), path.join(temp, 'package.json'));
  mkdirSync(path.join(temp, 'in-use'));
  writeFileSync(path.join(temp, 'complete'), '');
  try {
    renameSync(temp, target);
  } catch (error) {
    if (!existsSync(target)) throw error;
    rmSync(temp, { recursive: true, force: true });
  }
}

/**
 * Removes the builds and leftovers no live process uses: each is first renamed aside (atomic), so a
 * start never finds a build half removed, and checked again there for a process that marked it meanwhile.
 */
function sweep(keep) {
  for (const name of existsSync(builds) ? readdirSync(builds) : []) {
    if (name === keep) continue;
    const dir = path.join(builds, name);
    const owner = /\.(?:tmp|trash)-(\d+)$/.exec(name);
    const users = (where) =>
      owner
        ? [Number(owner[1])]
        : existsSync(path.join(where, 'in-use'))
          ? readdirSync(path.join(where, 'in-use')).map(Number)
          : [];
    if (users(dir).some(alive)) continue;
    if (owner) {
      rmSync(dir, { recursive: true, force: true });
      continue;
    }
    const aside = `${dir}.trash-${process.pid}`;
    try {
      renameSync(dir, aside);
    } catch {
      continue;
    }
    // Marked by a start between the look and the rename: put back.
    if (readdirSync(path.join(aside, 'in-use')).map(Number).some(alive)) renameSync(aside, dir);
    else rmSync(aside, { recursive: true, force: true });
  }
}

/** Marks the build as used by this process; `false` when there is no complete build to mark. */
function mark(target) {
  try {
    writeFileSync(path.join(target, 'in-use', String(process.pid)), '');
  } catch {
    return false;
  }
  return existsSync(path.join(target, 'complete'));
}

const started = Date.now();
const current = fingerprint();
const target = path.join(builds, current);
if (mark(target)) {
  say(`sources unchanged, starting the build in .start/${current}`);
} else {
  say(`building into .start/${current}`);
  // What stands there without its mark of completion (an interrupted removal) goes first.
  rmSync(target, { recursive: true, force: true });
  mkdirSync(builds, { recursive: true });
  build(target);
  if (!mark(target)) throw new Error(`npm start: the build in .start/${current} could not be marked as in use`);
  say(`built in ${((Date.now() - started) / 1000).toFixed(1)} s`);
}
sweep(current);
await import(pathToFileURL(path.join(target, 'dist/examples/standalone.js')).href);
