import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { memoryBlobs, memoryTransport } from '../../adapters/memory/index.js';
import { PNG_SIGNATURE, REAL_PNG, signer, simplePdf, validFormData, blobKeysOf } from '../helpers/agreements.js';
import { openBackends } from '../helpers/backends.js';
import { SIGNING_KEY_1 } from '../helpers/download.js';
import { recordingNotifier, until } from '../helpers/notifier.js';
import { KEY_B, type TestPortal, json, startPortal } from '../helpers/server.js';
import { NEVER } from '../helpers/webhooks.js';

/**
 * The sender's controls on every adapter: voiding an open agreement closes it, revokes every link,
 * publishes agreement-voided, records the reason and mails the signers who had a link; correcting a
 * signer changes them, revokes their link and is recorded; neither touches a signed or closed one,
 * and bad input changes nothing.
 */
const { list: backends, close } = await openBackends('sender controls');
const suites: ReturnType<typeof suite>[] = [];

const post = (app: TestPortal, path: string, body: unknown, method = 'POST') =>
  app.api(path, {
    method,
    headers: { 'content-type': 'application/json' },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });

async function agreementOf(app: TestPortal) {
  const created = await app.api('/agreements', {
    method: 'POST',
    body: validFormData({ signers: [signer(1), signer(2)] }),
  });
  assert.is(created.status, 201);
  return json(created);
}

async function linkFor(app: TestPortal, agreementId: string, signerId: string, send = false) {
  const made = await post(
    app,
    `/agreements/${agreementId}/signers/${signerId}/signing-link`,
    send ? { send: true } : {},
  );
  assert.is(made.status, 201);
  return new URL((await json(made)).link).hash.slice(1);
}

const view = (app: TestPortal, token: string) =>
  fetch(`${app.url}/v1/signing`, { headers: { authorization: `Bearer ${token}` } });

for (const backend of backends) {
  const on = suite(`sender controls: ${backend.name}`);
  suites.push(on);

  on(
    'void: closed as voided, every link 401, agreement-voided, the reason in the trail, mail to who had a link; then 409',
    async () => {
      const { options, cleanup } = await backend.options();
      const transport = memoryTransport();
      const notifier = recordingNotifier();
      const app = await startPortal({
        ...options,
        transport,
        notifier,
        signingKeys: [SIGNING_KEY_1],
        webhooks: { tick: NEVER },
      });
      try {
        await app.portal.webhooks.create('acct_a', { type: 'agreement-voided', url: 'https://r.example/voided' });
        const agreement = await agreementOf(app);
        const token = await linkFor(app, agreement.id, agreement.signers[0].id, true);
        assert.is((await view(app, token)).status, 200);
        await until(() => notifier.sent.some((mail) => mail.kind === 'signing-invitation'), 'the invitation');

        for (const [body, message] of [
          [{}, /^the body\.reason: is required/],
          [{ reason: '   ' }, /^the body\.reason: must not be empty/],
          [{ reason: 'x'.repeat(1001) }, /^the body\.reason: must be at most 1000 characters/],
          [{ reason: 'ok', why: 'no' }, /unknown field "why"/],
        ] as const) {
          const refused = await post(app, `/agreements/${agreement.id}/void`, body);
          assert.is(refused.status, 400);
          assert.match((await json(refused)).message, message);
        }
        assert.is((await post(app, '/agreements/agr_missingmissingmissing12/void', { reason: 'x' })).status, 404);
        assert.is((await post(app, '/agreements/nope/void', { reason: 'x' })).status, 404);
        assert.is(
          (await json(await app.api(`/agreements/${agreement.id}`))).closedReason,
          null,
          'bad input changed nothing',
        );

        const voided = await post(app, `/agreements/${agreement.id}/void`, {
          reason: 'The flat was let to someone else.',
        });
        assert.is(voided.status, 200);
        const closed = await json(voided);
        assert.is(closed.closedReason, 'voided');
        assert.is(closed.status, 'sent');
        assert.ok(closed.closedAt !== null);
        assert.is((await view(app, token)).status, 401, 'the link is revoked');

        const trail = await json(await app.api(`/agreements/${agreement.id}/audit`));
        assert.is(trail.verified, true);
        const entry = trail.data.at(-1);
        assert.equal(
          [entry.action, entry.detail, entry.actor],
          ['voided', 'The flat was let to someone else.', 'account:acct_a'],
        );

        await app.portal.worker!.tick();
        const calls = transport.calls
          .map((call) => JSON.parse(call.body))
          .filter((event) => event.type === 'agreement-voided');
        assert.is(calls.length, 1);
        assert.is(calls[0].data.id, agreement.id);
        assert.is(calls[0].data.closedReason, 'voided');

        await until(() => notifier.sent.some((mail) => mail.kind === 'agreement-voided'), 'the voided mail');
        const told = notifier.sent.filter((mail) => mail.kind === 'agreement-voided');
        assert.equal(
          told.map((mail) => mail.to),
          [`"Signer1 Lee" <s1@example.com>`],
          'only the signer who had a link',
        );
        assert.match(told[0]!.text, /The flat was let to someone else\./);

        const again = await post(app, `/agreements/${agreement.id}/void`, { reason: 'twice' });
        assert.is(again.status, 409);
        assert.match((await json(again)).message, /is voided/);
        assert.is(
          (
            await post(
              app,
              `/agreements/${agreement.id}/signers/${agreement.signers[1].id}`,
              { email: 'x@example.com' },
              'PATCH',
            )
          ).status,
          409,
        );
        await app.portal.agreements
          .sign('acct_a', agreement.id, agreement.signers[1].id, { signature: PNG_SIGNATURE })
          .then(
            () => assert.unreachable('a voided agreement takes no signature'),
            (error: Error) => assert.match(error.message, /is voided/),
          );
        assert.is(
          (await app.api(`/agreements/${agreement.id}/certificate`)).status,
          200,
          'a closed agreement has its certificate',
        );

        const signed = await agreementOf(app);
        for (const one of signed.signers)
          await app.portal.agreements.sign('acct_a', signed.id, one.id, { signature: PNG_SIGNATURE });
        const late = await post(app, `/agreements/${signed.id}/void`, { reason: 'too late' });
        assert.is(late.status, 409);
        assert.match((await json(late)).message, /is signed/);
      } finally {
        await app.close();
        await cleanup();
      }
    },
  );

  on(
    "correct: a signer's e-mail and name changed, their link revoked, the trail says which fields; 409 once they signed",
    async () => {
      const { options, cleanup } = await backend.options();
      const app = await startPortal({
        ...options,
        transport: memoryTransport(),
        signingKeys: [SIGNING_KEY_1],
        webhooks: { tick: NEVER },
      });
      try {
        const agreement = await agreementOf(app);
        const [first, second] = agreement.signers;
        const token = await linkFor(app, agreement.id, first.id);
        const other = await linkFor(app, agreement.id, second.id);
        const path = `/agreements/${agreement.id}/signers/${first.id}`;

        for (const [body, status, message] of [
          [{}, 400, /give at least one of firstName, lastName and email/],
          [{ email: 'not an address' }, 400, /^the body\.email: must be a valid e-mail address/],
          [{ firstName: '' }, 400, /^the body\.firstName: must not be empty/],
          [{ shouldIdentify: true }, 400, /unknown field "shouldIdentify"/],
        ] as const) {
          const refused = await post(app, path, body, 'PATCH');
          assert.is(refused.status, status);
          assert.match((await json(refused)).message, message);
        }
        assert.is(
          (
            await post(
              app,
              `/agreements/${agreement.id}/signers/ags_missingmissingmissing12`,
              { email: 'a@example.com' },
              'PATCH',
            )
          ).status,
          404,
        );
        assert.is((await view(app, token)).status, 200, 'bad input changed nothing');

        const corrected = await post(app, path, { email: 'signer.one@example.org', lastName: 'Leigh' }, 'PATCH');
        assert.is(corrected.status, 200);
        const after = await json(corrected);
        assert.equal(
          [after.signers[0].email, after.signers[0].lastName, after.signers[0].firstName],
          ['signer.one@example.org', 'Leigh', 'Signer1'],
        );
        assert.is(after.closedReason, null, 'still open');
        assert.is((await view(app, token)).status, 401, "the corrected signer's link is revoked");
        assert.is((await view(app, other)).status, 200, "the other signer's link still works");

        const trail = await json(await app.api(`/agreements/${agreement.id}/audit`));
        assert.is(trail.verified, true);
        const entry = trail.data.find((one: { action: string }) => one.action === 'signer-corrected');
        assert.equal([entry.action, entry.signerId], ['signer-corrected', first.id]);
        assert.match(entry.detail, /^corrected: lastName, email; the link revoked$/);
        assert.not.match(
          JSON.stringify(entry),
          /signer\.one@example\.org/,
          'the new address is in the evidence, not spelt out in the entry',
        );

        const fresh = await linkFor(app, agreement.id, first.id);
        assert.is((await view(app, fresh)).status, 200, 'a new link works');
        await app.portal.agreements.sign('acct_a', agreement.id, first.id, { signature: PNG_SIGNATURE });
        const late = await post(app, path, { firstName: 'Late' }, 'PATCH');
        assert.is(late.status, 409);
        assert.match((await json(late)).message, /already signed/);
      } finally {
        await app.close();
        await cleanup();
      }
    },
  );

  on(
    'delete: the agreement, its documents, completed copy, certificate and trail are gone; its links stop; others stay',
    async () => {
      const { options, cleanup, dump } = await backend.options();
      const blobs = options.blobs ?? memoryBlobs();
      const app = await startPortal({
        ...options,
        blobs,
        transport: memoryTransport(),
        signingKeys: [SIGNING_KEY_1],
        webhooks: { tick: NEVER },
      });
      try {
        const pdf = await simplePdf('A lease to remove');
        const doomed = await json(
          await app.api('/agreements', {
            method: 'POST',
            body: validFormData({ signers: [signer(1), signer(2)], documents: [{ name: 'lease.pdf', bytes: pdf }] }),
          }),
        );
        const kept = await agreementOf(app);
        const token = await linkFor(app, doomed.id, doomed.signers[1].id);
        await app.portal.agreements.sign('acct_a', doomed.id, doomed.signers[0].id, { signature: REAL_PNG });
        await app.portal.agreements.voidAgreement('acct_a', doomed.id, { reason: 'to be removed' });
        assert.is((await app.api(`/agreements/${doomed.id}/certificate`)).status, 200, 'a certificate was made');
        const keysBefore = await blobKeysOf(blobs);
        assert.ok(keysBefore.some((key) => key.startsWith('agc_')) && keysBefore.includes(doomed.documents[0].id));

        assert.is((await app.api('/agreements/nope', { method: 'DELETE' })).status, 404);
        assert.is((await app.api('/agreements/agr_missingmissingmissing12', { method: 'DELETE' })).status, 404);
        assert.is(
          (
            await app.api(`/agreements/${doomed.id}`, {
              method: 'DELETE',
              headers: { authorization: `Bearer ${KEY_B}` },
            })
          ).status,
          404,
          'not from another account',
        );

        const removed = await app.api(`/agreements/${doomed.id}`, { method: 'DELETE' });
        assert.is(removed.status, 204);
        assert.is((await app.api(`/agreements/${doomed.id}`)).status, 404);
        assert.is((await app.api(`/agreements/${doomed.id}/audit`)).status, 404);
        assert.is((await app.api(`/agreements/${doomed.id}`, { method: 'DELETE' })).status, 404, 'once');
        assert.ok([401, 404].includes((await view(app, token)).status), 'its links stop working');
        const keysAfter = await blobKeysOf(blobs);
        assert.not.ok(
          keysAfter.some((key) => key === doomed.documents[0].id || key.startsWith('agc_') || key.startsWith('agx_')),
          keysAfter.join(),
        );
        assert.ok(keysAfter.includes(kept.documents[0].id), "another agreement's bytes stay");
        assert.equal(
          (await json(await app.api('/agreements'))).data.map((one: { id: string }) => one.id),
          [kept.id],
        );
        // The fs store's log is append-only: a removed record's bytes leave it at its next compaction.
        if (backend.name !== 'fs')
          assert.not.ok((await dump()).includes('to be removed'), 'the trail is gone from the store');
      } finally {
        await app.close();
        await cleanup();
      }
    },
  );
}

suites[suites.length - 1]!.after(close);
for (const one of suites) one.run();
