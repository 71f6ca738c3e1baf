/**
 * Agreements, attachments and the outbox, per the JSDoc of `Storage`: run against the memory
 * adapter (the reference) and the fs adapter, so the two cannot drift apart unnoticed.
 */
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import type { Storage } from '../../src/ports.js';
import type { AgreementRecord, DeliveryRecord } from '../../src/records.js';
import { T0, webhookRecord } from '../conformance/fixtures.js';
import { reopenable } from '../conformance/reopen.js';
import type { StorageFactory } from '../conformance/types.js';
import { withStorage } from '../conformance/with-storage.js';
import { fsStorageFactory } from '../helpers/fs-dirs.js';
import { memoryStorageFactory } from '../helpers/memory.js';
import { agreementRecord, attachmentRecord, eventRecord, rejection } from '../helpers/record-fixtures.js';
import { everyDelivery } from '../helpers/every-delivery.js';
import { notRecorded, recorded } from '../helpers/attempts.js';

const T1 = '2026-01-01T00:01:00+00:00';
const T2 = '2026-01-01T00:02:00+00:00';
const T3 = '2026-01-01T00:03:00+00:00';

function signFirst(current: AgreementRecord, at = T1) {
  const agreement: AgreementRecord = {
    ...current,
    status: 'signed',
    signers: current.signers.map((signer, index) =>
      index === 0
        ? { ...signer, signature: 'data:image/png;base64,AA==', signatureHash: 'c'.repeat(64), signedAt: at }
        : signer,
    ),
  };
  return { agreement, events: [eventRecord({ type: 'agreement-signed', createdAt: at, data: agreement })] };
}

/** A webhook of type customer-created and one event of that type published: the delivery it made. */
async function oneDelivery(storage: Storage, createdAt = T0) {
  const webhook = webhookRecord();
  await storage.insertWebhook(webhook);
  const event = eventRecord({ createdAt });
  const [delivery] = await storage.publishEvents([event]);
  return { webhook, event, delivery: delivery! };
}

function recordTests(factory: StorageFactory) {
  const test = suite(`Storage records (agreements, attachments, outbox): ${factory.name}`);
  test(
    'agreements: insert with events stores both and fans the events out',
    withStorage(factory, async (storage, { db }) => {
      const webhook = webhookRecord({ type: 'agreement-created' });
      await storage.insertWebhook(webhook);
      const agreement = agreementRecord();
      const event = eventRecord({ type: 'agreement-created', data: agreement });
      await storage.insertAgreement(agreement, [event]);
      assert.equal(await storage.getAgreement('acct_a', agreement.id), agreement);
      assert.is(await storage.getAgreement('acct_b', agreement.id), null);
      assert.equal(await db.event(event.id), event);
      const [delivery, ...rest] = await everyDelivery(storage, 'acct_a', webhook.id);
      assert.equal(rest, []);
      assert.is(delivery!.eventId, event.id);
      assert.is(delivery!.status, 'pending');
    }),
  );

  test(
    'agreements: a duplicate agreement or event id rejects and stores nothing',
    withStorage(factory, async (storage) => {
      const first = agreementRecord();
      const event = eventRecord();
      await storage.insertAgreement(first, [event]);
      await rejection(storage.insertAgreement({ ...first, name: 'Second' }, []));
      assert.is((await storage.getAgreement('acct_a', first.id))!.name, first.name);
      const second = agreementRecord();
      await rejection(storage.insertAgreement(second, [eventRecord(), event]));
      assert.is(await storage.getAgreement('acct_a', second.id), null);
    }),
  );

  test(
    'agreements: update applies the change, stores its events, resolves the stored agreement',
    withStorage(factory, async (storage, { db }) => {
      const agreement = agreementRecord();
      await storage.insertAgreement(agreement, []);
      let events: ReturnType<typeof signFirst>['events'] = [];
      const stored = await storage.updateAgreement('acct_a', agreement.id, (current) => {
        assert.equal(current, agreement);
        const result = signFirst(current);
        events = result.events;
        return result;
      });
      assert.is(stored!.status, 'signed');
      assert.equal(await storage.getAgreement('acct_a', agreement.id), stored);
      assert.equal(await db.event(events[0]!.id), events[0]);
    }),
  );

  test(
    'agreements: update of an absent agreement, or of another account, is null without calling change',
    withStorage(factory, async (storage) => {
      const agreement = agreementRecord();
      await storage.insertAgreement(agreement, []);
      let called = false;
      const change = (current: AgreementRecord) => ((called = true), signFirst(current));
      assert.is(await storage.updateAgreement('acct_b', agreement.id, change), null);
      assert.is(await storage.updateAgreement('acct_a', 'agr_unknown', change), null);
      assert.not.ok(called);
    }),
  );

  test(
    'agreements: a change that throws rejects with its error and changes nothing',
    withStorage(factory, async (storage) => {
      const agreement = agreementRecord();
      await storage.insertAgreement(agreement, []);
      const error = await rejection(
        storage.updateAgreement('acct_a', agreement.id, () => {
          throw new Error('already signed');
        }),
      );
      assert.is(error.message, 'already signed');
      const duplicate = eventRecord();
      await storage.publishEvents([duplicate]);
      await rejection(
        storage.updateAgreement('acct_a', agreement.id, (current) => ({ ...signFirst(current), events: [duplicate] })),
      );
      assert.equal(await storage.getAgreement('acct_a', agreement.id), agreement);
    }),
  );

  test(
    'agreements: concurrent updates of one agreement never interleave',
    withStorage(factory, async (storage) => {
      const agreement = agreementRecord({ name: '' });
      await storage.insertAgreement(agreement, []);
      await Promise.all(
        Array.from({ length: 25 }, (_, i) =>
          storage.updateAgreement('acct_a', agreement.id, (current) => ({
            agreement: { ...current, name: `${current.name}${i},` },
            events: [],
          })),
        ),
      );
      const names = (await storage.getAgreement('acct_a', agreement.id))!.name.split(',').filter(Boolean);
      assert.equal(
        names.map(Number).sort((a, b) => a - b),
        Array.from({ length: 25 }, (_, i) => i),
      );
    }),
  );

  test(
    'agreements: a returned agreement is a copy',
    withStorage(factory, async (storage) => {
      const agreement = agreementRecord();
      await storage.insertAgreement(agreement, []);
      const original = agreement.signers[0]!.firstName;
      const read = (await storage.getAgreement('acct_a', agreement.id))!;
      read.signers[0]!.firstName = 'Changed';
      agreement.signers[0]!.firstName = 'Changed too';
      assert.is((await storage.getAgreement('acct_a', agreement.id))!.signers[0]!.firstName, original);
    }),
  );

  test(
    'attachments: insert, get within the account, delete once; duplicates reject',
    withStorage(factory, async (storage) => {
      const attachment = attachmentRecord();
      await storage.insertAttachment(attachment);
      assert.equal(await storage.getAttachment('acct_a', attachment.id), attachment);
      assert.is(await storage.getAttachment('acct_b', attachment.id), null);
      await rejection(storage.insertAttachment({ ...attachment, name: 'other.png' }));
      assert.is(await storage.deleteAttachment('acct_b', attachment.id), false);
      assert.is(await storage.deleteAttachment('acct_a', attachment.id), true);
      assert.is(await storage.getAttachment('acct_a', attachment.id), null);
      assert.is(await storage.deleteAttachment('acct_a', attachment.id), false);
    }),
  );

  test(
    'blob references: documents, files and attachments, until removed',
    withStorage(factory, async (storage) => {
      const agreement = agreementRecord();
      const attachment = attachmentRecord();
      await storage.insertAgreement(agreement, []);
      await storage.insertAttachment(attachment);
      assert.ok(await storage.isBlobReferenced(agreement.documents[0]!.id));
      assert.ok(await storage.isBlobReferenced(attachment.id));
      assert.not.ok(await storage.isBlobReferenced('fsf_nobody'));
      await storage.deleteAttachment('acct_a', attachment.id);
      assert.not.ok(await storage.isBlobReferenced(attachment.id));
    }),
  );

  test(
    'outbox: publish makes one pending delivery per webhook of the account and type',
    withStorage(factory, async (storage, { db }) => {
      const match = webhookRecord();
      const otherType = webhookRecord({ type: 'agreement-signed' });
      const otherAccount = webhookRecord({ accountId: 'acct_b' });
      for (const webhook of [match, otherType, otherAccount]) await storage.insertWebhook(webhook);
      const event = eventRecord({ createdAt: T1 });
      const deliveries = await storage.publishEvents([event]);
      assert.is(deliveries.length, 1);
      const delivery = deliveries[0]!;
      assert.ok(/^whd_[0-9A-Za-z]{22}$/.test(delivery.id));
      assert.equal(delivery, {
        id: delivery.id,
        accountId: 'acct_a',
        webhookId: match.id,
        eventId: event.id,
        eventType: event.type,
        status: 'pending',
        attempts: [],
        attemptCount: 0,
        nextAttemptAt: T1,
        createdAt: T1,
        leaseOwner: null,
        leaseUntil: null,
        orderingKey: null,
        redeliverQueued: false,
      });
      assert.equal(await storage.getDelivery('acct_a', delivery.id), delivery);
      assert.is(await storage.getDelivery('acct_b', delivery.id), null);
      assert.equal(await db.event(event.id), event);
      assert.equal(await everyDelivery(storage, 'acct_a', otherType.id), []);
    }),
  );

  test(
    'outbox: a batch holding an event already stored rejects and stores nothing',
    withStorage(factory, async (storage, { db }) => {
      const webhook = webhookRecord();
      await storage.insertWebhook(webhook);
      const stored = eventRecord();
      await storage.publishEvents([stored]);
      const fresh = eventRecord();
      await rejection(storage.publishEvents([fresh, stored]));
      assert.is(await db.event(fresh.id), null);
      assert.is((await everyDelivery(storage, 'acct_a', webhook.id)).length, 1);
    }),
  );

  test(
    'outbox: deliveries are listed newest first',
    withStorage(factory, async (storage) => {
      const webhook = webhookRecord();
      await storage.insertWebhook(webhook);
      for (const createdAt of [T1, T3, T2]) await storage.publishEvents([eventRecord({ createdAt })]);
      assert.equal(
        (await everyDelivery(storage, 'acct_a', webhook.id)).map((d) => d.createdAt),
        [T3, T2, T1],
      );
      assert.equal(await everyDelivery(storage, 'acct_b', webhook.id), []);
    }),
  );

  test(
    'outbox: claims take due, unleased deliveries, oldest due first, up to the limit',
    withStorage(factory, async (storage) => {
      const webhook = webhookRecord();
      await storage.insertWebhook(webhook);
      const [late] = await storage.publishEvents([eventRecord({ createdAt: T2 })]);
      const [early] = await storage.publishEvents([eventRecord({ createdAt: T1 })]);
      await storage.publishEvents([eventRecord({ createdAt: T3 })]);
      const claimed = await storage.claimDeliveries({ now: T2, leaseUntil: T3, limit: 1, owner: 'w1' });
      assert.equal(
        claimed.map((c) => c.delivery.id),
        [early!.id],
      );
      assert.equal(claimed[0]!.webhook, webhook);
      assert.is(claimed[0]!.event.id, early!.eventId);
      assert.is(claimed[0]!.delivery.leaseOwner, 'w1');
      assert.is(claimed[0]!.delivery.leaseUntil, T3);
      const next = await storage.claimDeliveries({ now: T2, leaseUntil: T3, limit: 10, owner: 'w2' });
      assert.equal(
        next.map((c) => c.delivery.id),
        [late!.id],
        'the leased one and the one not yet due stay',
      );
    }),
  );

  test(
    'outbox: a lease that ended can be claimed again; concurrent claims never share a delivery',
    withStorage(factory, async (storage) => {
      const webhook = webhookRecord();
      await storage.insertWebhook(webhook);
      for (let i = 0; i < 6; i++) await storage.publishEvents([eventRecord()]);
      const claims = await Promise.all(
        ['a', 'b', 'c'].map((owner) => storage.claimDeliveries({ now: T0, leaseUntil: T1, limit: 3, owner })),
      );
      const ids = claims.flat().map((c) => c.delivery.id);
      assert.is(ids.length, 6);
      assert.is(new Set(ids).size, 6);
      assert.equal(
        await storage.claimDeliveries({ now: T1, leaseUntil: T2, limit: 10, owner: 'd' }),
        [],
        'a lease ending now still holds',
      );
      assert.is((await storage.claimDeliveries({ now: T2, leaseUntil: T3, limit: 10, owner: 'd' })).length, 6);
    }),
  );

  test(
    'outbox: an attempt is recorded only by the lease holder, and releases the lease',
    withStorage(factory, async (storage) => {
      const { delivery } = await oneDelivery(storage);
      await storage.claimDeliveries({ now: T0, leaseUntil: T1, limit: 1, owner: 'w1' });
      const attempt = { at: T0, statusCode: 503, error: null, durationMs: 12 };
      assert.equal(
        await storage.recordAttempt({
          id: delivery.id,
          owner: 'w2',
          attempt,
          outcome: { status: 'pending', nextAttemptAt: T2 },
        }),
        notRecorded,
      );
      assert.equal(
        await storage.recordAttempt({
          id: delivery.id,
          owner: 'w1',
          attempt,
          outcome: { status: 'pending', nextAttemptAt: T2 },
        }),
        recorded(),
      );
      const stored = (await storage.getDelivery('acct_a', delivery.id))!;
      assert.equal(stored.attempts, [attempt]);
      assert.equal(
        [stored.status, stored.nextAttemptAt, stored.leaseOwner, stored.leaseUntil],
        ['pending', T2, null, null],
      );
      assert.equal(
        await storage.recordAttempt({
          id: delivery.id,
          owner: 'w1',
          attempt,
          outcome: { status: 'succeeded', nextAttemptAt: null },
        }),
        notRecorded,
        'lease released',
      );
      assert.equal(
        await storage.recordAttempt({
          id: 'whd_unknown',
          owner: 'w1',
          attempt,
          outcome: { status: 'succeeded', nextAttemptAt: null },
        }),
        notRecorded,
      );
    }),
  );

  test(
    'outbox: deleting a webhook cancels its pending deliveries and no others',
    withStorage(factory, async (storage) => {
      const { webhook, delivery: done } = await oneDelivery(storage);
      await storage.claimDeliveries({ now: T0, leaseUntil: T1, limit: 1, owner: 'w1' });
      await storage.recordAttempt({
        id: done.id,
        owner: 'w1',
        attempt: { at: T0, statusCode: 200, error: null, durationMs: 3 },
        outcome: { status: 'succeeded', nextAttemptAt: null },
      });
      const [pending] = await storage.publishEvents([eventRecord()]);
      await storage.claimDeliveries({ now: T0, leaseUntil: T1, limit: 1, owner: 'w1' });
      assert.is(await storage.deleteWebhook('acct_a', webhook.id), true);
      const cancelled = (await storage.getDelivery('acct_a', pending!.id))!;
      assert.equal([cancelled.status, cancelled.nextAttemptAt, cancelled.leaseOwner], ['cancelled', null, null]);
      assert.is((await storage.getDelivery('acct_a', done.id))!.status, 'succeeded');
      const attempt = { at: T0, statusCode: 200, error: null, durationMs: 3 };
      assert.equal(
        await storage.recordAttempt({
          id: pending!.id,
          owner: 'w1',
          attempt,
          outcome: { status: 'succeeded', nextAttemptAt: null },
        }),
        notRecorded,
      );
      assert.equal(await storage.claimDeliveries({ now: T3, leaseUntil: T3, limit: 10, owner: 'w1' }), []);
    }),
  );

  test(
    'outbox: redeliver makes a delivery pending again and keeps its attempts',
    withStorage(factory, async (storage) => {
      const { delivery } = await oneDelivery(storage);
      await storage.claimDeliveries({ now: T0, leaseUntil: T1, limit: 1, owner: 'w1' });
      const attempt = { at: T0, statusCode: 410, error: null, durationMs: 5 };
      await storage.recordAttempt({
        id: delivery.id,
        owner: 'w1',
        attempt,
        outcome: { status: 'failed', nextAttemptAt: null },
      });
      assert.is(await storage.redeliver('acct_b', delivery.id, T2), null);
      assert.is(await storage.redeliver('acct_a', 'whd_unknown', T2), null);
      const again = (await storage.redeliver('acct_a', delivery.id, T2))!;
      assert.equal(
        [again.status, again.nextAttemptAt, again.attempts, again.leaseOwner],
        ['pending', T2, [attempt], null],
      );
      assert.equal(await storage.getDelivery('acct_a', delivery.id), again);
      assert.equal(
        (await storage.claimDeliveries({ now: T2, leaseUntil: T3, limit: 5, owner: 'w2' })).map((c) => c.delivery.id),
        [delivery.id],
      );
    }),
  );

  reopenable(test, factory)(
    'reopen keeps agreements, events, attachments, deliveries with their attempts and leases',
    withStorage(factory, async (storage, { swap, db }) => {
      const { webhook, event, delivery } = await oneDelivery(storage);
      const [leased] = await storage.publishEvents([eventRecord({ createdAt: T1 })]);
      await storage.claimDeliveries({ now: T1, leaseUntil: T2, limit: 1, owner: 'w1' });
      const attempt = { at: T1, statusCode: 500, error: null, durationMs: 9 };
      assert.ok(
        (
          await storage.recordAttempt({
            id: delivery.id,
            owner: 'w1',
            attempt,
            outcome: { status: 'pending', nextAttemptAt: T3 },
          })
        ).recorded,
      );
      assert.equal(
        (await storage.claimDeliveries({ now: T1, leaseUntil: T2, limit: 1, owner: 'w2' })).map((c) => c.delivery.id),
        [leased!.id],
      );
      const agreement = agreementRecord();
      await storage.insertAgreement(agreement, []);
      const signed = await storage.updateAgreement('acct_a', agreement.id, (current) => signFirst(current));
      const attachment = attachmentRecord();
      await storage.insertAttachment(attachment);
      const before = await Promise.all([
        storage.getDelivery('acct_a', delivery.id),
        storage.getDelivery('acct_a', leased!.id),
      ]);

      const reopened = await swap();
      assert.equal(await reopened.getAgreement('acct_a', agreement.id), signed);
      assert.equal(await db.event(event.id), event);
      assert.equal(await reopened.getAttachment('acct_a', attachment.id), attachment);
      assert.equal(
        await Promise.all([reopened.getDelivery('acct_a', delivery.id), reopened.getDelivery('acct_a', leased!.id)]),
        before,
      );
      assert.equal((await everyDelivery(reopened, 'acct_a', webhook.id)).length, 2);
      assert.equal(
        await reopened.claimDeliveries({ now: T1, leaseUntil: T3, limit: 5, owner: 'w3' }),
        [],
        'one not due, one leased',
      );
      assert.is((await reopened.getDelivery('acct_a', leased!.id))!.leaseOwner, 'w2');
      assert.ok(await reopened.isBlobReferenced(agreement.documents[0]!.id));
    }),
  );

  test.run();
}

recordTests(memoryStorageFactory());
recordTests(fsStorageFactory('fs'));
recordTests(fsStorageFactory('fs, compacting often', 2048));

const fsOnly = suite('fs records: where the contract is silent');
const factory = fsStorageFactory('fs');

fsOnly(
  'a delivery redelivered after its webhook was deleted is cancelled by the next claim, not handed out',
  withStorage(factory, async (storage) => {
    const { webhook, delivery } = await oneDelivery(storage);
    await storage.deleteWebhook('acct_a', webhook.id);
    await storage.redeliver('acct_a', delivery.id, T1);
    assert.equal(await storage.claimDeliveries({ now: T2, leaseUntil: T3, limit: 5, owner: 'w1' }), []);
    assert.is((await storage.getDelivery('acct_a', delivery.id))!.status, 'cancelled');
  }),
);

// The memory adapter stores the first of two events with one id in a batch before it rejects.
fsOnly(
  'a batch with the same event twice rejects and stores nothing',
  withStorage(factory, async (storage, { db }) => {
    const webhook = webhookRecord();
    await storage.insertWebhook(webhook);
    const event = eventRecord();
    await rejection(storage.publishEvents([event, { ...event }]));
    assert.is(await db.event(event.id), null);
    assert.equal(await everyDelivery(storage, 'acct_a', webhook.id), []);
  }),
);

fsOnly(
  'event data that JSON cannot hold rejects the whole batch and stores nothing',
  withStorage(factory, async (storage, { db }) => {
    await storage.insertWebhook(webhookRecord());
    const fine = eventRecord();
    const broken = eventRecord({ data: { amount: 10n } });
    const error = await rejection(storage.publishEvents([fine, broken]));
    assert.instance(error, TypeError);
    assert.is(await db.event(fine.id), null);
    const [delivery] = await storage.publishEvents([eventRecord()]);
    assert.is((delivery as DeliveryRecord).status, 'pending', 'the store still writes');
  }),
);

// One process per directory: the claim of a process that ended can complete nothing, so a restart frees its key.
fsOnly(
  'an Idempotency-Key claim is not written to disk: after a reopen (a restart) the key is free at once',
  withStorage(factory, async (storage, { swap }) => {
    const claim = { accountId: 'acct_a', key: 'k', token: 'first', fingerprint: null, now: T0, leaseUntil: T3 };
    assert.is(await storage.claimIdempotencyKey(claim), null);
    assert.is((await storage.claimIdempotencyKey({ ...claim, token: 'second' }))!.status, 'pending');
    const reopened = await swap();
    assert.is(await reopened.claimIdempotencyKey({ ...claim, token: 'after' }), null);
  }),
);

fsOnly.run();
