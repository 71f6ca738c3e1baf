import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { memoryBlobs, memoryStorage } from '../../adapters/memory/index.js';
import { type Logger, type PortalOptions, createPortal } from '../../src/index.js';
import { SIGNING_KEY_1, SIGNING_KEY_2, getLink, linkPath, withParam } from '../helpers/download.js';
import { KEY_B, type TestPortal, json, rejects, startPortal } from '../helpers/server.js';

/** A quarter second past a whole second: expiry must still land on a whole second. */
let now = new Date('2026-03-01T10:00:00.250Z');
const clock = () => now;

/** A portal with one attachment (the text "hello") in account A, on shared or fresh memory adapters. */
async function portalWithAttachment(options: PortalOptions = {}) {
  now = new Date('2026-03-01T10:00:00.250Z');
  const app = await startPortal({ signingKeys: [SIGNING_KEY_1], clock, ...options });
  const attachment = await app.portal.tickets.putAttachment('acct_a', {
    ticketId: 'tck_ticket1',
    messageId: 'tcm_message1',
    name: 'hello.txt',
    mime: 'text/plain; charset=utf-8',
    body: 'hello',
  });
  return { app, attachment };
}

async function closeAll(...apps: TestPortal[]) {
  await Promise.all(apps.map((app) => app.close()));
}

test('the link route answers {link, expiresAt}: five minutes on, a whole second, in ATOM', async () => {
  const { app, attachment } = await portalWithAttachment();
  try {
    const res = await app.api(linkPath(attachment));
    assert.is(res.status, 200);
    assert.is(res.headers.get('content-type'), 'application/json; charset=utf-8');
    const body = await json(res);
    assert.equal(Object.keys(body).sort(), ['expiresAt', 'link']);
    assert.is(body.expiresAt, '2026-03-01T10:05:00+00:00');
    const link = new URL(body.link);
    assert.is(link.origin + link.pathname, `${app.url}/v1/downloads/${attachment.id}`);
    assert.is(link.searchParams.get('expires'), String(Date.parse('2026-03-01T10:05:00Z') / 1000));
    const download = await fetch(body.link);
    assert.is(download.status, 200);
    assert.is(await download.text(), 'hello');
  } finally {
    await app.close();
  }
});

test('the link is absolute under publicUrl when it is set', async () => {
  const { app, attachment } = await portalWithAttachment({ publicUrl: 'https://portal.example.com/api/v1/' });
  try {
    const { link } = await getLink(app, attachment);
    assert.ok(link.startsWith(`https://portal.example.com/api/v1/downloads/${attachment.id}?`), link);
    // The same path, served here: only the origin differs.
    const local = link.replace('https://portal.example.com/api/v1', `${app.url}/v1`);
    assert.is(await (await fetch(local)).text(), 'hello');
  } finally {
    await app.close();
  }
});

test('a malformed id is a 400 naming which one', async () => {
  const { app, attachment } = await portalWithAttachment();
  try {
    const { ticketId, messageId, id } = attachment;
    const cases: [string, string][] = [
      [`/tickets/tcm_wrong/message/${messageId}/attachment/${id}/download`, 'ticketId'],
      [`/tickets/${ticketId}/message/tck_wrong/attachment/${id}/download`, 'messageId'],
      [`/tickets/${ticketId}/message/${messageId}/attachment/fsf_wrong/download`, 'attachmentId'],
      [`/tickets/${ticketId}/message/${messageId}/attachment/tca_bad%21/download`, 'attachmentId'],
      [`/tickets/${ticketId}/message/${messageId}/attachment/tca_/download`, 'attachmentId'],
    ];
    for (const [path, name] of cases) {
      const res = await app.api(path);
      assert.is(res.status, 400, path);
      const body = await json(res);
      assert.ok(body.message.startsWith(`${name} must be`), body.message);
    }
  } finally {
    await app.close();
  }
});

test('404 unless the attachment sits under that message and ticket in this account', async () => {
  const { app, attachment } = await portalWithAttachment();
  try {
    const { ticketId, messageId, id } = attachment;
    const paths = [
      `/tickets/tck_other/message/${messageId}/attachment/${id}/download`,
      `/tickets/${ticketId}/message/tcm_other/attachment/${id}/download`,
      `/tickets/${ticketId}/message/${messageId}/attachment/tca_unknown/download`,
    ];
    for (const path of paths) {
      const res = await app.api(path);
      assert.is(res.status, 404, path);
      assert.match((await json(res)).message, /No attachment/);
    }
    const otherAccount = await app.api(linkPath(attachment), { headers: { authorization: `Bearer ${KEY_B}` } });
    assert.is(otherAccount.status, 404);
    const anonymous = await fetch(`${app.url}/v1${linkPath(attachment)}`);
    assert.is(anonymous.status, 401);
  } finally {
    await app.close();
  }
});

test('the download route needs no Authorization, and ignores one that is given', async () => {
  const { app, attachment } = await portalWithAttachment();
  try {
    const { link } = await getLink(app, attachment);
    assert.is((await fetch(link)).status, 200);
    assert.is((await fetch(link, { headers: { authorization: 'Bearer nonsense' } })).status, 200);
    assert.is((await fetch(link, { headers: { authorization: `Bearer ${KEY_B}` } })).status, 200);
  } finally {
    await app.close();
  }
});

test('altering any part of the link, or leaving one out, is a 403', async () => {
  const other = await portalWithAttachment();
  const { app, attachment } = await portalWithAttachment();
  try {
    // A second attachment of account B under the same ids: a link whose account is changed would point at it.
    const theirs = await app.portal.tickets.putAttachment('acct_b', {
      ticketId: 'tck_ticket1',
      messageId: 'tcm_message1',
      name: 'b.txt',
      mime: 'text/plain',
      body: 'b',
    });
    const sibling = await app.portal.tickets.putAttachment('acct_a', {
      ticketId: 'tck_ticket1',
      messageId: 'tcm_message1',
      name: 's.txt',
      mime: 'text/plain',
      body: 's',
    });
    const { link } = await getLink(app, attachment);
    const signature = new URL(link).searchParams.get('signature')!;
    const flip = (text: string, at: number) => text.slice(0, at) + (text[at] === 'A' ? 'B' : 'A') + text.slice(at + 1);
    const expires = Number(new URL(link).searchParams.get('expires'));
    const altered: [string, string][] = [
      ['account', withParam(link, 'account', 'acct_b')],
      ['ticket', withParam(link, 'ticket', 'tck_ticket2')],
      ['message', withParam(link, 'message', 'tcm_message2')],
      ['expires later', withParam(link, 'expires', String(expires + 3600))],
      ['expires, same value spelled with a leading zero', withParam(link, 'expires', '0' + expires)],
      ['attachment', link.replace(attachment.id, sibling.id)],
      ['attachment of the other account', link.replace(attachment.id, theirs.id)],
      ['signature, first character', withParam(link, 'signature', flip(signature, 0))],
      ['signature, last character', withParam(link, 'signature', flip(signature, signature.length - 1))],
      ['signature, truncated', withParam(link, 'signature', signature.slice(0, -1))],
      ['signature, padded', withParam(link, 'signature', signature + '=')],
      [
        'signature, base64 spelling',
        withParam(link, 'signature', Buffer.from(signature, 'base64url').toString('base64')),
      ],
      [
        'signature of another portal',
        withParam(
          link,
          'signature',
          new URL((await getLink(other.app, other.attachment)).link).searchParams.get('signature')!,
        ),
      ],
    ];
    for (const name of ['account', 'ticket', 'message', 'expires', 'signature']) {
      altered.push([`without ${name}`, withParam(link, name, null)]);
      altered.push([`${name} twice`, link + `&${name}=${new URL(link).searchParams.get(name)}`]);
    }
    for (const [what, url] of altered) {
      assert.is.not(url, link, what);
      const res = await fetch(url);
      assert.is(res.status, 403, what);
      assert.is(res.headers.get('content-type'), 'application/json; charset=utf-8', what);
      assert.match((await json(res)).message, /not valid/, what);
    }
    assert.is((await fetch(link)).status, 200, 'the unaltered link still serves');
  } finally {
    await closeAll(app, other.app);
  }
});

test('a link serves until the second in expiresAt and is a 410 from that second on', async () => {
  const { app, attachment } = await portalWithAttachment();
  try {
    const { link, expiresAt } = await getLink(app, attachment);
    const expiry = Date.parse(expiresAt);
    now = new Date(expiry - 1);
    assert.is((await fetch(link)).status, 200);
    assert.is((await fetch(link, { method: 'HEAD' })).status, 200);
    now = new Date(expiry);
    const expired = await fetch(link);
    assert.is(expired.status, 410);
    assert.match((await json(expired)).message, /expired at 2026-03-01T10:05:00\+00:00/);
    assert.is((await fetch(link, { method: 'HEAD' })).status, 410);
    now = new Date(expiry + 86_400_000);
    assert.is((await fetch(link)).status, 410);
    // An expired link that was also altered is refused as altered: the signature is checked first.
    assert.is((await fetch(withParam(link, 'ticket', 'tck_other'))).status, 403);
  } finally {
    await app.close();
  }
});

test('an attachment removed after the link was made is a 404', async () => {
  const { app, attachment } = await portalWithAttachment();
  try {
    const { link } = await getLink(app, attachment);
    assert.is(await app.portal.tickets.deleteAttachment('acct_a', attachment.id), true);
    for (const method of ['GET', 'HEAD']) assert.is((await fetch(link, { method })).status, 404, method);
    assert.match((await json(await fetch(link))).message, /removed/);
  } finally {
    await app.close();
  }
});

test('a link whose bytes are gone though the record stays is a 404, not a broken stream', async () => {
  const blobs = memoryBlobs();
  const { app, attachment } = await portalWithAttachment({ blobs });
  try {
    const { link } = await getLink(app, attachment);
    await blobs.delete(attachment.id);
    for (const method of ['GET', 'HEAD']) assert.is((await fetch(link, { method })).status, 404, method);
  } finally {
    await app.close();
  }
});

test('another instance sharing the keys and the stores serves a link the first one made', async () => {
  const storage = memoryStorage();
  const blobs = memoryBlobs();
  const { app: first, attachment } = await portalWithAttachment({ storage, blobs });
  const second = await startPortal({ storage, blobs, clock, signingKeys: [SIGNING_KEY_1] });
  const stranger = await startPortal({ storage, blobs, clock, signingKeys: [SIGNING_KEY_2] });
  try {
    const { link } = await getLink(first, attachment);
    const res = await fetch(link.replace(first.url, second.url));
    assert.is(res.status, 200);
    assert.is(await res.text(), 'hello');
    assert.is((await fetch(link.replace(first.url, stranger.url))).status, 403);
  } finally {
    await closeAll(first, second, stranger);
  }
});

test('rotation: a link signed with an old key serves while the key is listed, and not once it is removed', async () => {
  const storage = memoryStorage();
  const blobs = memoryBlobs();
  const { app: before, attachment } = await portalWithAttachment({ storage, blobs, signingKeys: [SIGNING_KEY_1] });
  const during = await startPortal({ storage, blobs, clock, signingKeys: [SIGNING_KEY_2, SIGNING_KEY_1] });
  const after = await startPortal({ storage, blobs, clock, signingKeys: [SIGNING_KEY_2] });
  try {
    const oldLink = (await getLink(before, attachment)).link;
    const newLink = (await getLink(during, attachment)).link;
    assert.is.not(new URL(newLink).searchParams.get('signature'), new URL(oldLink).searchParams.get('signature'));
    const on = (app: TestPortal, link: string) =>
      fetch(link.replace(/^http:\/\/[^/]+/, app.url)).then((res) => res.status);
    assert.is(await on(during, oldLink), 200, 'old key still listed');
    assert.is(await on(after, oldLink), 403, 'old key removed');
    assert.is(await on(during, newLink), 200);
    assert.is(await on(after, newLink), 200, 'signed with the first key of the rotation');
    assert.is(await on(before, newLink), 403, 'an instance that never had the new key');
  } finally {
    await closeAll(before, during, after);
  }
});

test('without signingKeys a random key is made and a warning logged; other instances refuse its links', async () => {
  const warnings: string[] = [];
  const logger: Logger = {
    debug() {},
    info() {},
    error() {},
    warn: (_object, message) => warnings.push(message ?? ''),
  };
  const storage = memoryStorage();
  const blobs = memoryBlobs();
  const { app: first, attachment } = await portalWithAttachment({ storage, blobs, signingKeys: undefined, logger });
  const second = await startPortal({ storage, blobs, clock });
  try {
    assert.is(warnings.length, 1);
    assert.match(warnings[0]!, /signingKeys/);
    const { link } = await getLink(first, attachment);
    assert.is((await fetch(link)).status, 200);
    assert.is((await fetch(link.replace(first.url, second.url))).status, 403);
  } finally {
    await closeAll(first, second);
  }
});

test('signingKeys is checked when the portal is made', async () => {
  const bad: [unknown, RegExp][] = [
    [[], /non-empty array/],
    ['a-single-string-that-is-long-enough-to-be-a-key', /non-empty array/],
    [['too-short'], /signingKeys\[0\] must be a string of at least 32 characters/],
    [[SIGNING_KEY_1, 42], /signingKeys\[1\]/],
    [[SIGNING_KEY_1, ''], /signingKeys\[1\]/],
  ];
  for (const [signingKeys, pattern] of bad) {
    await rejects(
      () => createPortal({ auth: { apiKeys: ['download-key-0123456'] }, signingKeys: signingKeys as string[] }),
      pattern,
    );
  }
  const portal = await createPortal({ auth: { apiKeys: ['download-key-0123456'] }, signingKeys: ['x'.repeat(32)] });
  await portal.close();
});

test('portal.tickets.downloadLink makes the same link outside a request, under publicUrl or a given root', async () => {
  const { app, attachment } = await portalWithAttachment();
  const withPublicUrl = await portalWithAttachment({ publicUrl: 'https://portal.example.com/v1' });
  try {
    const ref = { ticketId: attachment.ticketId, messageId: attachment.messageId, attachmentId: attachment.id };
    const made = await app.portal.tickets.downloadLink('acct_a', ref, `${app.url}/v1`);
    assert.is(made.expiresAt, '2026-03-01T10:05:00+00:00');
    assert.is(await (await fetch(made.link)).text(), 'hello');
    await rejects(() => app.portal.tickets.downloadLink('acct_a', ref), /publicUrl/);
    const other = withPublicUrl.attachment;
    const underPublic = await withPublicUrl.app.portal.tickets.downloadLink('acct_a', {
      ticketId: other.ticketId,
      messageId: other.messageId,
      attachmentId: other.id,
    });
    assert.ok(underPublic.link.startsWith('https://portal.example.com/v1/downloads/'));
    const error = await rejects(() => app.portal.tickets.downloadLink('acct_b', ref, app.url), /No attachment/);
    assert.is(error.status, 404);
  } finally {
    await closeAll(app, withPublicUrl.app);
  }
});

test.run();
