import { createHash, createHmac } from 'node:crypto';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { memoryStorage, memoryTransport } from '../../adapters/memory/index.js';
import { createLinkSigner } from '../../src/domain/download-links.js';
import type { Logger } from '../../src/index.js';
import { PNG_SIGNATURE, SIGNER, dataUrl, pngBytes, sha256, signer, validFormData } from '../helpers/agreements.js';
import { SIGNING_KEY_1, SIGNING_KEY_2 } from '../helpers/download.js';
import { type TestPortal, json, withPortal } from '../helpers/server.js';
import { NEVER, manualClock } from '../helpers/webhooks.js';

/** Creates an agreement over the API with `parts` set on the default form. */
async function createAgreement(
  app: TestPortal,
  parts: Record<string, string> = {},
  signers: object[] = [SIGNER, signer(2)],
) {
  const form = validFormData({ signers });
  for (const [name, value] of Object.entries(parts)) form.set(name, value);
  const res = await app.api('/agreements', { method: 'POST', body: form });
  assert.is(res.status, 201, await res.clone().text());
  return json(res);
}

/** A signing link for one signer: its token (the fragment) and expiry. */
async function linkFor(app: TestPortal, agreementId: string, signerId: string, body?: object) {
  const res = await app.api(`/agreements/${agreementId}/signers/${signerId}/signing-link`, {
    method: 'POST',
    ...(body === undefined ? {} : { body: JSON.stringify(body), headers: { 'content-type': 'application/json' } }),
  });
  assert.is(res.status, 201, await res.clone().text());
  const answer = await json(res);
  return { ...answer, token: new URL(answer.link).hash.slice(1) };
}

/** A request of the signer's API with `token` as its bearer. */
function asSigner(app: TestPortal, token: string, path: '' | '/sign' | '/decline', body?: object) {
  return fetch(`${app.url}/v1/signing${path}`, {
    method: path === '' ? 'GET' : 'POST',
    headers: {
      authorization: `Bearer ${token}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
}

test('a sequential agreement: each signer through their link, in turn; the events, the trail, the last signature closes it', async () => {
  const transport = memoryTransport();
  await withPortal({ signingKeys: [SIGNING_KEY_1], transport, webhooks: { tick: NEVER } }, async (app) => {
    const types = ['agreement-created', 'agreement-viewed', 'agreement-signer-signed', 'agreement-signed'];
    for (const type of types)
      await app.portal.webhooks.create('acct_a', { type, url: `https://hooks.example.com/${type}` });
    const agreement = await createAgreement(app, { signingOrder: 'sequential' });
    assert.is(agreement.signingOrder, 'sequential');
    const [first, second] = agreement.signers;
    const one = await linkFor(app, agreement.id, first.id);
    const two = await linkFor(app, agreement.id, second.id, { expiresInSeconds: 3600 });
    assert.match(one.link, new RegExp(`^${app.url}/v1/sign#[A-Za-z0-9_-]+\\.[A-Za-z0-9_-]{43}$`));
    assert.is(Date.parse(one.expiresAt) - Date.now() > 71 * 3600_000, true, 'the default is 72 hours');

    // The second signer may read, but not sign before the first.
    const early = await asSigner(app, two.token, '/sign', { signature: PNG_SIGNATURE });
    assert.is(early.status, 409);
    assert.match((await json(early)).message, /not signer .* turn yet/);

    const view = await asSigner(app, one.token, '');
    assert.is(view.status, 200);
    const seen = await json(view);
    assert.equal(Object.keys(seen), [
      'agreement',
      'signer',
      'identification',
      'disclosure',
      'documents',
      'locale',
      'branding',
    ]);
    assert.equal(seen.identification, { required: false });
    assert.is(seen.signer.id, first.id);
    assert.ok(seen.signer.viewedAt !== null);
    assert.not.ok('signingLinkId' in seen.signer);
    assert.is(seen.signer.signature, null, 'no signature of their own yet');
    assert.not.ok('signerSignature' in seen.agreement, 'no signature image in the view');
    const document = await fetch(seen.documents[0].link);
    assert.is(document.status, 200);
    assert.is((await document.arrayBuffer()).byteLength, agreement.documents[0].fileSize);
    // A second read records nothing more.
    assert.is((await json(await asSigner(app, one.token, ''))).signer.viewedAt, seen.signer.viewedAt);

    const signed = await asSigner(app, one.token, '/sign', { signature: PNG_SIGNATURE });
    assert.is(signed.status, 200);
    const afterSigning = await json(signed);
    assert.ok(afterSigning.signer.signedAt !== null);
    assert.is(afterSigning.signer.signature, PNG_SIGNATURE, 'the view the signature answers shows it, as stored');
    assert.is(afterSigning.signer.signatureHash, sha256(PNG_SIGNATURE));
    const again = await asSigner(app, one.token, '/sign', { signature: PNG_SIGNATURE });
    assert.is(again.status, 409, 'a used link signs nothing');
    assert.is((await asSigner(app, two.token, '/sign', { signature: PNG_SIGNATURE })).status, 200);
    const final = await app.portal.agreements.get('acct_a', agreement.id);
    assert.is(final!.status, 'signed');

    const delivered = async () =>
      transport.calls.map((call) => JSON.parse(call.body)).filter((event) => event.data.id === agreement.id);
    for (let i = 0; i < 50 && (await delivered()).length < 5; i++) await app.portal.worker!.tick();
    // Each type has its own webhook, whose calls are independent: compared in the order the events were made.
    const made = (await delivered()).sort((a, b) =>
      a.createdAt < b.createdAt ? -1 : a.createdAt > b.createdAt ? 1 : 0,
    );
    assert.equal(made.map((event) => event.type).sort(), [...types, 'agreement-signer-signed'].sort());
    assert.equal(
      made
        .filter((event) => event.type === 'agreement-signer-signed')
        .map((event) => event.data.signerId)
        .sort(),
      [first.id, second.id].sort(),
    );

    const audit = await json(await app.api(`/agreements/${agreement.id}/audit`));
    assert.is(audit.verified, true);
    assert.equal(
      audit.data.map((entry: { action: string }) => entry.action),
      ['created', 'link-issued', 'link-issued', 'viewed', 'signed', 'signed'],
    );
    const signedEntry = audit.data[4];
    assert.equal([signedEntry.actor, signedEntry.signerId, signedEntry.ip], [first.id, first.id, '127.0.0.1']);
    assert.equal(signedEntry.documents, [{ id: agreement.documents[0].id, fileHash: agreement.documents[0].fileHash }]);
    assert.is(audit.data[1].actor, 'account:acct_a');
    // The rule of docs/signing.md, with Node's crypto alone and the key the trail answers.
    assert.match(audit.personalKey, /^[0-9a-f]{64}$/);
    const keyed = (values: unknown[]) =>
      createHmac('sha256', Buffer.from(audit.personalKey, 'hex')).update(JSON.stringify(values)).digest('hex');
    let previous = '0'.repeat(64);
    for (const entry of audit.data) {
      assert.is(entry.personal, keyed([entry.ip, entry.userAgent, entry.detail]), 'the personal fields, keyed');
      const body = JSON.stringify([
        entry.at,
        entry.action,
        entry.actor,
        entry.signerId,
        entry.personal,
        entry.documents.map((d: { id: string; fileHash: string }) => [d.id, d.fileHash]),
        entry.state,
      ]);
      const hash = createHash('sha256').update(`${previous}\n${body}`).digest('hex');
      assert.equal([entry.previousHash, entry.hash], [previous, hash]);
      previous = hash;
    }
    // The last entry's state is the digest of the agreement as the API shows it.
    const shown = final!;
    const state = JSON.stringify([
      shown.id,
      shown.name,
      shown.status,
      shown.signerName,
      shown.signerSignatureHash,
      shown.createdAt,
      shown.signingOrder,
      shown.expiresAt,
      shown.closedAt,
      shown.closedReason,
      shown.documents.map((d) => [d.id, d.documentName, d.fileSize, d.fileHash]),
      shown.signers.map((s) => [
        s.id,
        keyed([s.firstName, s.lastName, s.email, s.declineReason]),
        s.shouldIdentify,
        s.signatureHash,
        s.signedAt,
        s.viewedAt,
        s.declinedAt,
      ]),
    ]);
    assert.is(audit.data.at(-1).state, createHash('sha256').update(state).digest('hex'));
    assert.is(audit.verified, true);
  });
});

test("locale and branding: the form's tag kept canonical, a malformed one a 400; the view carries both", async () => {
  await withPortal(
    {
      branding: async (accountId) =>
        accountId === 'acct_a' ? { name: 'Acme', accentColor: '#00AA88' } : { name: '', logoUrl: 'http://x' },
    },
    async (app) => {
      for (const [tag, message] of [
        ['not a tag!', /^locale: must be a BCP 47 language tag/],
        ['x'.repeat(40), /^locale: must be at most 35 characters/],
        ['en-', /^locale: must be a BCP 47 language tag/],
      ] as const) {
        const form = validFormData();
        form.append('locale', tag);
        const refused = await app.api('/agreements', { method: 'POST', body: form });
        assert.is(refused.status, 400, tag);
        assert.match((await json(refused)).message, message);
      }
      const form = validFormData();
      form.append('locale', 'FR-ca');
      const agreement = await json(await app.api('/agreements', { method: 'POST', body: form }));
      const { token } = await linkFor(app, agreement.id, agreement.signers[0].id);
      const view = await json(await asSigner(app, token, ''));
      assert.is(view.locale, 'fr-CA');
      assert.equal(view.branding, { name: 'Acme', logoUrl: null, accentColor: '#00aa88', supportEmail: null });
      const plain = await createAgreement(app);
      const other = await linkFor(app, plain.id, plain.signers[0].id);
      assert.is((await json(await asSigner(app, other.token, ''))).locale, 'en', 'English when the form says nothing');
    },
  );
});

test('refused: a tampered, foreign, replaced or expired token; a missing one; each a clear status that changes nothing', async () => {
  const time = manualClock();
  await withPortal({ signingKeys: [SIGNING_KEY_1], clock: time.clock, webhooks: { tick: NEVER } }, async (app) => {
    const agreement = await createAgreement(app);
    const [first] = agreement.signers;
    const { token } = await linkFor(app, agreement.id, first.id, { expiresInSeconds: 600 });
    const [payload, signature] = token.split('.');
    const foreign = createLinkSigner([SIGNING_KEY_2]).signText(`customer-portal/signing/v1.${payload}`);
    const cases: [string, string, number, RegExp][] = [
      [
        'tampered signature',
        `${payload}.${signature!.startsWith('A') ? 'B' : 'A'}${signature!.slice(1)}`,
        401,
        /not valid/,
      ],
      ['another key', `${payload}.${foreign}`, 401, /not valid/],
      ['garbage', 'not-a-token', 401, /not valid/],
      ['empty', '', 401, /not valid/],
    ];
    for (const [label, presented, status, message] of cases) {
      const res = await asSigner(app, presented, '/sign', { signature: PNG_SIGNATURE });
      assert.is(res.status, status, label);
      assert.match((await json(res)).message, message, label);
    }
    assert.is((await fetch(`${app.url}/v1/signing`)).status, 401, 'no Authorization');

    // A new link replaces the old one.
    const newer = await linkFor(app, agreement.id, first.id);
    const replaced = await asSigner(app, token, '');
    assert.is(replaced.status, 401);
    assert.match((await json(replaced)).message, /replaced by a newer one/);
    assert.is((await asSigner(app, newer.token, '')).status, 200);
    // The header is read as an API key's is: the scheme in any case, one or more spaces before the token (RFC 9110).
    for (const header of [`bearer ${newer.token}`, `BEARER ${newer.token}`, `Bearer  ${newer.token}`]) {
      assert.is(
        (await fetch(`${app.url}/v1/signing`, { headers: { authorization: header } })).status,
        200,
        header.slice(0, 7),
      );
    }
    assert.is(
      (await fetch(`${app.url}/v1/signing`, { headers: { authorization: `Basic ${newer.token}` } })).status,
      401,
      'another scheme',
    );

    // Expired from the second in expiresAt on.
    const short = await linkFor(app, agreement.id, first.id, { expiresInSeconds: 60 });
    time.advance(60);
    const expired = await asSigner(app, short.token, '/sign', { signature: PNG_SIGNATURE });
    assert.is(expired.status, 410);
    assert.match((await json(expired)).message, /expired at/);

    const stored = (await app.portal.agreements.get('acct_a', agreement.id))!;
    assert.equal(
      stored.signers.map((s) => s.signedAt),
      [null, null],
      'nothing was signed',
    );
  });
});

test('bad input: link lifetimes, a signer of another agreement, signatures and decline reasons; each a 4xx naming it', async () => {
  await withPortal({ signingKeys: [SIGNING_KEY_1], webhooks: { tick: NEVER } }, async (app) => {
    const agreement = await createAgreement(app);
    const other = await createAgreement(app);
    const [first] = agreement.signers;
    const link = (body: object, signerId = first.id, agreementId = agreement.id) =>
      app.api(`/agreements/${agreementId}/signers/${signerId}/signing-link`, {
        method: 'POST',
        body: JSON.stringify(body),
        headers: { 'content-type': 'application/json' },
      });
    assert.is((await link({ expiresInSeconds: 59 })).status, 400);
    assert.is((await link({ expiresInSeconds: 2_592_001 })).status, 400);
    assert.is((await link({ expiresInSeconds: 1.5 })).status, 400);
    assert.is((await link({ ttl: 60 })).status, 400);
    assert.is((await link({ expiresInSeconds: 2_592_000 })).status, 201);
    const foreign = await link({}, other.signers[0].id);
    assert.is(foreign.status, 404);
    assert.match((await json(foreign)).message, /No signer .* on agreement/);
    assert.is((await link({}, 'ags_nothere', 'agr_nothere')).status, 404);
    assert.is((await link({}, 'nope')).status, 404);

    const { token } = await linkFor(app, agreement.id, first.id);
    const huge = dataUrl('image/png', pngBytes(1024 * 1024 + 1));
    for (const [label, body] of [
      ['oversized', { signature: huge }],
      ['not an image', { signature: 'data:text/plain;base64,aGk=' }],
      ['no signature', {}],
      ['an extra field', { signature: PNG_SIGNATURE, name: 'x' }],
    ] as const) {
      const res = await asSigner(app, token, '/sign', body);
      assert.is(res.status, 400, label);
    }
    const longReason = await asSigner(app, token, '/decline', { reason: 'x'.repeat(1001) });
    assert.is(longReason.status, 400);
    assert.match((await json(longReason)).message, /at most 1000 characters/);
    const stored = (await app.portal.agreements.get('acct_a', agreement.id))!;
    assert.equal([stored.closedAt, stored.signers[0]!.signedAt], [null, null]);
  });
});

test('decline closes the agreement for everyone; a sign racing a decline: one wins, the other is a 409', async () => {
  await withPortal({ signingKeys: [SIGNING_KEY_1], webhooks: { tick: NEVER } }, async (app) => {
    const agreement = await createAgreement(app);
    const [first, second] = agreement.signers;
    const one = await linkFor(app, agreement.id, first.id);
    const two = await linkFor(app, agreement.id, second.id);
    const declined = await asSigner(app, one.token, '/decline', { reason: 'Clause 4 is wrong.' });
    assert.is(declined.status, 200);
    const view = await json(declined);
    assert.equal([view.agreement.closedReason, view.signer.declineReason], ['declined', 'Clause 4 is wrong.']);
    const late = await asSigner(app, two.token, '/sign', { signature: PNG_SIGNATURE });
    assert.is(late.status, 409);
    assert.match((await json(late)).message, /is declined: nothing more can be signed/);
    assert.is(
      (await app.api(`/agreements/${agreement.id}/signers/${second.id}/signing-link`, { method: 'POST' })).status,
      409,
    );

    for (let round = 0; round < 5; round++) {
      const racing = await createAgreement(app, {}, [SIGNER]);
      const { token } = await linkFor(app, racing.id, racing.signers[0].id);
      const [signRes, declineRes] = await Promise.all([
        asSigner(app, token, '/sign', { signature: PNG_SIGNATURE }),
        asSigner(app, token, '/decline', {}),
      ]);
      assert.equal([signRes.status, declineRes.status].sort(), [200, 409], `round ${round}`);
      const stored = (await app.portal.agreements.get('acct_a', racing.id))!;
      assert.is(stored.status === 'signed', stored.closedReason === null, 'signed or declined, never both');
    }
  });
});

test('expiresAt closes the agreement at the first request that reaches it: agreement-expired once, then 409', async () => {
  const time = manualClock();
  const storage = memoryStorage();
  await withPortal(
    { storage, signingKeys: [SIGNING_KEY_1], clock: time.clock, webhooks: { tick: NEVER } },
    async (app) => {
      const past = await app.api('/agreements', {
        method: 'POST',
        body: (() => {
          const form = validFormData();
          form.set('expiresAt', new Date(time.now.getTime() - 1000).toISOString());
          return form;
        })(),
      });
      assert.is(past.status, 400);
      assert.match((await json(past)).message, /expiresAt: must be in the future/);
      const expiresAt = new Date(time.now.getTime() + 3600_000).toISOString();
      const agreement = await createAgreement(app, { expiresAt });
      assert.is(agreement.expiresAt, expiresAt.replace(/\.\d{3}Z$/, '+00:00'));
      const { token } = await linkFor(app, agreement.id, agreement.signers[0].id, { expiresInSeconds: 7200 });
      time.advance(3600);
      const view = await json(await asSigner(app, token, ''));
      assert.equal(
        [view.agreement.closedReason, view.agreement.closedAt],
        ['expired', time.now.toISOString().replace(/\.\d{3}Z$/, '+00:00')],
      );
      const refused = await asSigner(app, token, '/sign', { signature: PNG_SIGNATURE });
      assert.is(refused.status, 409);
      assert.match((await json(refused)).message, /is expired/);
      const audit = await json(await app.api(`/agreements/${agreement.id}/audit`));
      assert.equal(audit.data.filter((entry: { action: string }) => entry.action === 'expired').length, 1);
      assert.is(audit.verified, true);
    },
  );
});

test("the request log never holds a signing token; the audit route answers 404 for another account's agreement", async () => {
  const lines: string[] = [];
  const logger: Logger = {
    debug() {},
    info: (object) => lines.push(JSON.stringify(object)),
    warn() {},
    error: (object) => lines.push(JSON.stringify(object)),
  };
  await withPortal({ signingKeys: [SIGNING_KEY_1], logger, webhooks: { tick: NEVER } }, async (app) => {
    const agreement = await createAgreement(app);
    const { token } = await linkFor(app, agreement.id, agreement.signers[0].id);
    await asSigner(app, token, '');
    await asSigner(app, token, '/sign', { signature: PNG_SIGNATURE });
    const [payload, signature] = token.split('.');
    assert.ok(lines.length >= 4);
    for (const line of lines) assert.not.ok(line.includes(payload!) || line.includes(signature!), line);
    assert.is(
      (await app.api(`/agreements/${agreement.id}/audit`, { headers: { authorization: 'Bearer key-of-account-b' } }))
        .status,
      404,
    );
    assert.is((await app.api('/agreements/nope/audit')).status, 404);
  });
});

test('reminders: a round per interval on the tick, for the signer whose turn it is; once per round however often it ticks', async () => {
  const time = manualClock();
  const transport = memoryTransport();
  await withPortal(
    {
      signingKeys: [SIGNING_KEY_1],
      clock: time.clock,
      transport,
      webhooks: { tick: NEVER },
      agreements: { reminderIntervalMs: 60_000 },
    },
    async (app) => {
      await app.portal.webhooks.create('acct_a', {
        type: 'agreement-reminder-due',
        url: 'https://hooks.example.com/remind',
      });
      const agreement = await createAgreement(app, { signingOrder: 'sequential' });
      const [first, second] = agreement.signers;
      const reminders = () =>
        transport.calls
          .map((call) => JSON.parse(call.body))
          .filter((event) => event.type === 'agreement-reminder-due')
          .map((event) => event.data.signerId);
      time.advance(59);
      await app.portal.worker!.tick();
      assert.equal(reminders(), [], 'not before the interval');
      time.advance(1);
      await app.portal.worker!.tick();
      await app.portal.worker!.tick();
      assert.equal(reminders(), [first.id], 'one round, for the first signer only (sequential)');
      await app.portal.agreements.sign('acct_a', agreement.id, first.id, { signature: PNG_SIGNATURE });
      time.advance(60);
      await app.portal.worker!.tick();
      assert.equal(reminders(), [first.id, second.id], 'the next round, for the signer whose turn it now is');
      // Ticks missed for five intervals make one round, not five.
      time.advance(300);
      await app.portal.worker!.tick();
      await app.portal.worker!.tick();
      assert.equal(reminders().length, 3);
      const audit = await json(await app.api(`/agreements/${agreement.id}/audit`));
      assert.equal(
        audit.data
          .filter((entry: { action: string }) => entry.action === 'reminder')
          .map((entry: { signerId: string }) => entry.signerId),
        [first.id, second.id, second.id],
      );
      assert.is(audit.verified, true);
      // A signed agreement has no more rounds.
      await app.portal.agreements.sign('acct_a', agreement.id, second.id, { signature: PNG_SIGNATURE });
      time.advance(600);
      await app.portal.worker!.tick();
      assert.is(reminders().length, 3);
    },
  );
});

test('the tick closes an agreement whose expiry came, though no request reached it: agreement-expired once', async () => {
  const time = manualClock();
  const transport = memoryTransport();
  await withPortal(
    { signingKeys: [SIGNING_KEY_1], clock: time.clock, transport, webhooks: { tick: NEVER } },
    async (app) => {
      await app.portal.webhooks.create('acct_a', {
        type: 'agreement-expired',
        url: 'https://hooks.example.com/expired',
      });
      const agreement = await createAgreement(app, {
        expiresAt: new Date(time.now.getTime() + 3600_000).toISOString(),
      });
      time.advance(3599);
      await app.portal.worker!.tick();
      assert.is((await app.portal.agreements.get('acct_a', agreement.id))!.closedReason, null);
      time.advance(1);
      await app.portal.worker!.tick();
      await app.portal.worker!.tick();
      const stored = (await app.portal.agreements.get('acct_a', agreement.id))!;
      assert.equal(
        [stored.closedReason, stored.closedAt],
        ['expired', time.now.toISOString().replace(/\.\d{3}Z$/, '+00:00')],
      );
      assert.is(transport.calls.filter((call) => JSON.parse(call.body).type === 'agreement-expired').length, 1);
    },
  );
});

test('the trail stays bounded: 30 reminder rounds, then none; a fresh link for each round and ten more, then 409', async () => {
  const time = manualClock();
  await withPortal(
    {
      signingKeys: [SIGNING_KEY_1],
      clock: time.clock,
      webhooks: { tick: NEVER },
      agreements: { reminderIntervalMs: 60_000 },
    },
    async (app) => {
      const agreement = await createAgreement(app, {}, [SIGNER]);
      const signerId = agreement.signers[0].id;
      // A host that answers each reminder with a fresh link is never refused one.
      for (let round = 0; round < 35; round++) {
        time.advance(60);
        await app.portal.worker!.tick();
        if (round < 30) await linkFor(app, agreement.id, signerId);
      }
      for (let n = 0; n < 10; n++) await linkFor(app, agreement.id, signerId);
      const refused = await app.api(`/agreements/${agreement.id}/signers/${signerId}/signing-link`, { method: 'POST' });
      assert.is(refused.status, 409);
      assert.match((await json(refused)).message, /has been sent 40 signing links/);
      const audit = await json(await app.api(`/agreements/${agreement.id}/audit`));
      assert.is(audit.data.filter((entry: { action: string }) => entry.action === 'reminder').length, 30);
      assert.is(audit.data.length, 1 + 40 + 30);
      assert.is(audit.verified, true);
    },
  );
});

test('trustProxy: the trail keeps the address the proxy appended to X-Forwarded-For, not one the client wrote before it', async () => {
  for (const trustProxy of [true, false]) {
    await withPortal({ signingKeys: [SIGNING_KEY_1], trustProxy, webhooks: { worker: false } }, async (app) => {
      const agreement = await createAgreement(app, {}, [SIGNER]);
      const { token } = await linkFor(app, agreement.id, agreement.signers[0].id);
      const viewed = await fetch(`${app.url}/v1/signing`, {
        headers: { authorization: `Bearer ${token}`, 'x-forwarded-for': '6.6.6.6, 203.0.113.9' },
      });
      assert.is(viewed.status, 200);
      const audit = await json(await app.api(`/agreements/${agreement.id}/audit`));
      const entry = audit.data.find((item: { action: string }) => item.action === 'viewed');
      assert.is(entry.ip, trustProxy ? '203.0.113.9' : '127.0.0.1', `trustProxy: ${trustProxy}`);
    });
  }
});

test('agreements.reminderIntervalMs is checked when the portal is made', async () => {
  for (const reminderIntervalMs of [0, 59_999, 1.5, -60_000, Number.NaN]) {
    let refused = false;
    try {
      await withPortal({ agreements: { reminderIntervalMs } }, async () => {});
    } catch (error) {
      refused = /reminderIntervalMs must be a whole number of milliseconds, at least 60000/.test(
        (error as Error).message,
      );
    }
    assert.ok(refused, String(reminderIntervalMs));
  }
});

test("a HEAD of /signing shows nothing and marks nothing viewed; a signer never reads another's e-mail or decline reason", async () => {
  await withPortal({ signingKeys: [SIGNING_KEY_1], webhooks: { tick: NEVER } }, async (app) => {
    const agreement = await createAgreement(app, {}, [SIGNER, signer(2), signer(3)]);
    const [first, second, third] = agreement.signers;
    const one = await linkFor(app, agreement.id, first.id);
    const declined = await linkFor(app, agreement.id, third.id);
    assert.is(
      (await asSigner(app, declined.token, '/decline', { reason: 'Private reason of the third signer' })).status,
      200,
    );
    const head = await fetch(`${app.url}/v1/signing`, {
      method: 'HEAD',
      headers: { authorization: `Bearer ${one.token}` },
    });
    assert.is(head.status, 200);
    assert.is(
      (await app.portal.agreements.get('acct_a', agreement.id))!.signers[0]!.viewedAt,
      null,
      'a HEAD is no view',
    );
    const trail = await json(await app.api(`/agreements/${agreement.id}/audit`));
    assert.not.ok(
      trail.data.some((entry: { action: string }) => entry.action === 'viewed'),
      'nor in the trail',
    );

    const view = await json(await asSigner(app, one.token, ''));
    const text = JSON.stringify(view);
    for (const secret of [second.email, third.email, 'Private reason of the third signer'])
      assert.not.ok(text.includes(secret), secret);
    assert.equal(view.agreement.signers[1], {
      id: second.id,
      firstName: second.firstName,
      lastName: second.lastName,
      signedAt: null,
      declinedAt: null,
    });
    assert.is(view.agreement.signers[2].declinedAt !== null, true, "another's outcome is shown");
    assert.is(view.agreement.signers[0].email, SIGNER.email, 'the signer sees themselves whole');
  });
});

test('signing-link options: null and [] are no object, a 400 naming the body; no body is the defaults', async () => {
  await withPortal({ signingKeys: [SIGNING_KEY_1], webhooks: { tick: NEVER } }, async (app) => {
    const agreement = await createAgreement(app);
    const path = `/agreements/${agreement.id}/signers/${agreement.signers[0].id}/signing-link`;
    for (const body of ['null', '[]', '[{"expiresInSeconds": 60}]']) {
      const res = await app.api(path, { method: 'POST', body, headers: { 'content-type': 'application/json' } });
      assert.is(res.status, 400, body);
      assert.match((await json(res)).message, /^signingLink: must be an object/, body);
    }
    assert.is((await app.api(path, { method: 'POST' })).status, 201);
  });
});

test("the tick is fair between accounts: 300 of one account's agreements expiring at once do not hold back another's", async () => {
  const time = manualClock();
  const storage = memoryStorage();
  await withPortal(
    { storage, signingKeys: [SIGNING_KEY_1], clock: time.clock, webhooks: { tick: NEVER } },
    async (app) => {
      const soon = new Date(time.clock().getTime() + 120_000).toISOString().replace(/\.\d+Z$/, '+00:00');
      for (let i = 0; i < 300; i++) {
        const form = validFormData({ signers: [SIGNER] });
        form.set('expiresAt', soon);
        assert.is((await app.api('/agreements', { method: 'POST', body: form })).status, 201);
      }
      const form = validFormData({ signers: [SIGNER] });
      form.set('expiresAt', new Date(time.clock().getTime() + 180_000).toISOString().replace(/\.\d+Z$/, '+00:00'));
      const other = await json(
        await app.api('/agreements', {
          method: 'POST',
          body: form,
          headers: { authorization: 'Bearer key-of-account-b' },
        }),
      );
      time.advance(240);
      await app.portal.worker!.tick();
      const seen = await json(
        await app.api(`/agreements/${other.id}`, { headers: { authorization: 'Bearer key-of-account-b' } }),
      );
      assert.is(seen.closedReason, 'expired', "the other account's agreement closed in the first tick");
    },
  );
});

test('reminders turned on reach the agreements made while they were off: the tick schedules them, on their own rhythm', async () => {
  const time = manualClock();
  const storage = memoryStorage();
  let agreementId = '';
  await withPortal(
    { storage, signingKeys: [SIGNING_KEY_1], clock: time.clock, webhooks: { tick: NEVER } },
    async (app) => {
      agreementId = (await createAgreement(app, {}, [SIGNER])).id;
    },
  );
  assert.is((await storage.getAgreement('acct_a', agreementId))!.nextReminderAt, null);
  time.advance(90);
  const interval = 60_000;
  await withPortal(
    {
      storage,
      signingKeys: [SIGNING_KEY_1],
      clock: time.clock,
      webhooks: { tick: NEVER },
      agreements: { reminderIntervalMs: interval },
    },
    async (app) => {
      await app.portal.worker!.tick();
      const scheduled = (await storage.getAgreement('acct_a', agreementId))!;
      assert.is(
        Date.parse(scheduled.nextReminderAt!) - Date.parse(scheduled.createdAt),
        2 * interval,
        'the next multiple of the interval after its creation',
      );
      time.advance(60);
      await app.portal.worker!.tick();
      const trail = await json(await app.api(`/agreements/${agreementId}/audit`));
      assert.is(trail.data.filter((entry: { action: string }) => entry.action === 'reminder').length, 1);
      assert.is(trail.verified, true);
    },
  );
});

test('GET /agreements/{id} of an agreement past its expiresAt shows it closed (expired) before any tick, and closes it once', async () => {
  const time = manualClock();
  const transport = memoryTransport();
  await withPortal(
    { signingKeys: [SIGNING_KEY_1], clock: time.clock, transport, webhooks: { tick: NEVER } },
    async (app) => {
      const hook = await app.portal.webhooks.create('acct_a', {
        type: 'agreement-expired',
        url: 'https://hooks.example.com/expired',
      });
      const form = validFormData({ signers: [SIGNER] });
      form.set('expiresAt', new Date(time.clock().getTime() + 60_000).toISOString().replace(/\.\d+Z$/, '+00:00'));
      const agreement = await json(await app.api('/agreements', { method: 'POST', body: form }));
      assert.is((await json(await app.api(`/agreements/${agreement.id}`))).closedReason, null, 'open before its time');
      time.advance(61);
      const reads = await Promise.all([1, 2, 3].map(async () => json(await app.api(`/agreements/${agreement.id}`))));
      for (const read of reads) assert.equal([read.closedReason, read.closedAt !== null], ['expired', true]);
      assert.is((await app.portal.agreements.get('acct_a', agreement.id))!.closedReason, 'expired');
      assert.is((await app.portal.webhooks.deliveries('acct_a', hook.id))!.length, 1, 'agreement-expired once');
    },
  );
});

test.run();
