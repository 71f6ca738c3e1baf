/**
 * Two portal instances on one PostgreSQL database (one in a process of its own, which the last test
 * kills with SIGKILL) honour the same Idempotency-Key. Needs the server; skipped with the reason
 * when it cannot be reached.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { sqlAdapters } from '../../adapters/sql/index.js';
import { createPortal } from '../../src/index.js';
import { IDEMPOTENCY_LEASE_MS } from '../../src/domain/idempotency.js';
import {
  BOUNDARY,
  MULTIPART,
  documentBytes,
  multipart,
  postHead,
  rawClient,
  validFormData,
  validParts,
} from '../helpers/agreements.js';
import { listen } from '../helpers/server.js';
import { POSTGRES_URL, connectPostgres, dropSchema, freshSchema } from '../helpers/sql.js';

const INSTANCE = fileURLToPath(new URL('../helpers/sql-http-instance.js', import.meta.url));
const AUTH = { authorization: 'Bearer key-of-account-a' };
const HOOK = JSON.stringify({ type: 'customer-created', url: 'https://receiver.example/hook' });

/** The other instance, in its own process. */
async function startChild(schema: string): Promise<{ child: ChildProcess; url: string }> {
  const child = fork(INSTANCE, [schema], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const [message] = (await Promise.race([
    once(child, 'message'),
    once(child, 'exit').then(() => {
      throw new Error('the instance ended before it listened');
    }),
  ])) as [{ url: string }];
  return { child, url: message.url };
}

/** This process's instance, with a clock the test moves. */
async function startHere(schema: string) {
  const pool = new pg.Pool({ connectionString: POSTGRES_URL, max: 4 });
  pool.on('error', () => {});
  let offsetMs = 0;
  const portal = await createPortal({
    ...sqlAdapters({ client: pool, schema }),
    auth: { apiKeys: { 'key-of-account-a': 'acct_a' } },
    signingKeys: ['a-signing-key-shared-by-every-instance-0123456789'],
    webhooks: { worker: false },
    clock: () => new Date(Date.now() + offsetMs),
  });
  const running = await listen(portal.handler);
  return {
    url: running.url,
    advance: (ms: number) => (offsetMs += ms),
    async close() {
      await running.close();
      await portal.close();
      await pool.end();
    },
  };
}

const postWebhook = (base: string, key: string) =>
  fetch(`${base}/v1/webhooks`, {
    method: 'POST',
    headers: { ...AUTH, 'content-type': 'application/json', 'idempotency-key': key },
    body: HOOK,
  });

const postForm = (base: string, key: string, form: FormData) =>
  fetch(`${base}/v1/agreements`, { method: 'POST', headers: { ...AUTH, 'idempotency-key': key }, body: form });

const postgres = await connectPostgres();
if (!postgres.pool) {
  console.log(`SKIP sql Idempotency-Key instances test: ${postgres.reason}`);
} else {
  const pool = postgres.pool;
  const schema = freshSchema();
  let child: { child: ChildProcess; url: string } | undefined;
  let here: Awaited<ReturnType<typeof startHere>> | undefined;
  const count = async (table: string) =>
    Number((await pool.query(`SELECT count(*) AS n FROM "${schema}".portal_${table}`)).rows[0].n);

  test.before(async () => {
    here = await startHere(schema);
    child = await startChild(schema);
  });

  test.after(async () => {
    if (child !== undefined && child.child.exitCode === null && child.child.signalCode === null) {
      const exited = once(child.child, 'exit');
      child.child.disconnect();
      await exited;
    }
    await here?.close();
    await dropSchema(pool, schema);
    await pool.end();
  });

  test('duplicates sent to both instances at once: one webhook, one first answer, the others 409 or its replay', async () => {
    const urls = [here!.url, child!.url];
    const answers = await Promise.all(
      Array.from({ length: 12 }, async (_, i) => {
        const res = await postWebhook(urls[i % 2]!, 'shared-key');
        return { status: res.status, replayed: res.headers.get('idempotent-replayed'), body: await res.text() };
      }),
    );
    const firsts = answers.filter((answer) => answer.status === 201 && answer.replayed === null);
    assert.is(firsts.length, 1, JSON.stringify(answers.map((answer) => [answer.status, answer.replayed])));
    for (const answer of answers) {
      if (answer.status === 201) assert.is(answer.body, firsts[0]!.body);
      else assert.is(answer.status, 409);
    }
    assert.is(await count('webhooks'), 1);
    for (const url of urls) {
      const replay = await postWebhook(url, 'shared-key');
      assert.is(replay.headers.get('idempotent-replayed'), 'true');
      assert.is(await replay.text(), firsts[0]!.body);
    }
  });

  test('an agreement created through one instance is replayed by the other from a new multipart framing', async () => {
    const documents = [{ name: 'lease.pdf', bytes: documentBytes(100_000, 7) }];
    const first = await postForm(child!.url, 'agreement-key', validFormData({ documents }));
    assert.is(first.status, 201);
    const body = await first.text();
    const replay = await postForm(here!.url, 'agreement-key', validFormData({ documents }));
    assert.is(replay.status, 201);
    assert.is(replay.headers.get('idempotent-replayed'), 'true');
    assert.is(replay.headers.get('location'), first.headers.get('location'));
    assert.is(await replay.text(), body);
    assert.is(await count('agreements'), 1);
    assert.is(await count('events'), 1);
  });

  test('a key claimed by an instance killed with SIGKILL mid-upload answers 409 until its lease ends, then one agreement is made', async () => {
    const bytes = documentBytes(1024 * 1024, 8);
    const head = multipart(
      [
        ...validParts().filter((part) => part.name !== 'documents'),
        { name: 'documents', filename: 'big.bin', bytes: Buffer.alloc(0) },
      ],
      {
        close: false,
      },
    );
    const before = head.subarray(0, head.length - 2);
    const after = Buffer.from(`\r\n--${BOUNDARY}--\r\n`);
    const client = rawClient(child!.url);
    await client.send(
      postHead({
        'Content-Type': MULTIPART,
        'Content-Length': before.length + bytes.length + after.length,
        'Idempotency-Key': 'killed-key',
      }),
    );
    await client.send(Buffer.concat([before, bytes.subarray(0, 256 * 1024)]));
    const claimed = async () =>
      (await pool.query(`SELECT status FROM "${schema}".portal_idempotency_keys WHERE key = 'killed-key'`)).rows[0]
        ?.status;
    for (let i = 0; i < 200 && (await claimed()) !== 'pending'; i++)
      await new Promise((resolve) => setTimeout(resolve, 25));
    assert.is(await claimed(), 'pending');
    const exited = once(child!.child, 'exit');
    child!.child.kill('SIGKILL');
    await exited;
    client.socket.destroy();

    const agreementsBefore = await count('agreements');
    assert.is(
      (await postForm(here!.url, 'killed-key', validFormData())).status,
      409,
      'the dead claim holds while its lease runs',
    );
    here!.advance(IDEMPOTENCY_LEASE_MS);
    const retried = await postForm(here!.url, 'killed-key', validFormData());
    assert.is(retried.status, 201);
    assert.is(retried.headers.get('idempotent-replayed'), null);
    const replay = await postForm(here!.url, 'killed-key', validFormData());
    assert.is(replay.headers.get('idempotent-replayed'), 'true');
    assert.is(await replay.text(), await retried.text());
    assert.is(await count('agreements'), agreementsBefore + 1);
  });

  test.run();
}
