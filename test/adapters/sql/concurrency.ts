import pg from 'pg';
import type { Test } from 'uvu';
import * as assert from 'uvu/assert';
import { connectDatabase } from '../../../adapters/sql/connect.js';
import { sqlAdapters, sqlStorage } from '../../../adapters/sql/index.js';
import type { Storage } from '../../../src/ports.js';
import type { AgreementRecord } from '../../../src/records.js';
import { webhookRecord } from '../../conformance/fixtures.js';
import { rejects } from '../../helpers/server.js';
import { POSTGRES_URL, dropSchema, freshSchema } from '../../helpers/sql.js';
import { agreementRecord, eventRecord, rowsOf } from './context.js';

const NOW = '2026-01-01T00:10:00+00:00';
const LEASE = '2026-01-01T00:11:00+00:00';

/** Separate pools on the server: as separate processes would be. */
async function withPools(
  count: number,
  body: (pools: pg.Pool[], schema: string) => Promise<void>,
  config: pg.PoolConfig = {},
) {
  const schema = freshSchema();
  const pools = Array.from({ length: count }, () => {
    const pool = new pg.Pool({ connectionString: POSTGRES_URL, max: 4, allowExitOnIdle: true, ...config });
    pool.on('error', () => {});
    return pool;
  });
  try {
    await body(pools, schema);
  } finally {
    await dropSchema(pools[0]!, schema);
    await Promise.all(pools.map((pool) => pool.end()));
  }
}

async function openOn(pool: pg.Pool, schema: string): Promise<Storage> {
  const storage = sqlStorage({ client: pool, schema });
  await storage.open!();
  return storage;
}

/** What needs several connections at once: run on the PostgreSQL server only. */
export function concurrencyTests(test: Test): void {
  test('claim: eight claimers on two pools share 400 due deliveries, none twice', () =>
    withPools(2, async (pools, schema) => {
      const [one, two] = await Promise.all(pools.map((pool) => openOn(pool, schema)));
      await one!.insertWebhook(webhookRecord());
      await one!.publishEvents(
        Array.from({ length: 400 }, (_, i) => eventRecord({ createdAt: `2026-01-01T00:0${i % 10}:00+00:00` })),
      );
      const claimedBy = new Map<string, string>();
      const duplicates: string[] = [];
      const claimer = async (storage: Storage, owner: string) => {
        for (;;) {
          const batch = await storage.claimDeliveries({ now: NOW, leaseUntil: LEASE, limit: 7, owner });
          if (batch.length === 0) return;
          for (const { delivery } of batch) {
            if (claimedBy.has(delivery.id)) duplicates.push(delivery.id);
            claimedBy.set(delivery.id, owner);
          }
        }
      };
      await Promise.all([0, 1, 2, 3, 4, 5, 6, 7].map((n) => claimer(n % 2 === 0 ? one! : two!, `worker-${n}`)));
      assert.equal(duplicates, []);
      assert.is(claimedBy.size, 400);
      // The database agrees with what each claimer was told.
      for (const row of await rowsOf(pools[0]!, schema, 'queue'))
        assert.is(row.lease_owner, claimedBy.get(row.id as string));
      assert.ok(new Set(claimedBy.values()).size > 1, 'more than one claimer got work');
    }));

  test('claim: rows another transaction holds are skipped, not waited for (SKIP LOCKED)', () =>
    withPools(
      1,
      async ([pool], schema) => {
        // A claim that waited for the lock would fail with lock_timeout instead of returning.
        const storage = await openOn(pool!, schema);
        await storage.insertWebhook(webhookRecord());
        const deliveries = await storage.publishEvents(
          [1, 2, 3, 4, 5].map((minute) => eventRecord({ createdAt: `2026-01-01T00:0${minute}:00+00:00` })),
        );
        const holder = await pool!.connect();
        try {
          await holder.query('BEGIN');
          const held = deliveries.slice(0, 2).map((delivery) => delivery.id);
          await holder.query(`SELECT id FROM "${schema}".portal_queue WHERE id = ANY($1::text[]) FOR UPDATE`, [held]);
          const claimed = await storage.claimDeliveries({ now: NOW, leaseUntil: LEASE, limit: 10, owner: 'worker-1' });
          assert.equal(
            claimed.map((c) => c.delivery.id),
            deliveries.slice(2).map((d) => d.id),
          );
          await holder.query('COMMIT');
          const rest = await storage.claimDeliveries({ now: NOW, leaseUntil: LEASE, limit: 10, owner: 'worker-2' });
          assert.equal(
            rest.map((c) => c.delivery.id),
            held,
          );
        } finally {
          holder.release();
        }
      },
      { options: '-c lock_timeout=5000' },
    ));

  test('updateAgreement: five concurrent signings on two pools all land (no lost update)', () =>
    withPools(2, async (pools, schema) => {
      const [one, two] = await Promise.all(pools.map((pool) => openOn(pool, schema)));
      const agreement = agreementRecord({
        signers: agreementRecord().signers.concat(agreementRecord().signers.slice(0, 2)),
      });
      await one!.insertAgreement(agreement, []);
      const sign = (storage: Storage, index: number) =>
        storage.updateAgreement('acct_a', agreement.id, (current): { agreement: AgreementRecord; events: [] } => {
          const signers = current.signers.map((signer, i) =>
            i === index ? { ...signer, signature: `sig-${i}`, signedAt: NOW } : signer,
          );
          return {
            agreement: { ...current, signers, status: signers.every((s) => s.signature !== null) ? 'signed' : 'sent' },
            events: [],
          };
        });
      await Promise.all(agreement.signers.map((_, index) => sign(index % 2 === 0 ? one! : two!, index)));
      const stored = (await one!.getAgreement('acct_a', agreement.id))!;
      assert.equal(
        stored.signers.map((signer) => signer.signature),
        ['sig-0', 'sig-1', 'sig-2', 'sig-3', 'sig-4'],
      );
      assert.is(stored.status, 'signed');
    }));

  test('deleteWebhook racing publishEvents never leaves a pending delivery for a deleted webhook', () =>
    withPools(2, async (pools, schema) => {
      const [one, two] = await Promise.all(pools.map((pool) => openOn(pool, schema)));
      for (let round = 0; round < 25; round++) {
        const webhook = webhookRecord();
        await one!.insertWebhook(webhook);
        await Promise.all([
          one!.publishEvents([eventRecord()]),
          two!.deleteWebhook('acct_a', webhook.id),
          one!.publishEvents([eventRecord(), eventRecord()]),
        ]);
      }
      const orphans = await rowsOf(
        pools[0]!,
        schema,
        'queue',
        `NOT EXISTS (SELECT 1 FROM "${schema}".portal_webhooks w WHERE w.id = webhook_id)`,
      );
      assert.equal(orphans, []);
    }));

  test('pool: failed transactions give their connection back', () =>
    withPools(1, async ([pool], schema) => {
      const storage = await openOn(pool!, schema);
      const agreement = agreementRecord();
      await storage.insertAgreement(agreement, []);
      for (let i = 0; i < 12; i++) {
        await rejects(
          () =>
            storage.updateAgreement('acct_a', agreement.id, () => {
              throw new Error('refused');
            }),
          /refused/,
        );
      }
      assert.ok(pool!.totalCount <= 4);
      assert.is(pool!.waitingCount, 0);
      assert.equal(await storage.getAgreement('acct_a', agreement.id), agreement);
    }));

  test('pool: statements go as named prepared statements, or as plain text with preparedStatements: false', () =>
    withPools(1, async ([pool], schema) => {
      for (const preparedStatements of [true, false]) {
        const forms: string[] = [];
        const watched = {
          query: (statement: unknown, params?: unknown[]) => {
            forms.push(typeof statement === 'string' ? 'text' : `named ${(statement as { name: string }).name}`);
            return (pool!.query as (statement: unknown, params?: unknown[]) => Promise<pg.QueryResult>)(
              statement,
              params,
            );
          },
          connect: () => pool!.connect(),
          get totalCount() {
            return pool!.totalCount;
          },
        };
        const storage = sqlStorage({ client: watched, schema, preparedStatements });
        await storage.open!();
        forms.length = 0;
        const webhook = webhookRecord();
        await storage.insertWebhook(webhook);
        assert.equal(await storage.getWebhook('acct_a', webhook.id), webhook);
        assert.equal(await storage.getWebhook('acct_a', webhook.id), webhook);
        if (preparedStatements) {
          assert.is(forms.length, 3);
          assert.ok(
            forms.every((form) => /^named customer_portal_[0-9a-f]{24}$/.test(form)),
            forms.join(),
          );
          assert.is(forms[1], forms[2], 'the same statement keeps its name');
        } else {
          assert.equal(forms, ['text', 'text', 'text']);
        }
      }
    }));

  test('connectDatabase: a postgres:// URL gives a pool that the adapters use and the caller ends', async () => {
    const database = await connectDatabase(POSTGRES_URL);
    const schema = freshSchema();
    try {
      const { storage } = sqlAdapters({ client: database.client, schema });
      await storage.open!();
      const webhook = webhookRecord();
      await storage.insertWebhook(webhook);
      assert.equal(await storage.getWebhook('acct_a', webhook.id), webhook);
      assert.is(typeof (database.client as pg.Pool).totalCount, 'number');
    } finally {
      await dropSchema(database.client, schema);
      await database.close();
    }
  });

  test("single connection (pg.Client): a transaction never swallows another request's statement", async () => {
    const schema = freshSchema();
    const client = new pg.Client({ connectionString: POSTGRES_URL });
    await client.connect();
    try {
      const storage = sqlStorage({ client, schema });
      await storage.open!();
      const agreement = agreementRecord();
      await storage.insertAgreement(agreement, []);
      const inserted = Array.from({ length: 20 }, () => webhookRecord());
      await Promise.all(
        inserted.flatMap((webhook) => [
          storage
            .updateAgreement('acct_a', agreement.id, () => {
              throw new Error('rolled back');
            })
            .catch(() => {}),
          storage.insertWebhook(webhook),
        ]),
      );
      // Had an insert run inside a transaction that then rolled back, it would be missing here.
      assert.is((await storage.listWebhooks('acct_a')).length, 20);
    } finally {
      await dropSchema(client, schema);
      await client.end();
    }
  });
}
