import { testDownloads } from '../helpers/download.js';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { memoryBlobs, memoryStorage, memoryTransport } from '../../adapters/memory/index.js';
import type { Agreement, Storage } from '../../src/index.js';
import { createAgreementService, eventData } from '../../src/domain/agreements.js';
import { json, rejects, startPortal, withPortal, type TestPortal } from '../helpers/server.js';
import { memoryBackChannel } from '../helpers/memory.js';
import { NEVER, waitFor } from '../helpers/webhooks.js';
import {
  PNG_SIGNATURE,
  dataUrl,
  documentBytes,
  pngBytes,
  sha256,
  signer,
  validFormData,
} from '../helpers/agreements.js';
import { everyDelivery } from '../helpers/every-delivery.js';

// PNGs as the portal writes them (8-bit RGBA, no extra chunk), so they are kept byte for byte.
const SIGNATURE_1 = dataUrl('image/png', pngBytes(1));
const SIGNATURE_2 = dataUrl('image/png', pngBytes(2));

/** A portal on a storage the test can read directly, with a clock the test moves. */
async function setup() {
  const storage = memoryStorage();
  let now = new Date('2026-03-01T10:00:00.900Z');
  const app = await startPortal({ storage, clock: () => now });
  const res = await app.api('/agreements', {
    method: 'POST',
    body: validFormData({ signers: [signer(1), signer(2)] }),
  });
  const agreement: Agreement = await json(res);
  return { app, storage, agreement, setNow: (date: string) => (now = new Date(date)) };
}

/** The events of an account of a type, found through a webhook of that type (its deliveries name them), as stored. */
async function eventsOf(_app: TestPortal, storage: Storage, webhookId: string) {
  const deliveries = await everyDelivery(storage, 'acct_a', webhookId);
  const db = memoryBackChannel(storage);
  return Promise.all(deliveries.map((delivery) => db.event(delivery.eventId)));
}

test('creation uses the clock, and stores agreement-created with the Agreement as data', async () => {
  const storage = memoryStorage();
  await withPortal({ storage, clock: () => new Date('2026-03-01T10:00:00.900Z') }, async (app) => {
    const hook = await app.portal.webhooks.create('acct_a', {
      type: 'agreement-created',
      url: 'https://receiver.example/hook',
    });
    const agreement = await json(await app.api('/agreements', { method: 'POST', body: validFormData() }));
    assert.is(agreement.createdAt, '2026-03-01T10:00:00+00:00');
    assert.is(agreement.signerSignatureHash, sha256(PNG_SIGNATURE + '\n2026-03-01T10:00:00+00:00'));
    const [event] = await eventsOf(app, storage, hook.id);
    assert.ok(event);
    assert.is(event!.type, 'agreement-created');
    assert.is(event!.createdAt, '2026-03-01T10:00:00+00:00');
    // Thin: the signature image is left out of the event, its hash kept (a deliberate change of issue 15).
    assert.equal(event!.data, eventData(agreement));
    assert.is((event!.data as Record<string, unknown>).signerSignature, undefined);
    assert.is((event!.data as { signerSignatureHash: string }).signerSignatureHash, agreement.signerSignatureHash);
  });
});

test('signing sets signature, signatureHash and signedAt; the last signer makes it signed and emits agreement-signed', async () => {
  const { app, storage, agreement, setNow } = await setup();
  try {
    const hook = await app.portal.webhooks.create('acct_a', {
      type: 'agreement-signed',
      url: 'https://receiver.example/hook',
    });
    const [first, second] = agreement.signers;
    setNow('2026-03-02T08:30:15Z');
    const afterFirst = await app.portal.agreements.sign('acct_a', agreement.id, first!.id, { signature: SIGNATURE_1 });
    assert.is(afterFirst.status, 'sent');
    assert.equal(afterFirst.signers[0], {
      ...first,
      signature: SIGNATURE_1,
      signatureHash: sha256(SIGNATURE_1),
      signedAt: '2026-03-02T08:30:15+00:00',
    });
    assert.equal(afterFirst.signers[1], second);
    assert.equal(await eventsOf(app, storage, hook.id), []);

    setNow('2026-03-03T09:00:00Z');
    const afterSecond = await app.portal.agreements.sign('acct_a', agreement.id, second!.id, {
      signature: SIGNATURE_2,
    });
    assert.is(afterSecond.status, 'signed');
    assert.is(afterSecond.signers[1]!.signatureHash, sha256(SIGNATURE_2));
    assert.is(afterSecond.signers[1]!.signedAt, '2026-03-03T09:00:00+00:00');
    assert.is(afterSecond.signers[0]!.signedAt, '2026-03-02T08:30:15+00:00');
    // Nothing else about the agreement changes.
    assert.equal({ ...afterSecond, status: 'sent', signers: [] }, { ...agreement, signers: [] });
    assert.equal(await app.portal.agreements.get('acct_a', agreement.id), afterSecond);
    assert.equal(await json(await app.api(`/agreements/${agreement.id}`)), afterSecond);

    const events = await eventsOf(app, storage, hook.id);
    assert.is(events.length, 1);
    assert.is(events[0]!.type, 'agreement-signed');
    assert.equal(events[0]!.data, eventData(afterSecond));
    const signers = (events[0]!.data as { signers: Record<string, unknown>[] }).signers;
    assert.equal(
      signers.map((signer) => [signer.signature, signer.signatureHash]),
      [
        [undefined, sha256(SIGNATURE_1)],
        [undefined, sha256(SIGNATURE_2)],
      ],
    );
  } finally {
    await app.close();
  }
});

test("signing: 404 for an unknown agreement, another account's, or an unknown signer; 409 for a second signature", async () => {
  const { app, agreement } = await setup();
  try {
    const signerId = agreement.signers[0]!.id;
    const sign = app.portal.agreements.sign;
    assert.is(
      (
        await rejects(
          () => sign('acct_a', 'agr_unknown', signerId, { signature: SIGNATURE_1 }),
          /No agreement agr_unknown/,
        )
      ).status,
      404,
    );
    assert.is(
      (await rejects(() => sign('acct_b', agreement.id, signerId, { signature: SIGNATURE_1 }), /No agreement/)).status,
      404,
    );
    assert.is(
      (
        await rejects(
          () => sign('acct_a', agreement.id, 'ags_unknown', { signature: SIGNATURE_1 }),
          /No signer ags_unknown/,
        )
      ).status,
      404,
    );
    await sign('acct_a', agreement.id, signerId, { signature: SIGNATURE_1 });
    const again = await rejects(
      () => sign('acct_a', agreement.id, signerId, { signature: SIGNATURE_2 }),
      /already signed/,
    );
    assert.is(again.status, 409);
    const stored = (await app.portal.agreements.get('acct_a', agreement.id))!;
    assert.is(stored.signers[0]!.signature, SIGNATURE_1);
    assert.is(stored.status, 'sent');
  } finally {
    await app.close();
  }
});

test('signing with a signature that is not an acceptable image is a 400 naming it, and changes nothing', async () => {
  const { app, agreement } = await setup();
  try {
    const signerId = agreement.signers[0]!.id;
    const cases: [unknown, RegExp][] = [
      [{ signature: dataUrl('image/svg+xml', Buffer.from('<svg/>')) }, /^sign\.signature: SVG images are refused/],
      [{ signature: 'data:image/png;base64,AAAA' }, /^sign\.signature: the data is not a PNG image/],
      [{ signature: 42 }, /^sign\.signature: must be a string/],
      [{}, /^sign\.signature: must be a string/],
      [null, /^sign: give \{ signature \}/],
    ];
    for (const [input, pattern] of cases) {
      const error = await rejects(
        () => app.portal.agreements.sign('acct_a', agreement.id, signerId, input as never),
        pattern,
      );
      assert.is(error.status, 400);
    }
    assert.equal(await app.portal.agreements.get('acct_a', agreement.id), agreement);
  } finally {
    await app.close();
  }
});

test('webhooks receive agreement-created and agreement-signed at once: the service pokes the worker', async () => {
  const transport = memoryTransport();
  // The cron never fires during the test: a call can only come from the service's notify.
  await withPortal({ transport, webhooks: { tick: NEVER } }, async (app) => {
    const url = 'https://receiver.example/hook';
    await app.portal.webhooks.create('acct_a', { type: 'agreement-created', url });
    await app.portal.webhooks.create('acct_a', { type: 'agreement-signed', url });
    const form = validFormData();
    // A 700 KB signature image: the event leaves it out, so the call stays small.
    form.set('signerSignatureData', dataUrl('image/png', pngBytes(700_000)));
    const created = await json(await app.api('/agreements', { method: 'POST', body: form }));
    await waitFor(() => transport.calls.length === 1, 'the agreement-created call');
    const first = JSON.parse(transport.calls[0]!.body);
    assert.is(first.type, 'agreement-created');
    assert.equal(first.data, eventData(created));
    assert.ok(
      transport.calls[0]!.body.length < 20 * 1024,
      `the call body stays under 20 KB: ${transport.calls[0]!.body.length} bytes`,
    );
    assert.equal(
      await json(await app.api(`/agreements/${created.id}`)),
      created,
      'the whole agreement, images included, is one GET away',
    );
    const signed = await app.portal.agreements.sign('acct_a', created.id, created.signers[0].id, {
      signature: SIGNATURE_1,
    });
    await waitFor(() => transport.calls.length === 2, 'the agreement-signed call');
    const second = JSON.parse(transport.calls[1]!.body);
    assert.is(second.type, 'agreement-signed');
    assert.equal(second.data, eventData(signed));
    assert.is(second.data.status, 'signed');
  });
});

test('notify is called once events are stored: on creation and on each signature (agreement-signer-signed)', async () => {
  const storage = memoryStorage();
  const blobs = memoryBlobs();
  let notified = 0;
  const service = createAgreementService({
    storage,
    blobs,
    clock: () => new Date(),
    notify: () => notified++,
    downloads: testDownloads(storage, blobs),
  });
  const created = await service.create('acct_a', async () => ({
    name: 'N',
    signerName: 'S',
    signerSignatureData: PNG_SIGNATURE,
    signers: [signer(1), signer(2)],
    documents: [{ id: 'agd_x1', documentName: 'a.pdf', fileSize: 1, fileHash: sha256(documentBytes(1)) }],
  }));
  assert.is(notified, 1);
  await service.sign('acct_a', created.id, created.signers[0]!.id, { signature: SIGNATURE_1 });
  assert.is(notified, 2);
  await service.sign('acct_a', created.id, created.signers[1]!.id, { signature: SIGNATURE_1 });
  assert.is(notified, 3);
});

test('a notify that throws does not undo or fail a stored signature', async () => {
  const storage = memoryStorage();
  const blobs = memoryBlobs();
  const service = createAgreementService({
    storage,
    blobs,
    clock: () => new Date(),
    notify: () => {
      throw new Error('worker gone');
    },
    downloads: testDownloads(storage, blobs),
  });
  const created = await service.create('acct_a', async () => ({
    name: 'N',
    signerName: 'S',
    signerSignatureData: PNG_SIGNATURE,
    signers: [signer(1)],
    documents: [{ id: 'agd_x2', documentName: 'a.pdf', fileSize: 1, fileHash: 'f'.repeat(64) }],
  }));
  const signed = await service.sign('acct_a', created.id, created.signers[0]!.id, { signature: SIGNATURE_1 });
  assert.is(signed.status, 'signed');
  assert.is((await storage.getAgreement('acct_a', created.id))!.status, 'signed');
});

test.run();
