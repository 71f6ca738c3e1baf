import { createHash } from 'node:crypto';
import { PNG } from 'pngjs';
import { testDownloads } from '../helpers/download.js';
import type { Test } from 'uvu';
import * as assert from 'uvu/assert';
import { memoryBlobs } from '../../adapters/memory/index.js';
import { createAgreementService, eventData } from '../../src/domain/agreements.js';
import { isPortalError } from '../../src/errors.js';
import type { Storage, WebhookCall, WebhookTransport } from '../../src/ports.js';
import { silentLogger } from '../../src/shared/logger.js';
import { createWebhookWorker } from '../../src/webhooks/worker.js';
import { newId } from '../../src/shared/ids.js';
import {
  agreementSummary,
  type AgreementRecord,
  type AuditAction,
  type EventRecord,
  type PendingMail,
  type SignerIdentityRecord,
} from '../../src/records.js';
import { newPersonalKey, verifyTrail, withStep } from '../../src/domain/audit-trail.js';
import { erasePersonalData, erasedData } from '../../src/domain/signing-rules.js';
import type { StorageFactory } from './types.js';
import { T0, agreementRecord, webhookRecord } from './fixtures.js';

const at = (second: number) => `2026-01-01T00:00:${String(second).padStart(2, '0')}+00:00`;

/** The ids of every page of the account's agreements, `limit` at a time, each page after the last id of the one before. */
async function pagesOf(storage: Storage, accountId: string, limit: number): Promise<string[][]> {
  const pages: string[][] = [];
  let after: string | undefined;
  for (;;) {
    const page = (await storage.listAgreements(accountId, { limit, after }))!;
    if (page.length === 0) return pages;
    pages.push(page.map((agreement) => agreement.id));
    after = page.at(-1)!.id;
  }
}
import { reopenable } from './reopen.js';
import { withStorage } from './with-storage.js';
import { everyDelivery } from '../helpers/every-delivery.js';

function eventFor(agreement: AgreementRecord, type: string): EventRecord {
  const { accountId: _accountId, ...data } = agreement;
  return { id: newId('evt'), accountId: agreement.accountId, type, createdAt: T0, data };
}

/** The change a signature makes: one signer signed, `signed` once all have. */
function signOne(signerId: string) {
  return (current: AgreementRecord) => {
    const signers = current.signers.map((signer) =>
      signer.id === signerId
        ? { ...signer, signature: 'data:image/png;base64,AA==', signatureHash: 'd'.repeat(64), signedAt: T0 }
        : signer,
    );
    const status = signers.every((signer) => signer.signedAt !== null) ? ('signed' as const) : current.status;
    return { agreement: { ...current, signers, status }, events: [] as EventRecord[] };
  };
}

/**
 * A PNG signature image of noise, `side` × `side`, as a data-URL, written as the portal redraws
 * images (so it is kept byte for byte): 500 × 500 is close to 1 MiB, the largest accepted.
 */
function noisyPngDataUrl(side: number): string {
  const image = new PNG({ width: side, height: side });
  let seed = 7;
  for (let i = 0; i < image.data.length; i++) image.data[i] = (seed = (seed * 1103515245 + 12345) >>> 0) >>> 24;
  return `data:image/png;base64,${PNG.sync.write(image).toString('base64')}`;
}

/** Polls `check` until it holds: for calls a worker makes on its own after a poke. */
async function until(check: () => boolean, what: string, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

export function agreementStorageTests(test: Test, factory: StorageFactory): void {
  test(
    'agreements: with 1 MiB signature images, agreement-created and agreement-signed go out at once as calls under 20 KiB; the agreement keeps its images',
    withStorage(factory, async (storage, { db }) => {
      await storage.insertWebhook(webhookRecord({ type: 'agreement-created' }));
      await storage.insertWebhook(webhookRecord({ type: 'agreement-signed' }));
      const calls: WebhookCall[] = [];
      const transport: WebhookTransport = {
        send: async (call) => (calls.push(call), { statusCode: 204, headers: {}, error: null }),
      };
      // The worker never ticks: a call can only come from the service's notify, as in a portal.
      const worker = createWebhookWorker({
        storage,
        transport,
        clock: () => new Date(),
        logger: silentLogger,
        tick: '0 0 0 1 1 *',
        timeoutMs: 10_000,
        concurrency: 8,
        retrySchedule: [5],
      });
      const blobs = memoryBlobs();
      const service = createAgreementService({
        storage,
        blobs,
        clock: () => new Date(),
        notify: () => worker.poke(),
        downloads: testDownloads(storage, blobs),
      });
      const image = noisyPngDataUrl(500);
      assert.ok(image.length > 1_200_000, `an image close to 1 MiB: ${image.length} characters`);
      try {
        const created = await service.create('acct_a', async () => ({
          name: 'Lease 2026',
          signerName: 'Ann Owner',
          signerSignatureData: image,
          signers: [{ firstName: 'Bo', lastName: 'Lee', email: 'bo@example.com', shouldIdentify: false }],
          documents: [{ id: newId('agd'), documentName: 'lease.pdf', fileSize: 1, fileHash: 'f'.repeat(64) }],
        }));
        await until(() => calls.length === 1, 'the agreement-created call');
        const signed = await service.sign('acct_a', created.id, created.signers[0]!.id, { signature: image });
        await until(() => calls.length === 2, 'the agreement-signed call');
        const bodies = calls.map((call) => JSON.parse(call.body));
        assert.equal(
          bodies.map((body) => body.type),
          ['agreement-created', 'agreement-signed'],
        );
        for (const call of calls)
          assert.ok(Buffer.byteLength(call.body) < 20 * 1024, `a call body of ${Buffer.byteLength(call.body)} bytes`);
        assert.equal(bodies[0].data, eventData(created));
        assert.equal(bodies[1].data, eventData(signed));
        assert.is(bodies[1].data.signers[0].signatureHash, signed.signers[0]!.signatureHash, 'the hash is kept');
        const event = (await db.event(bodies[1].id))!;
        assert.ok(JSON.stringify(event.data).length < 20 * 1024, 'the stored event is thin too');
        const stored = (await storage.getAgreement('acct_a', created.id))!;
        assert.equal(
          [stored.signerSignature, stored.signers[0]!.signature],
          [image, image],
          'the agreement keeps both images',
        );
      } finally {
        await worker.stop();
      }
    }),
  );

  test(
    'agreements: insert then get returns an equal record; another account or an unknown id is null',
    withStorage(factory, async (storage) => {
      const agreement = agreementRecord();
      await storage.insertAgreement(agreement, []);
      assert.equal(await storage.getAgreement('acct_a', agreement.id), agreement);
      assert.is(await storage.getAgreement('acct_b', agreement.id), null);
      assert.is(await storage.getAgreement('acct_a', 'agr_unknown'), null);
    }),
  );

  test(
    'agreements: the events given with an insert are stored, and fan out to the webhooks of their type',
    withStorage(factory, async (storage, { db }) => {
      const hook = webhookRecord({ type: 'agreement-created' });
      const otherType = webhookRecord({ type: 'customer-created' });
      await storage.insertWebhook(hook);
      await storage.insertWebhook(otherType);
      const agreement = agreementRecord();
      const event = eventFor(agreement, 'agreement-created');
      await storage.insertAgreement(agreement, [event]);
      assert.equal(await db.event(event.id), event);
      assert.is((await db.event(event.id))!.accountId, 'acct_a', 'stored under its own account');
      const deliveries = await everyDelivery(storage, 'acct_a', hook.id);
      assert.is(deliveries.length, 1);
      assert.is(deliveries[0]!.eventId, event.id);
      assert.is(deliveries[0]!.status, 'pending');
      assert.equal(await everyDelivery(storage, 'acct_a', otherType.id), []);
    }),
  );

  test(
    "agreements: inserting an id twice rejects, keeps the first and stores none of the second's events",
    withStorage(factory, async (storage, { db }) => {
      const agreement = agreementRecord();
      await storage.insertAgreement(agreement, []);
      const event = eventFor(agreement, 'agreement-created');
      let rejected = false;
      await storage
        .insertAgreement({ ...agreement, name: 'Second' }, [event])
        .catch((error) => (rejected = isPortalError(error, 'RECORD_EXISTS')));
      assert.ok(rejected);
      assert.is((await storage.getAgreement('acct_a', agreement.id))!.name, agreement.name);
      assert.is(await db.event(event.id), null);
    }),
  );

  test(
    'agreements: records go in and come out as copies, nested signers and documents too',
    withStorage(factory, async (storage) => {
      const agreement = agreementRecord();
      const expected = structuredClone(agreement);
      await storage.insertAgreement(agreement, []);
      agreement.signers[0]!.email = 'changed@example.com';
      agreement.documents.pop();
      const read = (await storage.getAgreement('acct_a', agreement.id))!;
      read.signers[1]!.signedAt = T0;
      read.documents[0]!.fileSize = 1;
      read.status = 'signed';
      assert.equal(await storage.getAgreement('acct_a', agreement.id), expected);
    }),
  );

  test(
    'agreements: updateAgreement stores what the change returns, with its events, and resolves it',
    withStorage(factory, async (storage, { db }) => {
      const agreement = agreementRecord();
      await storage.insertAgreement(agreement, []);
      let seen: AgreementRecord | undefined;
      const event = eventFor(agreement, 'agreement-signed');
      const updated = await storage.updateAgreement('acct_a', agreement.id, (current) => {
        seen = structuredClone(current);
        const signed = signOne(current.signers[0]!.id)(current).agreement;
        return { agreement: signed, events: [event] };
      });
      assert.equal(seen, agreement);
      assert.ok(updated);
      assert.is(updated!.signers[0]!.signedAt, T0);
      assert.is(updated!.signers[1]!.signedAt, null);
      assert.equal(await storage.getAgreement('acct_a', agreement.id), updated);
      assert.equal(await db.event(event.id), event);
    }),
  );

  test(
    'agreements: the signing fields and the audit trail are stored whole; an update appends entries after those kept',
    withStorage(factory, async (storage) => {
      const step = (action: AuditAction, at: string) => ({
        at,
        action,
        actor: 'account:acct_a',
        signerId: null,
        ip: '203.0.113.9',
        userAgent: 'Tëst/1.0',
        documents: [{ id: 'agd_x', fileHash: 'e'.repeat(64) }],
        detail: null,
      });
      const agreement = withStep(
        agreementRecord({ signingOrder: 'sequential', expiresAt: '2026-02-01T00:00:00+00:00', locale: 'fr-CA' }),
        step('created', T0),
      );
      agreement.signers[0]!.signingLinkId = 'sgl_first';
      await storage.insertAgreement(agreement, []);
      assert.equal(await storage.getAgreement('acct_a', agreement.id), agreement);
      const updated = await storage.updateAgreement('acct_a', agreement.id, (current) => {
        const signers = current.signers.map((signer, i) =>
          i === 1
            ? {
                ...signer,
                viewedAt: T0,
                declinedAt: T0,
                declineReason: 'Nicht mit mir — "no"',
                signingLinkId: 'sgl_second',
              }
            : signer,
        );
        const viewed = withStep({ ...current, signers }, step('viewed', T0));
        return {
          agreement: withStep({ ...viewed, closedAt: T0, closedReason: 'declined' }, step('declined', T0)),
          events: [],
        };
      });
      assert.is(updated!.audit.length, 3);
      const read = (await storage.getAgreement('acct_a', agreement.id))!;
      assert.equal(read, updated);
      assert.ok(verifyTrail(read), 'the trail as stored vouches for the agreement');
      assert.equal(read.auditHead, { hash: read.audit[2]!.hash, length: 3 }, 'the head is kept with the agreement');
      assert.equal(
        [read.closedReason, read.signers[1]!.declineReason, read.signers[1]!.signingLinkId],
        ['declined', 'Nicht mit mir — "no"', 'sgl_second'],
      );
      const listed = (await storage.listAgreements('acct_a', { limit: 5 }))![0]!;
      assert.equal(
        [listed.signingOrder, listed.expiresAt, listed.closedReason, listed.signers[1]!.declinedAt],
        ['sequential', '2026-02-01T00:00:00+00:00', 'declined', T0],
      );
      assert.not.ok('audit' in listed, 'a list holds no trail');
    }),
  );

  test(
    'agreements: the trail is append-only; an update that rewrites, removes or reorders an entry is refused and changes nothing',
    withStorage(factory, async (storage) => {
      const step = (action: AuditAction) => ({
        at: T0,
        action,
        actor: 'system',
        signerId: null,
        ip: null,
        userAgent: null,
        documents: [],
        detail: null,
      });
      const agreement = withStep(withStep(agreementRecord(), step('created')), step('reminder'));
      await storage.insertAgreement(agreement, []);
      const rewrites: [string, (current: AgreementRecord) => AgreementRecord][] = [
        [
          'an entry edited',
          (current) => ({ ...current, audit: [{ ...current.audit[0]!, ip: '198.51.100.1' }, current.audit[1]!] }),
        ],
        [
          'the last entry removed',
          (current) => ({
            ...current,
            audit: current.audit.slice(0, 1),
            auditHead: { hash: current.audit[0]!.hash, length: 1 },
          }),
        ],
        ['two entries swapped', (current) => ({ ...current, audit: [current.audit[1]!, current.audit[0]!] })],
      ];
      for (const [what, rewrite] of rewrites) {
        const refused = await storage
          .updateAgreement('acct_a', agreement.id, (current) => ({ agreement: rewrite(current), events: [] }))
          .then(
            () => null,
            (error: Error) => error,
          );
        assert.match(refused?.message ?? 'accepted', /append-only/, what);
        assert.equal(await storage.getAgreement('acct_a', agreement.id), agreement, `${what}: nothing changed`);
      }
    }),
  );

  test(
    "agreements: eraseAgreement rewrites the trail's personal fields and that agreement's events only, atomically; anything else of the trail is refused",
    withStorage(factory, async (storage, { db }) => {
      const step = (action: AuditAction) => ({
        at: T0,
        action,
        actor: 'ags_x',
        signerId: null,
        ip: '203.0.113.77',
        userAgent: 'Private/1.0',
        documents: [],
        detail: action === 'declined' ? 'private reason' : null,
      });
      const opened = withStep(agreementRecord({ personalKey: newPersonalKey() }), step('created'));
      const closed = withStep({ ...opened, closedAt: T0, closedReason: 'declined' }, step('declined'));
      const other = agreementRecord();
      const ownEvent = eventFor(closed, 'agreement-declined');
      ownEvent.orderingKey = closed.id;
      const otherEvent = { ...eventFor(other, 'agreement-created'), orderingKey: other.id };
      // Another account's event that names the same agreement id (a hostile tenant's own publish).
      const foreign = { ...eventFor(closed, 'agreement-created'), accountId: 'acct_b', orderingKey: closed.id };
      await storage.insertAgreement(closed, [ownEvent]);
      await storage.insertAgreement(other, [otherEvent]);
      await storage.publishEvents([foreign]);
      assert.ok(verifyTrail((await storage.getAgreement('acct_a', closed.id))!));

      const refused = await storage
        .eraseAgreement(
          'acct_a',
          closed.id,
          (current) => ({
            ...current,
            audit: [{ ...current.audit[0]!, at: '2020-01-01T00:00:00+00:00' }, current.audit[1]!],
          }),
          (data) => erasedData(data, closed.id),
        )
        .then(
          () => null,
          (error: Error) => error,
        );
      assert.match(refused?.message ?? 'accepted', /append-only/, 'a field that is not personal stays as it was');
      assert.equal(await storage.getAgreement('acct_a', closed.id), closed, 'nothing changed');
      assert.equal(await db.event(ownEvent.id), ownEvent, 'nor its event');

      const erase = (current: AgreementRecord) =>
        erasePersonalData(current, new Date(T0), 'account:acct_a', { ip: null, userAgent: null });
      assert.is(
        await storage.eraseAgreement('acct_b', closed.id, erase, (data) => data),
        null,
        'not from another account',
      );
      const erased = (await storage.eraseAgreement('acct_a', closed.id, erase, (data) => erasedData(data, closed.id)))!;
      const read = (await storage.getAgreement('acct_a', closed.id))!;
      assert.equal(read, erased);
      assert.ok(verifyTrail(read), 'the erased trail verifies');
      assert.equal(
        read.audit.map((entry) => entry.hash).slice(0, 2),
        closed.audit.map((entry) => entry.hash),
      );
      assert.equal(
        read.audit.map((entry) => entry.action),
        ['created', 'declined', 'erased'],
      );
      assert.equal(
        read.audit.slice(0, 2).map((entry) => [entry.ip, entry.userAgent, entry.detail]),
        [
          ['[erased]', '[erased]', null],
          ['[erased]', '[erased]', '[erased]'],
        ],
      );
      assert.equal(
        read.signers.map((signer) => [signer.firstName, signer.email]),
        closed.signers.map(() => ['[erased]', '[erased]']),
      );
      const ownData = (await db.event(ownEvent.id))!.data as { signers: { email: string }[] };
      assert.equal(
        ownData.signers.map((signer) => signer.email),
        closed.signers.map(() => '[erased]'),
      );
      assert.equal(await db.event(otherEvent.id), otherEvent, "another agreement's event stays");
      assert.equal(await db.event(foreign.id), foreign, "another account's event stays");
      assert.is(await storage.eraseAgreement('acct_a', 'agr_missingmissingmissing12', erase, (data) => data), null);
    }),
  );

  test(
    "agreements: verified does not hold once the evidence changes under the trail (a signature image, an e-mail, a document's hash, the head)",
    withStorage(factory, async (storage) => {
      const step = (action: AuditAction) => ({
        at: T0,
        action,
        actor: 'system',
        signerId: null,
        ip: null,
        userAgent: null,
        documents: [],
        detail: null,
      });
      const signature = 'data:image/png;base64,iVBORw0KGgo=';
      const base = agreementRecord();
      base.signers[0] = {
        ...base.signers[0]!,
        signature,
        signatureHash: createHash('sha256').update(signature).digest('hex'),
        signedAt: T0,
      };
      const edits: [string, (record: AgreementRecord) => AgreementRecord][] = [
        [
          'a stored signature image',
          (record) => ({
            ...record,
            signers: record.signers.map((one, i) =>
              i === 0 ? { ...one, signature: 'data:image/png;base64,AAAA' } : one,
            ),
          }),
        ],
        [
          "a signer's e-mail",
          (record) => ({
            ...record,
            signers: record.signers.map((one, i) => (i === 1 ? { ...one, email: 'mallory@example.com' } : one)),
          }),
        ],
        [
          "a document's hash",
          (record) => ({
            ...record,
            documents: record.documents.map((one, i) => (i === 0 ? { ...one, fileHash: 'f'.repeat(64) } : one)),
          }),
        ],
        ['the outcome', (record) => ({ ...record, status: 'signed' })],
        [
          'the head, as if the last entry were gone',
          (record) => ({ ...record, auditHead: { hash: record.audit[0]!.hash, length: 1 } }),
        ],
      ];
      for (const [what, edit] of edits) {
        const signers = base.signers.map((one) => ({ ...one, id: newId('ags') }));
        const documents = base.documents.map((one) => ({ ...one, id: newId('agd') }));
        const agreement = withStep(
          withStep({ ...base, id: newId('agr'), signers, documents }, step('created')),
          step('signed'),
        );
        await storage.insertAgreement(agreement, []);
        assert.ok(verifyTrail((await storage.getAgreement('acct_a', agreement.id))!), `${what}: verified before`);
        // Through the store's own port, below the rules: what an edit of the backing store does.
        await storage.updateAgreement('acct_a', agreement.id, (current) => ({ agreement: edit(current), events: [] }));
        assert.not.ok(
          verifyTrail((await storage.getAgreement('acct_a', agreement.id))!),
          `${what}: not verified after`,
        );
      }
    }),
  );

  test(
    'agreements: agreementsDue lists the open agreements whose expiry or reminder has come, the earliest first, and no other',
    withStorage(factory, async (storage) => {
      const at = (minute: number) => `2026-03-01T10:${String(minute).padStart(2, '0')}:00+00:00`;
      const expired = agreementRecord({ expiresAt: at(5) });
      const reminded = agreementRecord({ accountId: 'acct_b', nextReminderAt: at(3) });
      const both = agreementRecord({ expiresAt: at(8), nextReminderAt: at(1) });
      const later = agreementRecord({ expiresAt: at(30), nextReminderAt: at(40) });
      const closed = agreementRecord({ expiresAt: at(2), closedAt: at(2), closedReason: 'declined' });
      const signed = agreementRecord({ nextReminderAt: at(2), status: 'signed' });
      const plain = agreementRecord();
      for (const agreement of [expired, reminded, both, later, closed, signed, plain])
        await storage.insertAgreement(agreement, []);
      assert.equal(await storage.agreementsDue(at(10), 10, 10), [
        { accountId: 'acct_a', id: both.id },
        { accountId: 'acct_b', id: reminded.id },
        { accountId: 'acct_a', id: expired.id },
      ]);
      assert.equal((await storage.agreementsDue(at(10), 2, 2)).length, 2);
      assert.equal(await storage.agreementsDue(at(0), 10, 10), []);
      // An update moves an agreement out (closed) or later (its next round).
      await storage.updateAgreement('acct_a', both.id, (current) => ({
        agreement: { ...current, nextReminderAt: at(50), expiresAt: at(45) },
        events: [],
      }));
      await storage.updateAgreement('acct_a', expired.id, (current) => ({
        agreement: { ...current, closedAt: at(6), closedReason: 'expired' },
        events: [],
      }));
      assert.equal(await storage.agreementsDue(at(10), 10, 10), [{ accountId: 'acct_b', id: reminded.id }]);
      assert.equal(
        (await storage.agreementsDue(at(45), 10, 10)).map((due) => due.id),
        [reminded.id, later.id, both.id],
      );
    }),
  );

  test(
    'agreements: agreementsDue with unscheduled adds the open agreements with no reminder, after those due, and only then',
    withStorage(factory, async (storage) => {
      const at = (minute: number) => `2026-03-01T10:${String(minute).padStart(2, '0')}:00+00:00`;
      const due = agreementRecord({ expiresAt: at(5), nextReminderAt: at(30) });
      const none = agreementRecord({ createdAt: at(0) });
      const expiringLater = agreementRecord({ expiresAt: at(50) });
      const closed = agreementRecord({ closedAt: at(1), closedReason: 'declined' });
      const scheduled = agreementRecord({ nextReminderAt: at(40) });
      for (const agreement of [due, none, expiringLater, closed, scheduled])
        await storage.insertAgreement(agreement, []);
      assert.equal(
        (await storage.agreementsDue(at(10), 10, 10)).map((one) => one.id),
        [due.id],
      );
      const all = (await storage.agreementsDue(at(10), 10, 10, true)).map((one) => one.id);
      assert.is(all[0], due.id, 'the due first');
      assert.equal(
        all.slice(1).sort(),
        [none.id, expiringLater.id].sort(),
        'then the open ones with no reminder, not the closed or scheduled',
      );
      await storage.updateAgreement('acct_a', none.id, (current) => ({
        agreement: { ...current, nextReminderAt: at(20) },
        events: [],
      }));
      assert.not.ok(
        (await storage.agreementsDue(at(10), 10, 10, true)).some((one) => one.id === none.id),
        'scheduled, it is no longer listed',
      );
    }),
  );

  test(
    "agreements: mail owed and a signer's identity are kept as given; agreementsDue lists an agreement whose mail is due, open or closed, until it owes none",
    withStorage(factory, async (storage) => {
      const at = (minute: number) => `2026-03-01T10:${String(minute).padStart(2, '0')}:00+00:00`;
      const mail = (id: string, nextAttemptAt: string): PendingMail => ({
        id,
        kind: 'signing-invitation',
        signerId: 'ags_x',
        link: { id: 'sgl_y', expires: 1_900_000_000 },
        codeId: null,
        baseUrl: 'https://portal.example.com/v1',
        attempts: 1,
        nextAttemptAt,
        lastError: '550 mailbox unavailable',
      });
      const open = agreementRecord({ mail: [mail('sgm_a', at(5)), mail('sgm_b', at(2))] });
      const closed = agreementRecord({ closedAt: at(1), closedReason: 'declined', mail: [mail('sgm_c', at(4))] });
      const later = agreementRecord({ mail: [mail('sgm_d', at(30))] });
      const none = agreementRecord();
      const identity: SignerIdentityRecord = {
        linkId: 'sgl_z',
        accessCode: 'scrypt$c2FsdA$aGFzaA',
        tries: 2,
        locked: false,
        code: { id: 'sgc_q', expiresAt: at(9) },
        verified: null,
        sends: [at(1)],
      };
      open.signers[0] = { ...open.signers[0]!, signingLinkId: 'sgl_z', identity };
      for (const agreement of [open, closed, later, none]) await storage.insertAgreement(agreement, []);
      const read = (await storage.getAgreement('acct_a', open.id))!;
      assert.equal(read.mail, open.mail);
      assert.equal(read.signers[0]!.identity, identity);
      assert.equal(
        (await storage.agreementsDue(at(10), 10, 10)).map((one) => one.id),
        [open.id, closed.id],
        'by the earliest mail due, the closed one too',
      );
      await storage.updateAgreement('acct_a', closed.id, (current) => ({
        agreement: { ...current, mail: [] },
        events: [],
      }));
      await storage.updateAgreement('acct_a', open.id, (current) => ({
        agreement: { ...current, mail: [mail('sgm_a', at(20))] },
        events: [],
      }));
      assert.equal(await storage.agreementsDue(at(10), 10, 10), [], 'sent, or due later: not listed');
      assert.equal(
        (await storage.agreementsDue(at(30), 10, 10)).map((one) => one.id),
        [open.id, later.id],
      );
      const page = await storage.listAgreements('acct_a', { limit: 10 });
      const listed = page!.find((one) => one.id === open.id)!;
      assert.equal(
        listed.signers[0]!.identification,
        { required: true, verified: false, method: null, at: null },
        'a list shows identification, never the hash',
      );
      assert.not.ok(JSON.stringify(page).includes('scrypt$'));
    }),
  );

  test(
    "agreements: a document's completed copy is kept as given and names its blob; agreementsDue lists an agreement owing copies",
    withStorage(factory, async (storage) => {
      const at = (minute: number) => `2026-03-01T10:${String(minute).padStart(2, '0')}:00+00:00`;
      const signed = agreementRecord({
        status: 'signed',
        completion: { attempts: 0, nextAttemptAt: at(3), lastError: null },
      });
      const later = agreementRecord({
        status: 'signed',
        completion: { attempts: 2, nextAttemptAt: at(40), lastError: 'the key store did not answer' },
      });
      for (const agreement of [signed, later]) await storage.insertAgreement(agreement, []);
      assert.equal((await storage.getAgreement('acct_a', later.id))!.completion, later.completion);
      assert.equal(
        (await storage.agreementsDue(at(10), 10, 10)).map((one) => one.id),
        [signed.id],
      );
      const hash = 'f'.repeat(64);
      await storage.updateAgreement('acct_a', signed.id, (current) => ({
        agreement: {
          ...current,
          completion: null,
          documents: current.documents.map((document, index) =>
            index === 0 ? { ...document, signedFileHash: hash, signedFileKey: 'agx_copy1' } : document,
          ),
        },
        events: [],
      }));
      const read = (await storage.getAgreement('acct_a', signed.id))!;
      assert.equal(
        [read.documents[0]!.signedFileHash, read.documents[0]!.signedFileKey, read.completion],
        [hash, 'agx_copy1', null],
      );
      assert.equal([read.documents[1]!.signedFileHash, read.documents[1]!.signedFileKey], [null, null]);
      assert.equal(await storage.agreementsDue(at(10), 10, 10), [], 'made: no longer owed');
      assert.ok(await storage.isBlobReferenced('agx_copy1'), 'the copy is a blob the agreement names');
      assert.not.ok(await storage.isBlobReferenced('agx_other'));
      const listed = (await storage.listAgreements('acct_a', { limit: 10 }))!.find((one) => one.id === signed.id)!;
      const { signedFileKey: _key, fields: _fields, ...shown } = read.documents[0]!;
      assert.equal(listed.documents[0], shown);
      assert.not.ok(JSON.stringify(listed).includes('agx_copy1'), 'a list never shows the key');
      // /verify finds a copy by its hash, in its own account only.
      assert.equal(await storage.findSignedCopy('acct_a', hash), {
        agreementId: signed.id,
        documentId: read.documents[0]!.id,
      });
      assert.is(await storage.findSignedCopy('acct_b', hash), null);
      assert.is(await storage.findSignedCopy('acct_a', 'e'.repeat(64)), null);
      await storage.updateAgreement('acct_a', signed.id, (current) => ({
        agreement: {
          ...current,
          documents: current.documents.map((document) => ({ ...document, signedFileHash: null, signedFileKey: null })),
        },
        events: [],
      }));
      assert.is(await storage.findSignedCopy('acct_a', hash), null, 'a copy no longer recorded is not found');
      // Fields are kept with their document as given.
      const fields = [
        { signerId: later.signers[0]!.id, page: 2, x: 10.5, y: 70, width: 40, height: 10, type: 'signature' as const },
      ];
      const placed = {
        ...agreementRecord({}),
        documents: later.documents.map((document, index) => ({
          ...document,
          id: `${document.id}f`,
          fields: index === 0 ? fields : [],
        })),
      };
      await storage.insertAgreement(placed, []);
      assert.equal(
        (await storage.getAgreement('acct_a', placed.id))!.documents.map((document) => document.fields),
        [fields, []],
      );
    }),
  );

  test(
    'agreements: removed with everything they hold, from their own account only, once; a racing update never brings one back',
    withStorage(factory, async (storage) => {
      const doomed = agreementRecord({});
      const kept = agreementRecord({});
      for (const agreement of [doomed, kept]) await storage.insertAgreement(agreement, []);
      assert.is(await storage.deleteAgreement('acct_b', doomed.id), false, 'not from another account');
      assert.is(await storage.deleteAgreement('acct_a', doomed.id), true);
      assert.is(await storage.getAgreement('acct_a', doomed.id), null);
      assert.is(await storage.deleteAgreement('acct_a', doomed.id), false, 'once');
      assert.not.ok(await storage.isBlobReferenced(doomed.documents[0]!.id), 'its documents are no longer named');
      assert.equal(
        (await storage.listAgreements('acct_a', { limit: 50 }))!.map((one) => one.id),
        [kept.id],
      );
      assert.ok(await storage.getAgreement('acct_a', kept.id), 'the others stay');
      // The removal is asked for while an update holds the agreement (from inside its change).
      let removal: Promise<boolean> | undefined;
      await storage.updateAgreement('acct_a', kept.id, (current) => {
        removal ??= storage.deleteAgreement('acct_a', kept.id);
        return { agreement: { ...current, name: 'renamed meanwhile' }, events: [] };
      });
      assert.is(await removal, true);
      assert.is(await storage.getAgreement('acct_a', kept.id), null, 'a removal is not undone by an update it raced');
      assert.equal((await storage.listAgreements('acct_a', { limit: 50 }))!, []);
    }),
  );

  test(
    "agreements: agreementsDue takes at most perAccount of one account: another account's due agreement is never behind a backlog",
    withStorage(factory, async (storage) => {
      const at = (second: number) => `2026-03-01T10:00:${String(second).padStart(2, '0')}+00:00`;
      const backlog = Array.from({ length: 30 }, (_, i) =>
        agreementRecord({ accountId: 'acct_a', expiresAt: at(i % 10) }),
      );
      const other = agreementRecord({ accountId: 'acct_b', expiresAt: at(20) });
      for (const agreement of [...backlog, other]) await storage.insertAgreement(agreement, []);
      const due = await storage.agreementsDue(at(30), 10, 5);
      assert.is(due.filter((one) => one.accountId === 'acct_a').length, 5);
      assert.ok(
        due.some((one) => one.id === other.id),
        "acct_b's agreement is in the first batch",
      );
      assert.is(due.at(-1)!.id, other.id, 'the earliest first across accounts');
      assert.is((await storage.agreementsDue(at(30), 3, 5)).length, 3, 'limit still bounds the batch');
    }),
  );

  test(
    "agreements: updateAgreement of an absent agreement or another account's resolves null without calling change",
    withStorage(factory, async (storage) => {
      const agreement = agreementRecord();
      await storage.insertAgreement(agreement, []);
      let calls = 0;
      const change = (current: AgreementRecord) => (calls++, { agreement: current, events: [] });
      assert.is(await storage.updateAgreement('acct_b', agreement.id, change), null);
      assert.is(await storage.updateAgreement('acct_a', 'agr_unknown', change), null);
      assert.is(calls, 0);
      assert.equal(await storage.getAgreement('acct_a', agreement.id), agreement);
    }),
  );

  test(
    'agreements: a change that throws, even after editing what it was given, rejects with its error and changes nothing',
    withStorage(factory, async (storage) => {
      const agreement = agreementRecord();
      await storage.insertAgreement(agreement, []);
      const failure = new Error('signer already signed');
      let caught: unknown;
      await storage
        .updateAgreement('acct_a', agreement.id, (current) => {
          current.status = 'signed';
          current.signers[0]!.signedAt = T0;
          current.documents.length = 0;
          throw failure;
        })
        .catch((error) => (caught = error));
      assert.is(caught, failure);
      assert.equal(await storage.getAgreement('acct_a', agreement.id), agreement);
      // The agreement is still usable: the next update applies to the unchanged record.
      const next = await storage.updateAgreement('acct_a', agreement.id, signOne(agreement.signers[1]!.id));
      assert.is(next!.documents.length, 2);
      assert.equal(
        next!.signers.map((signer) => signer.signedAt),
        [null, T0, null],
      );
    }),
  );

  test(
    "agreements: concurrent updates of one agreement each see the other's result; none is lost",
    withStorage(factory, async (storage) => {
      const agreement = agreementRecord();
      await storage.insertAgreement(agreement, []);
      await Promise.all(
        agreement.signers.map((signer) => storage.updateAgreement('acct_a', agreement.id, signOne(signer.id))),
      );
      const stored = (await storage.getAgreement('acct_a', agreement.id))!;
      assert.equal(
        stored.signers.map((signer) => signer.signedAt),
        [T0, T0, T0],
      );
      assert.is(stored.status, 'signed');
    }),
  );

  test(
    'agreements: isBlobReferenced is true for every document id of any account, false otherwise',
    withStorage(factory, async (storage) => {
      const agreement = agreementRecord();
      const other = agreementRecord({ accountId: 'acct_b' });
      await storage.insertAgreement(agreement, []);
      await storage.insertAgreement(other, []);
      for (const document of [...agreement.documents, ...other.documents]) {
        assert.is(await storage.isBlobReferenced(document.id), true, document.id);
      }
      assert.is(await storage.isBlobReferenced('agd_neverStored'), false);
      assert.is(await storage.isBlobReferenced(agreement.id), false, 'an agreement id names no blob');
      assert.is(await storage.isBlobReferenced(agreement.signers[0]!.id), false, 'a signer id names no blob');
      assert.is(await storage.isBlobReferenced(`agc_${agreement.id.slice(4)}`), true, "the agreement's certificate");
      assert.is(await storage.isBlobReferenced('agc_neverStored'), false, 'the certificate of no agreement');
    }),
  );

  test(
    'agreements: listAgreements is newest first, those of one second the last made first, paged after a given agreement',
    withStorage(factory, async (storage) => {
      // Made out of time order (a slow request stores an earlier createdAt late), three in one second.
      const seconds = [3, 1, 5, 3, 3, 2];
      const made = seconds.map((second) => agreementRecord({ createdAt: at(second) }));
      for (const agreement of made) await storage.insertAgreement(agreement, []);
      const [s3a, s1, s5, s3b, s3c, s2] = made.map((agreement) => agreement.id);
      const newestFirst = [s5, s3c, s3b, s3a, s2, s1];
      assert.equal(
        (await storage.listAgreements('acct_a', { limit: 100 }))!.map((agreement) => agreement.id),
        newestFirst,
      );
      assert.equal(
        (await storage.listAgreements('acct_a', { limit: 2 }))!.map((agreement) => agreement.id),
        [s5, s3c],
      );
      assert.equal(
        (await storage.listAgreements('acct_a', { limit: 2, after: s3c }))!.map((agreement) => agreement.id),
        [s3b, s3a],
      );
      assert.equal(
        (await storage.listAgreements('acct_a', { limit: 10, after: s3a }))!.map((agreement) => agreement.id),
        [s2, s1],
      );
      assert.equal(
        await storage.listAgreements('acct_a', { limit: 10, after: s1 }),
        [],
        'after the oldest, an empty page',
      );
      assert.equal(await pagesOf(storage, 'acct_a', 4), [newestFirst.slice(0, 4), newestFirst.slice(4)]);
    }),
  );

  test(
    "agreements: listAgreements sees only the account's own; a cursor of another account or unknown is null",
    withStorage(factory, async (storage) => {
      const mine = agreementRecord();
      const theirs = agreementRecord({ accountId: 'acct_b', createdAt: at(9) });
      await storage.insertAgreement(mine, []);
      await storage.insertAgreement(theirs, []);
      assert.equal(
        (await storage.listAgreements('acct_a', { limit: 10 }))!.map((agreement) => agreement.id),
        [mine.id],
      );
      assert.equal(
        (await storage.listAgreements('acct_b', { limit: 10 }))!.map((agreement) => agreement.id),
        [theirs.id],
      );
      assert.equal(await storage.listAgreements('acct_none', { limit: 10 }), []);
      assert.is(
        await storage.listAgreements('acct_a', { limit: 10, after: theirs.id }),
        null,
        "another account's agreement is no cursor",
      );
      assert.is(await storage.listAgreements('acct_a', { limit: 10, after: 'agr_unknown' }), null);
      assert.is(await storage.listAgreements('acct_none', { limit: 10, after: mine.id }), null);
    }),
  );

  test(
    'agreements: listed agreements carry no signature image, hashes and signing times kept; an update shows, in its place',
    withStorage(factory, async (storage) => {
      const older = agreementRecord({ createdAt: at(1) });
      const newer = agreementRecord({ createdAt: at(2) });
      await storage.insertAgreement(older, []);
      await storage.insertAgreement(newer, []);
      const signed = (await storage.updateAgreement('acct_a', older.id, signOne(older.signers[1]!.id)))!;
      const listed = (await storage.listAgreements('acct_a', { limit: 10 }))!;
      assert.equal(listed, [agreementSummary(newer), agreementSummary(signed)]);
      const text = JSON.stringify(listed);
      assert.not.ok(text.includes('data:image'), 'no image in a listed agreement');
      assert.not.ok('signerSignature' in listed[1]! || 'signature' in listed[1]!.signers[1]!);
      assert.is(listed[1]!.signers[1]!.signatureHash, 'd'.repeat(64));
      assert.is(listed[1]!.signers[1]!.signedAt, T0);
      assert.is(listed[1]!.accountId, 'acct_a');
    }),
  );

  reopenable(test, factory)(
    'agreements: the listing order, within one second too, survives a reopen',
    withStorage(factory, async (storage, { swap }) => {
      const made = [1, 1, 1, 0].map((second) => agreementRecord({ createdAt: at(second) }));
      for (const agreement of made) await storage.insertAgreement(agreement, []);
      await storage.updateAgreement('acct_a', made[0]!.id, signOne(made[0]!.signers[0]!.id));
      const expected = [made[2]!.id, made[1]!.id, made[0]!.id, made[3]!.id];
      const reopened = await swap();
      assert.equal(
        (await reopened.listAgreements('acct_a', { limit: 10 }))!.map((agreement) => agreement.id),
        expected,
      );
      assert.equal(
        (await reopened.listAgreements('acct_a', { limit: 1, after: made[1]!.id }))!.map((agreement) => agreement.id),
        [made[0]!.id],
      );
    }),
  );

  reopenable(test, factory)(
    'agreements: records, updates and their events survive a reopen',
    withStorage(factory, async (storage, { swap, db }) => {
      const agreement = agreementRecord({ expiresAt: '2026-03-01T10:00:00+00:00' });
      const created = eventFor(agreement, 'agreement-created');
      await storage.insertAgreement(agreement, [created]);
      const updated = await storage.updateAgreement('acct_a', agreement.id, signOne(agreement.signers[2]!.id));
      const reopened = await swap();
      assert.equal(await reopened.getAgreement('acct_a', agreement.id), updated);
      assert.equal(await db.event(created.id), created);
      assert.is(await reopened.isBlobReferenced(agreement.documents[1]!.id), true);
      assert.equal(
        await reopened.agreementsDue('2026-03-01T10:00:00+00:00', 10, 10),
        [{ accountId: 'acct_a', id: agreement.id }],
        'what is due, found after a reopen',
      );
    }),
  );
}
