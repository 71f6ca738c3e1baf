import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import type { Test } from 'uvu';
import * as assert from 'uvu/assert';
import { hidingPackages } from '../../helpers/missing-packages.js';

/** Resolving `pg` or PGlite fails in the child as it would where neither is installed. */
const CHILD = `${hidingPackages(['pg', '@electric-sql/pglite'])}
const sql = await import(${JSON.stringify(new URL('../../../adapters/sql/index.js', import.meta.url).href)});
const { connectDatabase } = await import(${JSON.stringify(new URL('../../../adapters/sql/connect.js', import.meta.url).href)});
const client = { async query() { return { rows: [] }; } };
const made = [typeof sql.sqlStorage({ client }).getWebhook, typeof sql.sqlBlobs({ client }).put];
const errors = [];
for (const url of ['postgres://portal:secret@db.internal/portal', 'pglite:memory']) {
  errors.push(await connectDatabase(url).then(() => 'connected', (error) => error.message));
}
console.log(JSON.stringify({ made, errors }));
`;

export function noDriverTests(test: Test): void {
  test('without pg or PGlite installed the adapters load; only connectDatabase needs one, and names it', async () => {
    const { stdout } = await promisify(execFile)(process.execPath, ['--input-type=module', '-e', CHILD], {
      cwd: fileURLToPath(new URL('../../..', import.meta.url)),
    });
    const { made, errors } = JSON.parse(stdout.trim().split('\n').at(-1)!);
    assert.equal(made, ['function', 'function']);
    assert.match(errors[0], 'needs the package "pg", an optional peer dependency of customer-portal: npm install pg');
    assert.not.match(errors[0], 'secret');
    assert.match(errors[1], 'needs the package "@electric-sql/pglite"');
  });
}
