/**
 * The PostgreSQL path in Fastify 5 on a `pg.Pool` of the portal's size, in its fastest idiomatic
 * form: the same callback hook as `fastify.ts`, named prepared statements (parsed once per
 * connection, as the portal's), and response schemas. It reads the portal's own tables:
 *   node dist/bench/servers/fastify-pg.js <schema>
 * `GET /v1/webhooks/:id` is one SELECT by id and account; `GET /v1/files` checks the directory,
 * then lists it in the API's listing order (directories first, then by name without regard to
 * case, then by id) with ORDER BY, the answers the portal gives.
 */
import Fastify from 'fastify';
import pg from 'pg';
import { POSTGRES_URL } from '../../test/helpers/sql.js';
import {
  ACCOUNT,
  MESSAGES,
  POOL_SIZE,
  announce,
  listingSchema,
  messageSchema,
  requestIdOf,
  webhookSchema,
} from './fixture.js';
import { contractHook } from './fastify-contract.js';

const schema = process.argv[2]!;
const pool = new pg.Pool({ connectionString: POSTGRES_URL, max: POOL_SIZE });
const table = (name: string) => `"${schema}"."portal_${name}"`;
const atom = (column: string) => `to_char(${column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"+00:00"')`;
const GET_WEBHOOK = {
  name: 'bench_get_webhook',
  text: `SELECT id, type, url, secret, ${atom('created_at')} AS "createdAt" FROM ${table('webhooks')} WHERE id = $1 AND account_id = $2`,
};
const GET_DIRECTORY = {
  name: 'bench_get_directory',
  text: `SELECT type FROM ${table('file_entries')} WHERE id = $1 AND account_id = $2`,
};
const LIST_DIRECTORY = {
  name: 'bench_list_directory',
  text: `SELECT id, type, name, size::float8 AS size, mime, file_share_id AS "fileShareId", ${atom('created_at')} AS "createdAt"
    FROM ${table('file_entries')} WHERE account_id = $1 AND directory_id = $2
    ORDER BY type <> 'directory', lower(name) COLLATE "C", id`,
};

const app = Fastify({ logger: false, requestIdHeader: false, genReqId: requestIdOf });
app.addHook('onRequest', contractHook);
app.get<{ Params: { id: string } }>(
  '/v1/webhooks/:id',
  { schema: { response: { 200: webhookSchema, 401: messageSchema, 404: messageSchema } } },
  async (request, reply) => {
    const { id } = request.params;
    const { rows } = await pool.query({ ...GET_WEBHOOK, values: [id, ACCOUNT] });
    if (rows.length === 0) return reply.code(404).send({ message: MESSAGES.webhookNotFound(id) });
    return rows[0];
  },
);
app.get<{ Querystring: { directoryId: string } }>(
  '/v1/files',
  { schema: { response: { 200: listingSchema, 401: messageSchema, 404: messageSchema } } },
  async (request, reply) => {
    const { directoryId } = request.query;
    const directory = await pool.query({ ...GET_DIRECTORY, values: [directoryId, ACCOUNT] });
    if (directory.rows[0]?.type !== 'directory')
      return reply.code(404).send({ message: MESSAGES.directoryNotFound(directoryId) });
    const { rows } = await pool.query({ ...LIST_DIRECTORY, values: [ACCOUNT, directoryId] });
    return { data: rows };
  },
);
await app.listen({ port: 0, host: '127.0.0.1' });
announce(app.server);
