import { readFileSync, readdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fsBlobs, fsStorage } from '../../adapters/fs/index.js';
import { memoryStorage } from '../../adapters/memory/index.js';
import { memoryRecordOf, memoryRecordsOf } from '../../adapters/memory/memory-storage.js';
import type { AgreementRecord } from '../../src/records.js';
import { type SqlClient, sqlAdapters } from '../../adapters/sql/index.js';
import type { PortalOptions } from '../../src/index.js';
import { removeDir, tempDir } from './fs-dirs.js';
import { connectPostgres, dropSchema, freshSchema, giveBackSchema, openPglite, takeSchema } from './sql.js';

/** One adapter pair (storage and blobs) a portal-level test runs on, each time in a fresh place. */
export interface Backend {
  name: string;
  options(): Promise<{
    options: PortalOptions;
    cleanup(): Promise<void>;
    tamper: Tamper;
    edit: Edit;
    dump: Dump;
    reopen: (() => PortalOptions) | null;
  }>;
}

/**
 * Everything the store holds, as text, read past the adapter (the memory store's records, the fs
 * store's files, every table of the SQL schema): what someone with the disk or the database sees.
 */
type Dump = () => Promise<string>;

/**
 * Edits the agreement itself past the adapter: every `from` in its stored signers (names, e-mails,
 * signature images), documents and sender's image becomes `to`, of the same length.
 */
type Edit = (agreementId: string, from: string, to: string) => Promise<void>;

/**
 * Edits what the store holds, past the adapter, as someone with access to the disk or the database
 * would: the `ip` of one audit entry of an agreement (`from` becomes `to`, the same length).
 */
type Tamper = (agreementId: string, from: string, to: string) => Promise<void>;

/**
 * memory, fs, PGlite, and PostgreSQL when it answers (its absence printed under `what`, never
 * skipped silently); with `s3`, also S3 (moto) for the bytes beside PostgreSQL for the records, when
 * both answer. `close` releases the shared clients once the suite is done.
 */
export async function openBackends(
  what: string,
  options: { s3?: boolean } = {},
): Promise<{ list: Backend[]; close(): Promise<void> }> {
  const pglite = await openPglite();
  const postgres = await connectPostgres();
  let stopMoto = async () => {};
  const list: Backend[] = [
    {
      name: 'memory',
      async options() {
        const storage = memoryStorage();
        const tamper: Tamper = async (agreementId, from, to) => {
          const entry = (memoryRecordOf(storage, 'agreement', agreementId) as AgreementRecord).audit.find(
            (candidate) => candidate.ip === from,
          )!;
          entry.ip = to;
        };
        const edit: Edit = async (agreementId, from, to) => {
          const record = memoryRecordOf(storage, 'agreement', agreementId) as AgreementRecord;
          const { audit: _audit, ...rest } = record;
          Object.assign(record, JSON.parse(JSON.stringify(rest).replaceAll(from, to)));
        };
        const dump: Dump = async () => JSON.stringify(memoryRecordsOf(storage));
        // Memory keeps nothing across a restart, by design.
        return { options: { storage }, cleanup: async () => {}, tamper, edit, dump, reopen: null };
      },
    },
    {
      name: 'fs',
      async options() {
        const dir = tempDir('backend');
        // Agreements are read from the log where they lie: an edit of those bytes is what the store reads next.
        const tamper: Tamper = async (agreementId, from, to) => {
          const file = path.join(dir, 'records.log');
          const bytes = readFileSync(file);
          const at = bytes.lastIndexOf(Buffer.from(`"ip":${JSON.stringify(from)}`));
          if (at === -1 || !bytes.includes(Buffer.from(agreementId)))
            throw new Error('tamper: nothing to edit in the log');
          bytes.write(`"ip":${JSON.stringify(to)}`, at);
          writeFileSync(file, bytes);
        };
        const edit: Edit = async (agreementId, from, to) => {
          const file = path.join(dir, 'records.log');
          const bytes = readFileSync(file);
          if (!bytes.includes(Buffer.from(agreementId)) || !bytes.includes(Buffer.from(from)))
            throw new Error('edit: nothing to edit in the log');
          writeFileSync(file, Buffer.from(bytes.toString('latin1').replaceAll(from, to), 'latin1'));
        };
        const open = () => ({ storage: fsStorage({ dir }), blobs: fsBlobs({ dir: path.join(dir, 'blobs') }) });
        return {
          options: open(),
          cleanup: async () => removeDir(dir),
          tamper,
          edit,
          dump: async () => readTree(dir),
          reopen: open,
        };
      },
    },
    {
      name: 'PGlite',
      async options() {
        const schema = await takeSchema(pglite);
        return {
          options: sqlAdapters({ client: pglite, schema }),
          cleanup: () => giveBackSchema(pglite, schema),
          tamper: sqlTamper(pglite, schema),
          edit: sqlEdit(pglite, schema),
          dump: sqlDump(pglite, schema),
          reopen: () => sqlAdapters({ client: pglite, schema }),
        };
      },
    },
  ];
  if (postgres.pool) {
    const pool = postgres.pool;
    list.push({
      name: 'PostgreSQL',
      async options() {
        const schema = await takeSchema(pool);
        return {
          options: sqlAdapters({ client: pool, schema }),
          cleanup: () => giveBackSchema(pool, schema),
          tamper: sqlTamper(pool, schema),
          edit: sqlEdit(pool, schema),
          dump: sqlDump(pool, schema),
          reopen: () => sqlAdapters({ client: pool, schema }),
        };
      },
    });
  } else {
    console.log(`SKIP the PostgreSQL rows of ${what}: ${postgres.reason}`);
  }
  if (options.s3 === true) {
    const { startMoto } = await import('./moto.js');
    const { s3Blobs } = await import('../../adapters/s3/index.js');
    const started =
      postgres.pool === undefined
        ? { reason: 'PostgreSQL, which holds its records, does not answer' }
        : await startMoto();
    if (started.moto === undefined) {
      console.log(`SKIP the S3 rows of ${what}: ${started.reason}`);
    } else {
      const { moto } = started;
      const pool = postgres.pool!;
      const bucket = await moto.bucket();
      stopMoto = () => moto.stop();
      list.push({
        name: 'S3 (moto) and PostgreSQL',
        async options() {
          const schema = freshSchema();
          const open = () => ({
            ...sqlAdapters({ client: pool, schema }),
            blobs: s3Blobs({ client: moto.client, bucket, prefix: `${schema}/` }),
          });
          return {
            options: open(),
            cleanup: () => dropSchema(pool, schema),
            tamper: sqlTamper(pool, schema),
            edit: sqlEdit(pool, schema),
            dump: sqlDump(pool, schema),
            reopen: open,
          };
        },
      });
    }
  }
  return {
    list,
    async close() {
      await pglite.close();
      await postgres.pool?.end();
      await stopMoto();
    },
  };
}

/** An UPDATE of the stored entry's text, as a database user could make it. */
const sqlTamper =
  (client: SqlClient, schema: string): Tamper =>
  async (agreementId, from, to) => {
    await client.query(
      `UPDATE "${schema}".portal_agreement_audit SET entry = replace(entry, $2, $3) WHERE agreement_id = $1 AND entry LIKE '%' || $2 || '%'`,
      [agreementId, `"ip":${JSON.stringify(from)}`, `"ip":${JSON.stringify(to)}`],
    );
  };

/** UPDATEs of the agreement's own rows, as a database user could make them. */
const sqlEdit =
  (client: SqlClient, schema: string): Edit =>
  async (agreementId, from, to) => {
    const params = [agreementId, from, to];
    await client.query(
      `UPDATE "${schema}".portal_agreement_signers SET first_name = replace(first_name, $2, $3), last_name = replace(last_name, $2, $3),
        email = replace(email, $2, $3), signature = replace(signature, $2, $3) WHERE agreement_id = $1`,
      params,
    );
    await client.query(
      `UPDATE "${schema}".portal_agreement_documents SET file_hash = replace(file_hash, $2, $3) WHERE agreement_id = $1`,
      params,
    );
    await client.query(
      `UPDATE "${schema}".portal_agreements SET signer_signature = replace(signer_signature, $2, $3) WHERE id = $1`,
      params,
    );
  };

/** Every row of every table of the schema, as text. */
const sqlDump =
  (client: SqlClient, schema: string): Dump =>
  async () => {
    const tables = await client.query('SELECT table_name FROM information_schema.tables WHERE table_schema = $1', [
      schema,
    ]);
    let text = '';
    for (const { table_name: table } of tables.rows as { table_name: string }[]) {
      const rows = await client.query(`SELECT t::text AS row FROM "${schema}"."${table}" AS t`);
      text += (rows.rows as { row: string }[]).map((row) => row.row).join('\n');
    }
    return text;
  };

/** Every file under `dir`, as latin1 text. */
function readTree(dir: string): string {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile())
    .map((entry) => readFileSync(path.join(entry.parentPath, entry.name)).toString('latin1'))
    .join('\n');
}
