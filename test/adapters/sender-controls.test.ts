import { execFileSync } from 'node:child_process';
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
 * and bad input changes nothing. Erasing personal data leaves no name, e-mail, IP, user agent or
 * reason in any answer or in the store, and the trail keeps every hash and verifies.
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

/** What a signer's browser sends: a user agent to find again, and their own words. */
const SIGNER_AGENT = 'SignerBrowser/7.7 (personal-agent-xyz)';
const DECLINE_REASON = 'Signer2 Lee cannot sign: moving abroad';
/** Every personal value the erase test plants, as the store could hold it. */
const PERSONAL = ['s1@example.com', 's2@example.com', 'Signer1', 'Signer2', 'personal-agent-xyz', 'moving abroad'];

/** The certificate's text, or `null` (with the reason printed once) where pdftotext is missing. */
let pdftotextMissing: string | null | undefined;
function certificateText(pdf: Buffer): string | null {
  if (pdftotextMissing === undefined) {
    try {
      execFileSync('pdftotext', ['-v'], { stdio: 'ignore' });
      pdftotextMissing = null;
    } catch {
      pdftotextMissing = 'pdftotext (poppler-utils) is not installed';
      console.log(`SKIP the certificate's text in the erase test: ${pdftotextMissing}`);
    }
  }
  return pdftotextMissing === null ? execFileSync('pdftotext', ['-', '-'], { input: pdf, encoding: 'utf8' }) : null;
}

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
  on(
    'erase: no name, e-mail, IP, user agent or reason left in any answer or the store; every hash kept, verified; 409 while open',
    async () => {
      const { options, cleanup, dump } = await backend.options();
      const transport = memoryTransport();
      const app = await startPortal({
        ...options,
        transport,
        signingKeys: [SIGNING_KEY_1],
        webhooks: { tick: NEVER },
      });
      try {
        await app.portal.webhooks.create('acct_a', { type: 'agreement-declined', url: 'https://r.example/declined' });
        const created = await app.api('/agreements', {
          method: 'POST',
          headers: { 'idempotency-key': 'erase-me-once' },
          body: validFormData({ signers: [signer(1), signer(2)] }),
        });
        assert.is(created.status, 201);
        const agreement = await json(created);
        const [first, second] = agreement.signers;
        const open = await app.api(`/agreements/${agreement.id}/erase-personal-data`, { method: 'POST' });
        assert.is(open.status, 409);
        assert.match((await json(open)).message, /still awaiting signatures: void it first/);

        const token = await linkFor(app, agreement.id, first.id);
        const viewed = await fetch(`${app.url}/v1/signing`, {
          headers: { authorization: `Bearer ${token}`, 'user-agent': SIGNER_AGENT },
        });
        assert.is(viewed.status, 200);
        const declining = await linkFor(app, agreement.id, second.id);
        const declined = await fetch(`${app.url}/v1/signing/decline`, {
          method: 'POST',
          headers: {
            authorization: `Bearer ${declining}`,
            'user-agent': SIGNER_AGENT,
            'content-type': 'application/json',
          },
          body: JSON.stringify({ reason: DECLINE_REASON }),
        });
        assert.is(declined.status, 200);
        await app.portal.worker!.tick();
        assert.match(transport.calls.at(-1)!.body, /moving abroad/, 'the event carried the reason');
        const before = await json(await app.api(`/agreements/${agreement.id}/audit`));
        assert.is(before.verified, true);
        assert.ok(JSON.stringify(before).includes('personal-agent-xyz'));

        assert.is(
          (
            await app.api(`/agreements/${agreement.id}/erase-personal-data`, {
              method: 'POST',
              headers: { authorization: `Bearer ${KEY_B}` },
            })
          ).status,
          404,
          'not from another account',
        );
        const erased = await app.api(`/agreements/${agreement.id}/erase-personal-data`, { method: 'POST' });
        assert.is(erased.status, 200);
        const answer = await json(erased);
        assert.equal(
          answer.signers.map((one: Record<string, unknown>) => [one.firstName, one.lastName, one.email]),
          [
            ['[erased]', '[erased]', '[erased]'],
            ['[erased]', '[erased]', '[erased]'],
          ],
        );
        assert.is(answer.signers[1].declineReason, '[erased]');
        assert.is(answer.signers[1].declinedAt, agreement.signers[1].declinedAt ?? answer.signers[1].declinedAt);
        assert.is(answer.closedReason, 'declined', 'the outcome is evidence, kept');

        const after = await json(await app.api(`/agreements/${agreement.id}/audit`));
        assert.is(after.verified, true, 'the trail still verifies');
        assert.match(before.personalKey, /^[0-9a-f]{64}$/);
        assert.is(after.personalKey, null, 'the key is discarded with the data');
        assert.is(after.data.length, before.data.length + 1);
        assert.is(after.data.at(-1).action, 'erased');
        assert.equal(
          after.data
            .slice(0, -1)
            .map((entry: { hash: string; previousHash: string }) => [entry.hash, entry.previousHash]),
          before.data.map((entry: { hash: string; previousHash: string }) => [entry.hash, entry.previousHash]),
          'every earlier hash survives',
        );
        for (const entry of after.data.slice(0, -1)) {
          for (const field of ['ip', 'userAgent', 'detail'] as const)
            assert.ok(
              entry[field] === null || entry[field] === '[erased]',
              `${entry.action}.${field}: ${entry[field]}`,
            );
        }

        const again = await app.api(`/agreements/${agreement.id}/erase-personal-data`, { method: 'POST' });
        assert.is(again.status, 200, 'once erased, erasing again answers the same');
        assert.is((await json(await app.api(`/agreements/${agreement.id}/audit`))).data.length, after.data.length);

        const replay = await app.api('/agreements', {
          method: 'POST',
          headers: { 'idempotency-key': 'erase-me-once' },
          body: validFormData({ signers: [signer(1), signer(2)] }),
        });
        const replayed = await replay.text();
        assert.is(JSON.parse(replayed).id, agreement.id, 'the kept answer is replayed');
        const certificate = Buffer.from(await (await app.api(`/agreements/${agreement.id}/certificate`)).arrayBuffer());
        const text = certificateText(certificate);
        if (text !== null) assert.match(text, /\[erased\]/, 'the certificate is made again from what is left');
        const answers = [
          replayed,
          JSON.stringify(await json(await app.api(`/agreements/${agreement.id}`))),
          JSON.stringify(await json(await app.api('/agreements'))),
          JSON.stringify(after),
          text ?? '',
        ].join('\n');
        const stored = await dump();
        for (const value of PERSONAL) {
          assert.not.ok(answers.includes(value), `no answer shows ${value}`);
          assert.not.ok(stored.includes(value), `the store keeps no ${value}`);
        }
      } finally {
        await app.close();
        await cleanup();
      }
    },
  );
}

suites[suites.length - 1]!.after(close);
for (const one of suites) one.run();
