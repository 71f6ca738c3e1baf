import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import type { Agreement } from '../../src/index.js';
import { memoryTransport } from '../../adapters/memory/index.js';
import { sqlAdapters } from '../../adapters/sql/index.js';
import { PNG_SIGNATURE, SIGNER, signer, simplePdf, validFormData } from '../helpers/agreements.js';
import { openBackends } from '../helpers/backends.js';
import { SIGNING_KEY_1 } from '../helpers/download.js';
import { type TestPortal, json, startPortal, withPortal } from '../helpers/server.js';
import { connectPostgres, dropSchema, freshSchema } from '../helpers/sql.js';
import { NEVER, waitFor } from '../helpers/webhooks.js';

/**
 * Signing through links on every adapter: two signers of a parallel agreement sign at the same
 * moment, and `agreement-signed` is stored once; the audit trail verifies, and an edit of one
 * stored entry, made past the adapter, makes it fail verification.
 */
const { list: backends, close } = await openBackends('signing');

async function linkFor(app: TestPortal, agreementId: string, signerId: string): Promise<string> {
  const res = await app.api(`/agreements/${agreementId}/signers/${signerId}/signing-link`, { method: 'POST' });
  assert.is(res.status, 201);
  return new URL((await json(res)).link).hash.slice(1);
}

/**
 * Waits for the agreement's completed copy, made off the request once it is signed, to be recorded
 * and written where the store keeps it (`dump`: the fs log, the database): an edit past the store
 * made before would be written over by the copy's update, or miss the version the store reads.
 */
async function copyMade(app: TestPortal, agreementId: string, dump: () => Promise<string>): Promise<void> {
  let hash: string | null = null;
  await waitFor(
    async () =>
      (hash = (await app.portal.agreements.get('acct_a', agreementId))!.documents[0]!.signedFileHash) !== null,
    'the completed copy',
    10_000,
  );
  await waitFor(async () => (await dump()).includes(hash!), 'the completed copy, written down', 10_000);
  // Bytes in the file are not yet a write the store has finished (its fsync may still run, the record
  // still served from memory): one more write through the store, finished, comes after it in turn.
  await app.portal.files.createDirectory('acct_a', { name: `after ${agreementId}` });
}

const signAs = (app: TestPortal, token: string) =>
  fetch(`${app.url}/v1/signing/sign`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ signature: PNG_SIGNATURE }),
  });

for (const backend of backends) {
  const on = suite(`signing: ${backend.name}`);

  on('two signers sign at once: agreement-signed once; the trail verifies, and an edited entry does not', async () => {
    const { options, cleanup, tamper, dump } = await backend.options();
    const transport = memoryTransport();
    try {
      await withPortal(
        { ...options, transport, signingKeys: [SIGNING_KEY_1], webhooks: { tick: NEVER } },
        async (app) => {
          const hook = await app.portal.webhooks.create('acct_a', {
            type: 'agreement-signed',
            url: 'https://hooks.example.com/signed',
          });
          const form = validFormData({
            signers: [SIGNER, signer(2)],
            documents: [{ name: 'lease.pdf', bytes: await simplePdf('The lease') }],
          });
          const agreement = await json(await app.api('/agreements', { method: 'POST', body: form }));
          const tokens = await Promise.all(
            agreement.signers.map((one: { id: string }) => linkFor(app, agreement.id, one.id)),
          );
          const answers = await Promise.all(tokens.map((token) => signAs(app, token)));
          assert.equal(
            answers.map((res) => res.status),
            [200, 200],
          );
          await copyMade(app, agreement.id, dump);
          const stored = (await app.portal.agreements.get('acct_a', agreement.id))!;
          assert.is(stored.status, 'signed');
          assert.is((await app.portal.webhooks.deliveries('acct_a', hook.id))!.length, 1, 'agreement-signed once');

          const audit = await json(await app.api(`/agreements/${agreement.id}/audit`));
          assert.is(audit.verified, true);
          assert.equal(
            audit.data.map((entry: { action: string }) => entry.action).sort(),
            ['created', 'link-issued', 'link-issued', 'signed', 'signed'].sort(),
          );
          await tamper(agreement.id, '127.0.0.1', '127.0.0.2');
          const edited = await json(await app.api(`/agreements/${agreement.id}/audit`));
          assert.is(edited.verified, false, 'an edited entry is never served as genuine');
        },
      );
    } finally {
      await cleanup();
    }
  });

  on(
    "verified is false once the agreement is edited under its trail: a signature image, a signer's e-mail, a document's hash",
    async () => {
      const { options, cleanup, edit, dump } = await backend.options();
      try {
        await withPortal({ ...options, signingKeys: [SIGNING_KEY_1], webhooks: { tick: NEVER } }, async (app) => {
          const edits: [string, (agreement: Agreement) => [string, string]][] = [
            ['a signature image', (agreement) => [agreement.signers[0]!.signature!.slice(40, 52), 'AAAAAAAAAAAA']],
            ["a signer's e-mail", () => ['bo@example.com', 'bx@example.com']],
            ["a document's hash", (agreement) => [agreement.documents[0]!.fileHash.slice(0, 12), 'ffffffffffff']],
          ];
          for (const [what, change] of edits) {
            const form = validFormData({
              signers: [SIGNER],
              documents: [{ name: 'lease.pdf', bytes: await simplePdf('The lease') }],
            });
            const agreement = await json(await app.api('/agreements', { method: 'POST', body: form }));
            assert.is((await signAs(app, await linkFor(app, agreement.id, agreement.signers[0].id))).status, 200);
            await copyMade(app, agreement.id, dump);
            const signed = (await app.portal.agreements.get('acct_a', agreement.id))!;
            assert.is(
              (await json(await app.api(`/agreements/${agreement.id}/audit`))).verified,
              true,
              `${what}: verified before`,
            );
            const [from, to] = change(signed);
            await edit(agreement.id, from, to);
            assert.is(
              (await json(await app.api(`/agreements/${agreement.id}/audit`))).verified,
              false,
              `${what}: not verified after`,
            );
          }
        });
      } finally {
        await cleanup();
      }
    },
  );

  on.run();
}

const instances = suite('signing: two instances on one PostgreSQL');
instances('two signers on two instances at the same moment: agreement-signed is stored once', async () => {
  const postgres = await connectPostgres();
  if (postgres.pool === undefined) {
    console.log(`  skipped: ${postgres.reason}`);
    return;
  }
  const schema = freshSchema();
  const shared = { signingKeys: [SIGNING_KEY_1], webhooks: { tick: NEVER }, transport: memoryTransport() };
  const one = await startPortal({ ...sqlAdapters({ client: postgres.pool, schema }), ...shared });
  const two = await startPortal({ ...sqlAdapters({ client: postgres.pool, schema }), ...shared });
  try {
    const hook = await one.portal.webhooks.create('acct_a', {
      type: 'agreement-signed',
      url: 'https://hooks.example.com/signed',
    });
    for (let round = 0; round < 5; round++) {
      const agreement = await json(
        await one.api('/agreements', { method: 'POST', body: validFormData({ signers: [SIGNER, signer(2)] }) }),
      );
      const [first, second] = [
        await linkFor(one, agreement.id, agreement.signers[0].id),
        await linkFor(two, agreement.id, agreement.signers[1].id),
      ];
      const answers = await Promise.all([signAs(one, first), signAs(two, second)]);
      assert.equal(
        answers.map((res) => res.status),
        [200, 200],
        `round ${round}`,
      );
    }
    assert.is(
      (await one.portal.webhooks.deliveries('acct_a', hook.id))!.length,
      5,
      'one agreement-signed for each of the five agreements',
    );
  } finally {
    await one.close();
    await two.close();
    await dropSchema(postgres.pool, schema);
    await postgres.pool.end();
  }
});
instances(
  'two instances ticking at the same moment make each reminder round once, and close an expired agreement once',
  async () => {
    const postgres = await connectPostgres();
    if (postgres.pool === undefined) {
      console.log(`  skipped: ${postgres.reason}`);
      return;
    }
    const schema = freshSchema();
    let now = Date.now();
    const clock = () => new Date(now);
    const transport = memoryTransport();
    const shared = {
      signingKeys: [SIGNING_KEY_1],
      webhooks: { tick: NEVER },
      transport,
      clock,
      agreements: { reminderIntervalMs: 60_000 },
    };
    const one = await startPortal({ ...sqlAdapters({ client: postgres.pool, schema }), ...shared });
    const two = await startPortal({ ...sqlAdapters({ client: postgres.pool, schema }), ...shared });
    try {
      for (const type of ['agreement-reminder-due', 'agreement-expired'])
        await one.portal.webhooks.create('acct_a', { type, url: `https://hooks.example.com/${type}` });
      const reminding = await json(
        await one.api('/agreements', { method: 'POST', body: validFormData({ signers: [SIGNER, signer(2)] }) }),
      );
      const expiring = validFormData();
      expiring.set('expiresAt', new Date(now + 90_000).toISOString());
      const closing = await json(await one.api('/agreements', { method: 'POST', body: expiring }));
      for (const round of [1, 2]) {
        now += 60_000;
        await Promise.all([
          one.portal.worker!.tick(),
          two.portal.worker!.tick(),
          one.portal.worker!.tick(),
          two.portal.worker!.tick(),
        ]);
        const events = transport.calls.map((call) => JSON.parse(call.body));
        const reminders = events.filter(
          (event) => event.type === 'agreement-reminder-due' && event.data.id === reminding.id,
        );
        assert.is(reminders.length, 2 * round, `round ${round}: one reminder per signer`);
      }
      const stored = (await one.portal.agreements.get('acct_a', closing.id))!;
      assert.is(stored.closedReason, 'expired');
      assert.is(transport.calls.filter((call) => JSON.parse(call.body).type === 'agreement-expired').length, 1);
    } finally {
      await one.close();
      await two.close();
      await dropSchema(postgres.pool, schema);
      await postgres.pool.end();
    }
  },
);
instances.after(close);
instances.run();
