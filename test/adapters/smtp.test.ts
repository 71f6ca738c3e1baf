import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { fsBlobs, fsStorage } from '../../adapters/fs/index.js';
import { memoryTransport } from '../../adapters/memory/index.js';
import { smtpNotifier } from '../../adapters/smtp/index.js';
import { PNG_SIGNATURE, signer, validFormData } from '../helpers/agreements.js';
import { SIGNING_KEY_1 } from '../helpers/download.js';
import { removeDir, tempDir } from '../helpers/fs-dirs.js';
import { until } from '../helpers/notifier.js';
import { type TestPortal, json, startPortal } from '../helpers/server.js';
import { startSmtpSink } from '../helpers/smtp-sink.js';
import { NEVER, manualClock } from '../helpers/webhooks.js';

/**
 * The notifier through a real SMTP exchange: an in-process SMTP server receives the invitation with
 * its link and the identification code, the code opens the documents, and the completion carries
 * the certificate. A server refusing twice gets the mail on a later tick of a restarted portal.
 */

const post = (app: TestPortal, path: string, body: object) =>
  app.api(path, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
const asSigner = (app: TestPortal, token: string, path: string, body?: object) =>
  fetch(`${app.url}/v1/signing${path}`, {
    method: path === '' ? 'GET' : 'POST',
    headers: {
      authorization: `Bearer ${token}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });

test('smtpNotifier checks its options', () => {
  assert.throws(
    () => smtpNotifier({ url: 'http://mail.example.com', from: 'a@example.com' }),
    /smtp:\/\/ or smtps:\/\//,
  );
  assert.throws(() => smtpNotifier({ url: 'smtp://mail.example.com', from: 'nobody' }), /from must be an address/);
  assert.throws(
    () => smtpNotifier({ url: 'smtp://mail.example.com', from: 'a@example.com\r\nBcc: x@example.com' }),
    /from must be an address/,
  );
});

test('a real SMTP exchange: the link, the code that signs in, the completion with its certificate', async () => {
  const sink = await startSmtpSink();
  const notifier = smtpNotifier({ url: sink.url, from: '"Acme Signing" <signing@acme.example>' });
  const app = await startPortal({
    signingKeys: [SIGNING_KEY_1],
    webhooks: { worker: false },
    notifier,
    branding: { name: 'Acme Ltd' },
  });
  try {
    const agreement = await json(
      await app.api('/agreements', {
        method: 'POST',
        body: validFormData({ signers: [{ ...signer(1), shouldIdentify: true }] }),
      }),
    );
    const issued = await json(
      await post(app, `/agreements/${agreement.id}/signers/${agreement.signers[0].id}/signing-link`, { send: true }),
    );
    await until(() => sink.received.length === 1, 'the invitation');
    const invitation = sink.received[0]!;
    assert.equal(invitation.to, ['s1@example.com']);
    assert.is(invitation.from, 'signing@acme.example');
    assert.is(invitation.subject, 'Acme Ltd asks you to sign "Lease 2026"');
    assert.ok(invitation.text.includes(issued.link), 'the text part carries the link');
    assert.match(invitation.raw, /Content-Type: text\/html/, 'and an HTML part');
    assert.match(invitation.raw, /Auto-Submitted: auto-generated/);

    const token = new URL(issued.link).hash.slice(1);
    assert.is((await asSigner(app, token, '/identify/email-code')).status, 202);
    await until(() => sink.received.length === 2, 'the code');
    const code = /\b(\d{6})\b/.exec(sink.received[1]!.text)?.[1];
    assert.ok(code !== undefined, 'the code is in the mail');
    const view = await asSigner(app, token, '/identify', { code });
    assert.is(view.status, 200);
    assert.is((await json(view)).documents.length, 1);
    assert.is((await asSigner(app, token, '/sign', { signature: PNG_SIGNATURE })).status, 200);
    await until(() => sink.received.length === 3, 'the completion');
    assert.is(sink.received[2]!.subject, '"Lease 2026" is signed');
    assert.equal(sink.received[2]!.attachments, [`certificate-${agreement.id}.pdf`]);
  } finally {
    await app.close();
    notifier.close();
    await sink.close();
  }
});

test('the SMTP server refusing twice: the invitation goes out on a later tick, after a restart', async () => {
  const sink = await startSmtpSink();
  const dir = tempDir('smtp');
  const time = manualClock();
  const notifier = smtpNotifier({ url: sink.url, from: 'signing@acme.example' });
  const adapters = () => ({ storage: fsStorage({ dir }), blobs: fsBlobs({ dir: `${dir}/blobs` }) });
  const options = {
    signingKeys: [SIGNING_KEY_1],
    webhooks: { tick: NEVER },
    transport: memoryTransport(),
    clock: time.clock,
    notifier,
  };
  let app = await startPortal({ ...adapters(), ...options });
  try {
    const agreement = await json(
      await app.api('/agreements', { method: 'POST', body: validFormData({ signers: [signer(2)] }) }),
    );
    sink.refusing = 2;
    assert.is(
      (await post(app, `/agreements/${agreement.id}/signers/${agreement.signers[0].id}/signing-link`, { send: true }))
        .status,
      201,
    );
    await until(() => sink.refused === 1, 'the first refusal');
    await app.close();
    app = await startPortal({ ...adapters(), ...options });
    time.advance(5);
    await app.portal.worker!.tick();
    assert.is(sink.refused, 2);
    time.advance(300);
    await app.portal.worker!.tick();
    assert.is(sink.received.length, 1);
    assert.match(sink.received[0]!.text, /\/sign#/);
  } finally {
    await app.close();
    notifier.close();
    await sink.close();
    removeDir(dir);
  }
});

test.run();
