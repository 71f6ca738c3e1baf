import { createHash } from 'node:crypto';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { memoryTransport } from '../../adapters/memory/index.js';
import { sqlAdapters } from '../../adapters/sql/index.js';
import { connectPostgres, dropSchema, freshSchema } from '../helpers/sql.js';
import type { PortalOptions } from '../../src/index.js';
import { PNG_SIGNATURE, signer, validFormData } from '../helpers/agreements.js';
import { openBackends } from '../helpers/backends.js';
import { SIGNING_KEY_1 } from '../helpers/download.js';
import { recordingNotifier, until } from '../helpers/notifier.js';
import { type TestPortal, json, startPortal } from '../helpers/server.js';
import { NEVER, manualClock } from '../helpers/webhooks.js';

/**
 * Signer identification on every adapter: the mailed code and the access code open the documents
 * and nothing else does; the fifth wrong code revokes the link however many arrive at once; no code
 * is ever in what the store holds; and mail the notifier refused is sent on a later tick, also by a
 * portal started again on the same store.
 */
const { list: backends, close } = await openBackends('identification');
const suites: ReturnType<typeof suite>[] = [];

const IDENTIFIES = { ...signer(1), shouldIdentify: true };
const ACCESS_CODE = 'harbour-blue-7731';

async function agreementWith(app: TestPortal, signers: object[] = [IDENTIFIES]) {
  const res = await app.api('/agreements', { method: 'POST', body: validFormData({ signers }) });
  assert.is(res.status, 201);
  return json(res);
}

async function linkFor(app: TestPortal, agreementId: string, signerId: string, body: object = {}) {
  const res = await app.api(`/agreements/${agreementId}/signers/${signerId}/signing-link`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: await json(res) };
}

const tokenOf = (link: string) => new URL(link).hash.slice(1);

function asSigner(app: TestPortal, token: string, path: string, body?: object) {
  return fetch(`${app.url}/v1/signing${path}`, {
    method: body === undefined && path === '' ? 'GET' : 'POST',
    headers: {
      authorization: `Bearer ${token}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
}

for (const backend of backends) {
  const on = suite(`identification: ${backend.name}`);

  /** A portal on a fresh store of this backend, with a notifier, and a manual clock. */
  async function open(extra: PortalOptions = {}) {
    const { options, cleanup, dump, reopen } = await backend.options();
    const notifier = recordingNotifier();
    const time = manualClock();
    const base = {
      transport: memoryTransport(),
      signingKeys: [SIGNING_KEY_1],
      webhooks: { tick: NEVER },
      clock: time.clock,
      notifier,
    };
    const app = await startPortal({ ...options, ...base, ...extra });
    return { app, notifier, time, dump, cleanup, base, reopen };
  }

  on(
    'a mailed code: invitation, no documents until identified, wrong code costs a try, the right one opens them; no code stored or logged',
    async () => {
      const logged: string[] = [];
      const log = (level: string) => (object: object, message?: string) =>
        void logged.push(`${level} ${message ?? ''} ${JSON.stringify(object)}`);
      const logger = { debug: log('debug'), info: log('info'), warn: log('warn'), error: log('error') };
      const { app, notifier, dump, cleanup } = await open({ logger });
      try {
        const agreement = await agreementWith(app);
        const signerId = agreement.signers[0].id;
        const issued = await linkFor(app, agreement.id, signerId, { send: true });
        assert.is(issued.status, 201);
        await until(() => notifier.sent.length === 1, 'the invitation');
        const invitation = notifier.sent[0]!;
        assert.is(invitation.kind, 'signing-invitation');
        assert.is(invitation.to, '"Signer1 Lee" <s1@example.com>');
        assert.is(notifier.linkFor('s1@example.com'), issued.body.link, 'the mail carries the link the host was given');
        assert.match(invitation.html!, /<a href="http/);
        assert.not.match(invitation.html!, /<img/, 'no tracking pixel');
        const token = tokenOf(issued.body.link);

        const before = await json(await asSigner(app, token, ''));
        assert.equal(before.identification, { required: true, verified: false, methods: ['email-code'] });
        assert.equal(before.documents, [], 'no document before identification');
        assert.equal(before.agreement.documents, [], 'nor what they are');
        assert.is(before.signer.viewedAt, null, 'not viewed: nothing was shown');
        assert.is((await asSigner(app, token, '/sign', { signature: PNG_SIGNATURE })).status, 403);
        assert.is((await asSigner(app, token, '/decline', {})).status, 403);

        const sent = await asSigner(app, token, '/identify/email-code');
        assert.is(sent.status, 202);
        await until(() => notifier.sent.length === 2, 'the code');
        const code = notifier.codeFor('s1@example.com');
        assert.match(code, /^\d{6}$/);
        const wrong = String((Number(code) + 1) % 1_000_000).padStart(6, '0');
        const refused = await asSigner(app, token, '/identify', { code: wrong });
        assert.is(refused.status, 403);
        assert.match((await json(refused)).message, /4 tries left/);

        const identified = await asSigner(app, token, '/identify', { code });
        assert.is(identified.status, 200);
        const view = await json(identified);
        assert.is(view.identification.verified, true);
        assert.is(view.identification.method, 'email-code');
        assert.is(view.documents.length, 1);
        assert.ok(view.signer.viewedAt !== null, 'viewed once the documents were shown');
        assert.is((await asSigner(app, token, '/identify', { code })).status, 403, 'a spent code is refused');

        const signed = await asSigner(app, token, '/sign', {
          signature: PNG_SIGNATURE,
          consent: { disclosureVersion: view.disclosure.version },
        });
        assert.is(signed.status, 200);
        const host = await json(await app.api(`/agreements/${agreement.id}`));
        assert.equal(host.signers[0].identification, {
          required: true,
          verified: true,
          method: 'email-code',
          at: view.identification.at,
        });

        const audit = await json(await app.api(`/agreements/${agreement.id}/audit`));
        assert.is(audit.verified, true);
        const actions = audit.data.map((entry: { action: string }) => entry.action);
        assert.equal(actions, [
          'created',
          'link-issued',
          'identification-code-sent',
          'identification-failed',
          'identified',
          'viewed',
          'consented',
          'signed',
        ]);
        assert.is(audit.data[4].method, 'email-code');
        assert.is(audit.data[6].disclosureHash, createHash('sha256').update(view.disclosure.text).digest('hex'));
        // The rule of docs/signing.md, with Node's crypto alone: the method and the disclosure's hash are in the chain.
        let previous = '0'.repeat(64);
        for (const entry of audit.data) {
          const documents = entry.documents.map((d: { id: string; fileHash: string }) => [d.id, d.fileHash]);
          assert.match(entry.personal, /^[0-9a-f]{64}$/, 'a new trail commits to personal fields through a digest');
          const fields: unknown[] = [entry.at, entry.action, entry.actor, entry.signerId, entry.personal, documents];
          fields.push(entry.state);
          if (entry.method !== undefined) fields.push({ method: entry.method });
          if (entry.disclosureHash !== undefined) fields.push({ disclosureHash: entry.disclosureHash });
          assert.is(
            entry.hash,
            createHash('sha256')
              .update(`${previous}\n${JSON.stringify(fields)}`)
              .digest('hex'),
          );
          previous = entry.hash;
        }

        await until(() => notifier.sent.some((mail) => mail.kind === 'agreement-completed'), 'the completion mail');
        const completed = notifier.sent.find((mail) => mail.kind === 'agreement-completed')!;
        assert.equal(
          completed.attachments!.map((one) => [one.filename, one.contentType, one.content.subarray(0, 5).toString()]),
          [[`certificate-${agreement.id}.pdf`, 'application/pdf', '%PDF-']],
        );

        // The code as a value of its own: six digits can also turn up by chance inside the hex of a
        // stored PDF or hash, or inside a longer number, which is not the code being kept.
        const asValue = new RegExp(`(?<![0-9A-Za-z])${code}(?![0-9A-Za-z])`);
        const stored = await dump();
        assert.ok(stored.includes(agreement.id), 'the dump holds the agreement');
        assert.not.ok(asValue.test(stored), 'the mailed code is nowhere in the store');
        assert.not.ok(asValue.test(JSON.stringify(audit)), 'nor in the trail');
        assert.ok(logged.length > 5, 'requests were logged');
        assert.not.ok(
          logged.some((line) => asValue.test(line)),
          'nor in any log line',
        );
      } finally {
        await app.close();
        await cleanup();
      }
    },
  );

  on(
    'an access code: the only method offered; kept as a hash; the fifth of 200 concurrent wrong codes revokes the link',
    async () => {
      const { app, notifier, dump, cleanup } = await open();
      try {
        const agreement = await agreementWith(app, [{ ...signer(2), shouldIdentify: false }]);
        const signerId = agreement.signers[0].id;
        assert.is(
          (await linkFor(app, agreement.id, signerId, { accessCode: 'abc' })).status,
          400,
          'at least 4 characters',
        );
        const issued = await linkFor(app, agreement.id, signerId, { accessCode: ACCESS_CODE });
        const token = tokenOf(issued.body.link);
        const before = await json(await asSigner(app, token, ''));
        assert.equal(before.identification, { required: true, verified: false, methods: ['access-code'] });
        assert.is((await asSigner(app, token, '/identify/email-code')).status, 409, 'the access code is the way in');
        assert.is(notifier.sent.length, 0);

        const guesses = await Promise.all(
          Array.from({ length: 200 }, (_, i) => asSigner(app, token, '/identify', { code: `guess-${i}` })),
        );
        const statuses = guesses.map((res) => res.status);
        assert.is(statuses.filter((status) => status === 403).length, 4, 'four wrong codes are told the tries left');
        assert.is(
          statuses.filter((status) => status === 401).length,
          196,
          'the fifth, and every one after, finds the link revoked',
        );
        assert.is(
          (await asSigner(app, token, '/identify', { code: ACCESS_CODE })).status,
          401,
          'the right code no longer helps',
        );
        assert.is((await asSigner(app, token, '')).status, 401);

        const audit = await json(await app.api(`/agreements/${agreement.id}/audit`));
        const actions = audit.data.map((entry: { action: string }) => entry.action);
        assert.is(actions.filter((action: string) => action === 'identification-failed').length, 5);
        assert.is(actions.at(-1), 'identification-locked');

        // A new link starts again, with its own code.
        const again = await linkFor(app, agreement.id, signerId, { accessCode: ACCESS_CODE });
        const opened = await asSigner(app, tokenOf(again.body.link), '/identify', { code: ACCESS_CODE });
        assert.is(opened.status, 200);
        assert.is((await json(opened)).identification.method, 'access-code');
        const stored = await dump();
        assert.not.ok(stored.includes(ACCESS_CODE), 'the access code is nowhere in the store');
        assert.ok(stored.includes('scrypt$'), 'its hash is');
      } finally {
        await app.close();
        await cleanup();
      }
    },
  );

  on('an expired code costs no try; five sends an hour, then 429 with Retry-After', async () => {
    const { app, notifier, time, cleanup } = await open();
    try {
      const agreement = await agreementWith(app);
      const token = tokenOf((await linkFor(app, agreement.id, agreement.signers[0].id)).body.link);
      assert.is((await asSigner(app, token, '/identify', { code: '000000' })).status, 403, 'no code outstanding');
      assert.is((await asSigner(app, token, '/identify/email-code')).status, 202);
      await until(() => notifier.sent.length === 1, 'the code');
      const code = notifier.codeFor('s1@example.com');
      time.advance(601);
      const expired = await asSigner(app, token, '/identify', { code });
      assert.is(expired.status, 403);
      assert.match((await json(expired)).message, /expired.*5 tries left/);
      for (let send = 2; send <= 5; send++) assert.is((await asSigner(app, token, '/identify/email-code')).status, 202);
      const limited = await asSigner(app, token, '/identify/email-code');
      assert.is(limited.status, 429);
      assert.is(limited.headers.get('retry-after'), String(3600 - 601));
      time.advance(3600 - 601);
      assert.is((await asSigner(app, token, '/identify/email-code')).status, 202, 'an hour after the first, one more');
    } finally {
      await app.close();
      await cleanup();
    }
  });

  on('reminders by mail: a fresh link to each signer, the older one revoked, the access code kept', async () => {
    const { app, notifier, time, cleanup } = await open({
      agreements: { reminderIntervalMs: 3_600_000 },
      publicUrl: 'https://sign.example.com/v1',
    });
    try {
      const agreement = await agreementWith(app, [signer(4), signer(5)]);
      const [plainSigner, coded] = agreement.signers;
      const first = tokenOf((await linkFor(app, agreement.id, plainSigner.id)).body.link);
      const codedFirst = tokenOf((await linkFor(app, agreement.id, coded.id, { accessCode: ACCESS_CODE })).body.link);
      time.advance(3600);
      await app.portal.worker!.tick();
      const reminders = notifier.sent.filter((mail) => mail.kind === 'signing-reminder');
      assert.equal(reminders.map((mail) => mail.signerId).sort(), [plainSigner.id, coded.id].sort());
      assert.match(reminders[0]!.subject, /^Reminder: "Lease 2026" awaits your signature$/);
      const fresh = notifier.linkFor('s4@example.com');
      assert.ok(fresh.startsWith('https://sign.example.com/v1/sign#'), 'made under publicUrl');
      assert.is((await asSigner(app, first, '')).status, 401, 'the older link is revoked');
      assert.is((await asSigner(app, tokenOf(fresh), '')).status, 200, 'the mailed one works');
      assert.is((await asSigner(app, codedFirst, '')).status, 401);
      const codedFresh = tokenOf(notifier.linkFor('s5@example.com'));
      const view = await json(await asSigner(app, codedFresh, ''));
      assert.equal(view.identification.methods, ['access-code'], 'the fresh link still asks for the access code');
      assert.is((await asSigner(app, codedFresh, '/identify', { code: ACCESS_CODE })).status, 200);
      const audit = await json(await app.api(`/agreements/${agreement.id}/audit`));
      assert.equal(
        audit.data
          .filter((entry: { actor: string; action: string }) => entry.actor === 'system')
          .map((entry: { action: string }) => entry.action),
        ['reminder', 'link-issued', 'reminder', 'link-issued'],
      );
      assert.is(audit.verified, true);
    } finally {
      await app.close();
      await cleanup();
    }
  });

  suites.push(on);

  on(
    'mail the notifier refuses twice is sent on a later tick, and by a portal started again on the store',
    async () => {
      const { app, notifier, time, cleanup, base, reopen, dump } = await open();
      let second: TestPortal | undefined;
      try {
        const agreement = await agreementWith(app, [{ ...signer(3), shouldIdentify: false }]);
        notifier.refusing = 2;
        assert.is((await linkFor(app, agreement.id, agreement.signers[0].id, { send: true })).status, 201);
        // Once the refusal is stored, with the retry's time.
        await until(async () => (await dump()).includes('550 mailbox unavailable'), 'the first refusal, recorded');
        time.advance(5);
        await app.portal.worker!.tick();
        assert.is(notifier.refused, 2, 'the retry, 5 s on (the schedule), refused too');
        assert.is(notifier.sent.length, 0);
        if (reopen === null) {
          console.log(`SKIP the restart half on ${backend.name}: a memory store keeps nothing across a restart`);
          time.advance(300);
          await app.portal.worker!.tick();
        } else {
          await app.close();
          second = await startPortal({ ...reopen(), ...base, notifier });
          time.advance(300);
          await second.portal.worker!.tick();
        }
        assert.is(notifier.sent.length, 1, 'sent on the third attempt');
        assert.is(notifier.sent[0]!.kind, 'signing-invitation');
        await (second ?? app).portal.worker!.tick();
        assert.is(notifier.sent.length, 1, 'once');
      } finally {
        await (second ?? app).close();
        await cleanup();
      }
    },
  );
}

const plain = suite('identification: without a notifier');

plain(
  'a shouldIdentify signer needs an access code; send: true is refused; the e-mail code is not offered',
  async () => {
    const app = await startPortal({ signingKeys: [SIGNING_KEY_1], webhooks: { worker: false } });
    try {
      const agreement = await agreementWith(app);
      const signerId = agreement.signers[0].id;
      const bare = await linkFor(app, agreement.id, signerId);
      assert.is(bare.status, 409);
      assert.match(bare.body.message, /accessCode/);
      assert.is((await linkFor(app, agreement.id, signerId, { accessCode: ACCESS_CODE, send: true })).status, 409);
      const issued = await linkFor(app, agreement.id, signerId, { accessCode: ACCESS_CODE });
      assert.is(issued.status, 201);
      const token = tokenOf(issued.body.link);
      assert.equal((await json(await asSigner(app, token, ''))).identification.methods, ['access-code']);
      assert.is((await asSigner(app, token, '/identify/email-code')).status, 409);
      assert.is((await asSigner(app, token, '/identify', { code: ACCESS_CODE })).status, 200);
      const stale = await asSigner(app, token, '/sign', {
        signature: PNG_SIGNATURE,
        consent: { disclosureVersion: 'old' },
      });
      assert.is(stale.status, 409);
      assert.match((await json(stale)).message, /disclosure in force/);
    } finally {
      await app.close();
    }
  },
);

plain('10,000 wrong guesses at one link: the fifth revokes it, and nothing after is checked', async () => {
  const app = await startPortal({ signingKeys: [SIGNING_KEY_1], webhooks: { worker: false } });
  try {
    const agreement = await agreementWith(app);
    const token = tokenOf(
      (await linkFor(app, agreement.id, agreement.signers[0].id, { accessCode: ACCESS_CODE })).body.link,
    );
    const statuses = new Map<number, number>();
    const started = performance.now();
    for (let batch = 0; batch < 100; batch++) {
      const answers = await Promise.all(
        Array.from({ length: 100 }, (_, i) => asSigner(app, token, '/identify', { code: `${batch}-${i}-wrong` })),
      );
      for (const res of answers) statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
    }
    const elapsed = performance.now() - started;
    console.log(`  10,000 wrong guesses: ${JSON.stringify(Object.fromEntries(statuses))} in ${Math.round(elapsed)} ms`);
    assert.equal(Object.fromEntries(statuses), { 401: 9996, 403: 4 });
    assert.is((await asSigner(app, token, '/identify', { code: ACCESS_CODE })).status, 401);
    const audit = await json(await app.api(`/agreements/${agreement.id}/audit`));
    assert.is(audit.data.filter((entry: { action: string }) => entry.action === 'identification-failed').length, 5);
  } finally {
    await app.close();
  }
});

plain('two instances on one PostgreSQL ticking at once send a mail once', async () => {
  const postgres = await connectPostgres();
  if (postgres.pool === undefined) return void console.log(`  skipped: ${postgres.reason}`);
  const schema = freshSchema();
  const time = manualClock();
  const notifier = recordingNotifier();
  const shared = {
    signingKeys: [SIGNING_KEY_1],
    webhooks: { tick: NEVER },
    transport: memoryTransport(),
    clock: time.clock,
    notifier,
  };
  const one = await startPortal({ ...sqlAdapters({ client: postgres.pool, schema }), ...shared });
  const two = await startPortal({ ...sqlAdapters({ client: postgres.pool, schema }), ...shared });
  try {
    const agreements = [];
    for (let i = 0; i < 5; i++) agreements.push(await agreementWith(one, [signer(20 + i)]));
    notifier.refusing = 5;
    for (const agreement of agreements) await linkFor(one, agreement.id, agreement.signers[0].id, { send: true });
    await until(() => notifier.refused === 5, 'the first attempts, refused');
    const pool = postgres.pool;
    const recorded = async () =>
      Number(
        (
          await pool.query(
            `SELECT count(*) AS n FROM "${schema}".portal_agreements WHERE mail LIKE '%550 mailbox unavailable%'`,
          )
        ).rows[0].n,
      ) === 5;
    await until(recorded, 'the refusals, recorded with their retry');
    time.advance(5);
    await Promise.all([
      one.portal.worker!.tick(),
      two.portal.worker!.tick(),
      one.portal.worker!.tick(),
      two.portal.worker!.tick(),
    ]);
    assert.equal(
      notifier.sent.map((mail) => mail.agreementId).sort(),
      agreements.map((agreement) => agreement.id).sort(),
      'each mail once',
    );
    time.advance(3600);
    await Promise.all([one.portal.worker!.tick(), two.portal.worker!.tick()]);
    assert.is(notifier.sent.length, 5, 'and never again');
  } finally {
    await one.close();
    await two.close();
    await dropSchema(postgres.pool, schema);
    await postgres.pool.end();
  }
});

plain.after(close);
for (const one of suites) one.run();
plain.run();
