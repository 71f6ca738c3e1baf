import type { Test } from 'uvu';
import * as assert from 'uvu/assert';
import type { AgreementRecord } from '../../../src/records.js';
import { fileRecord, webhookRecord } from '../../conformance/fixtures.js';
import { rejects } from '../../helpers/server.js';
import { agreementRecord, attachmentRecord, eventRecord, rowsOf, withSqlStorage, type SqlBackend } from './context.js';
import { everyDelivery } from '../../helpers/every-delivery.js';

/** Agreements, attachments and blob references, checked against the tables directly where it matters. */
export function recordTests(test: Test, backend: SqlBackend): void {
  test(
    'agreements: insert stores the agreement, its signers and documents in order, and its events',
    withSqlStorage(backend, async (storage, { schema, db }) => {
      const webhook = webhookRecord({ type: 'agreement-created' });
      await storage.insertWebhook(webhook);
      const agreement = agreementRecord();
      const event = eventRecord({ type: 'agreement-created', data: { id: agreement.id } });
      await storage.insertAgreement(agreement, [event]);
      assert.equal(await storage.getAgreement('acct_a', agreement.id), agreement);
      assert.is(await storage.getAgreement('acct_b', agreement.id), null);
      assert.equal(await db.event(event.id), event);
      const deliveries = await everyDelivery(storage, 'acct_a', webhook.id);
      assert.equal(
        deliveries.map((delivery) => delivery.eventId),
        [event.id],
      );
      // Proper tables: one row per signer and per document, not a JSON copy of the agreement.
      assert.is(
        (await rowsOf(backend.client, schema, 'agreement_signers', `agreement_id = '${agreement.id}'`)).length,
        3,
      );
      assert.is(
        (await rowsOf(backend.client, schema, 'agreement_documents', `agreement_id = '${agreement.id}'`)).length,
        2,
      );
    }),
  );

  test(
    'agreements: an insert whose event fails to store leaves no agreement behind',
    withSqlStorage(backend, async (storage, { schema }) => {
      const event = eventRecord();
      await storage.publishEvents([event]);
      const agreement = agreementRecord();
      await rejects(() => storage.insertAgreement(agreement, [event]), /./);
      assert.is(await storage.getAgreement('acct_a', agreement.id), null);
      assert.equal(await rowsOf(backend.client, schema, 'agreement_signers'), []);
      assert.equal(await rowsOf(backend.client, schema, 'agreement_documents'), []);
    }),
  );

  test(
    'agreements: inserting an id twice rejects and keeps the first',
    withSqlStorage(backend, async (storage) => {
      const agreement = agreementRecord();
      await storage.insertAgreement(agreement, []);
      await rejects(() => storage.insertAgreement({ ...agreementRecord(), id: agreement.id, name: 'Second' }, []), /./);
      assert.equal(await storage.getAgreement('acct_a', agreement.id), agreement);
    }),
  );

  test(
    'agreements: update replaces signers and status and stores the events, atomically',
    withSqlStorage(backend, async (storage, { db }) => {
      const webhook = webhookRecord({ type: 'agreement-signed' });
      await storage.insertWebhook(webhook);
      const agreement = agreementRecord();
      await storage.insertAgreement(agreement, []);
      const signed = eventRecord({ type: 'agreement-signed' });
      let seen: AgreementRecord | undefined;
      const result = await storage.updateAgreement('acct_a', agreement.id, (current) => {
        seen = current;
        const signers = current.signers.map((signer) => ({
          ...signer,
          signature: 'data:image/png;base64,AAAA',
          signatureHash: 'b'.repeat(64),
          signedAt: '2026-01-02T03:04:05+00:00',
        }));
        return { agreement: { ...current, status: 'signed', signers }, events: [signed] };
      });
      assert.equal(seen, agreement);
      assert.is(result!.status, 'signed');
      const stored = (await storage.getAgreement('acct_a', agreement.id))!;
      assert.equal(stored, result);
      assert.is(stored.signers[1]!.signedAt, '2026-01-02T03:04:05+00:00');
      assert.equal(stored.documents, agreement.documents);
      assert.equal(await db.event(signed.id), signed);
      assert.is((await everyDelivery(storage, 'acct_a', webhook.id)).length, 1);
    }),
  );

  test(
    'agreements: a change that throws rolls back; an absent agreement is null without calling change',
    withSqlStorage(backend, async (storage) => {
      const agreement = agreementRecord();
      await storage.insertAgreement(agreement, []);
      await rejects(
        () =>
          storage.updateAgreement('acct_a', agreement.id, () => {
            throw new Error('already signed');
          }),
        /^already signed$/,
      );
      await rejects(
        () =>
          storage.updateAgreement('acct_a', agreement.id, (current) => ({
            agreement: { ...current, id: 'agr_other' },
            events: [],
          })),
        /keep the id/,
      );
      // An event that cannot be stored (its id exists) undoes the agreement's change too.
      const existing = eventRecord();
      await storage.publishEvents([existing]);
      await rejects(
        () =>
          storage.updateAgreement('acct_a', agreement.id, (current) => ({
            agreement: { ...current, status: 'signed', signers: [] },
            events: [existing],
          })),
        /./,
      );
      assert.equal(await storage.getAgreement('acct_a', agreement.id), agreement);
      let called = false;
      const missing = await storage.updateAgreement('acct_b', agreement.id, (current) => {
        called = true;
        return { agreement: current, events: [] };
      });
      assert.is(missing, null);
      assert.not.ok(called);
    }),
  );

  test(
    'attachments: insert, get within the account, delete once',
    withSqlStorage(backend, async (storage) => {
      const attachment = attachmentRecord();
      await storage.insertAttachment(attachment);
      assert.equal(await storage.getAttachment('acct_a', attachment.id), attachment);
      assert.is(await storage.getAttachment('acct_b', attachment.id), null);
      await rejects(() => storage.insertAttachment({ ...attachment, name: 'again.png' }), /./);
      assert.is(await storage.deleteAttachment('acct_b', attachment.id), false);
      assert.is(await storage.deleteAttachment('acct_a', attachment.id), true);
      assert.is(await storage.getAttachment('acct_a', attachment.id), null);
      assert.is(await storage.deleteAttachment('acct_a', attachment.id), false);
    }),
  );

  test(
    'isBlobReferenced: files, attachments and agreement documents name blobs; nothing else does',
    withSqlStorage(backend, async (storage) => {
      const file = fileRecord();
      const attachment = attachmentRecord();
      const agreement = agreementRecord();
      await storage.insertFileEntry(file);
      await storage.insertAttachment(attachment);
      await storage.insertAgreement(agreement, []);
      for (const key of [file.id, attachment.id, agreement.documents[1]!.id])
        assert.ok(await storage.isBlobReferenced(key), key);
      for (const key of ['fsf_unknown', agreement.id, agreement.signers[0]!.id])
        assert.not.ok(await storage.isBlobReferenced(key), key);
      await storage.deleteAttachment('acct_a', attachment.id);
      assert.not.ok(await storage.isBlobReferenced(attachment.id));
    }),
  );

  test(
    'events: data keeps its JSON exactly, key order included',
    withSqlStorage(backend, async (storage, { db }) => {
      const event = eventRecord({
        data: { zeta: 1, alpha: 'ä€😀', list: [3, 1.5, -0.25, true, null], deep: { b: 1, a: 2 }, big: 2 ** 53 - 1 },
      });
      await storage.publishEvents([event]);
      const stored = (await db.event(event.id))!;
      assert.equal(stored, event);
      assert.is(JSON.stringify(stored.data), JSON.stringify(event.data));
      assert.is((await db.event(event.id))!.accountId, 'acct_a', 'stored under its own account');
    }),
  );
}
