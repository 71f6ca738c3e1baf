import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { memoryStorage } from '../../adapters/memory/index.js';
import type { Storage } from '../../src/index.js';
import { IDEMPOTENCY_LEASE_MS, IDEMPOTENCY_TTL_MS } from '../../src/domain/idempotency.js';
import { atom } from '../../src/shared/time.js';
import { KEY_B, json, rawRequest, withPortal } from '../helpers/server.js';
import {
  BOUNDARY,
  MULTIPART,
  documentBytes,
  multipart,
  postHead,
  rawClient,
  trackedAdapters,
  validFormData,
  validParts,
} from '../helpers/agreements.js';

const HOOK = { type: 'customer-created', url: 'https://receiver.example/hook' };

const postWebhook = (
  api: (path: string, init?: RequestInit) => Promise<Response>,
  key: string | null,
  body: unknown = HOOK,
  headers: Record<string, string> = {},
) =>
  api('/webhooks', {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(key === null ? {} : { 'idempotency-key': key }), ...headers },
    body: JSON.stringify(body),
  });

/** A clock the test moves. */
function movableClock(start = Date.parse('2026-03-01T10:00:00Z')) {
  let now = start;
  return { clock: () => new Date(now), advance: (ms: number) => (now += ms) };
}

test('POST /webhooks: a retry with the key gets the first answer byte for byte, with Idempotent-Replayed, and creates nothing', async () => {
  await withPortal(async ({ api }) => {
    const first = await postWebhook(api, 'retry-me-1');
    assert.is(first.status, 201);
    assert.is(first.headers.get('idempotent-replayed'), null, 'a first answer is no replay');
    const firstBody = await first.text();
    const location = first.headers.get('location');
    assert.match(location!, /\/v1\/webhooks\/wbh_/);
    // The draft's own form, a structured-field String, names the same key.
    for (const key of ['retry-me-1', '"retry-me-1"']) {
      const again = await postWebhook(api, key);
      assert.is(again.status, 201);
      assert.is(await again.text(), firstBody, 'byte-identical body');
      assert.is(again.headers.get('location'), location);
      assert.is(again.headers.get('idempotent-replayed'), 'true');
      assert.is(again.headers.get('content-type'), 'application/json; charset=utf-8');
    }
    const list = await json(await api('/webhooks'));
    assert.is(list.data.length, 1);
    assert.is(list.data[0].secret, JSON.parse(firstBody).secret);
    // Keys are per account: the same key in another account is another request.
    const other = await postWebhook(api, 'retry-me-1', HOOK, { authorization: `Bearer ${KEY_B}` });
    assert.is(other.status, 201);
    assert.is(other.headers.get('idempotent-replayed'), null);
    assert.is.not((await json(other)).id, JSON.parse(firstBody).id);
  });
});

test('POST /webhooks: the same key with other fields is a 422; the first answer is kept', async () => {
  await withPortal(async ({ api }) => {
    const first = await postWebhook(api, 'k-422');
    const reused = await postWebhook(api, 'k-422', { ...HOOK, url: 'https://receiver.example/other' });
    assert.is(reused.status, 422);
    assert.match((await json(reused)).message, /Idempotency-Key was used for a different request/);
    assert.is((await json(await api('/webhooks'))).data.length, 1);
    const again = await postWebhook(api, 'k-422');
    assert.is(await again.text(), await first.text());
  });
});

test('POST /webhooks: a malformed key is a 400 naming the header, and nothing is created', async () => {
  await withPortal(async ({ api, url }) => {
    for (const key of ['', 'x'.repeat(256), 'two words', '""', '"unterminated', 'tab\there']) {
      const res = await postWebhook(api, key);
      assert.is(res.status, 400, JSON.stringify(key));
      assert.match((await json(res)).message, /^Idempotency-Key must be 1 to 255 visible ASCII characters/);
    }
    // Bytes outside ASCII, as a raw client can send them.
    const raw = await rawRequest(`${url}/v1/webhooks`, {
      method: 'POST',
      headers: {
        authorization: 'Bearer key-of-account-a',
        'content-type': 'application/json',
        'idempotency-key': Buffer.from('kéy', 'latin1').toString('latin1'),
      },
      body: JSON.stringify(HOOK),
    });
    assert.is(raw.status, 400);
    assert.is((await json(await api('/webhooks'))).data.length, 0);
    assert.is((await postWebhook(api, 'x'.repeat(255))).status, 201, '255 characters are a key');
  });
});

test('POST /webhooks: a request that failed frees its key: the corrected retry runs afresh', async () => {
  await withPortal({ webhooks: { worker: false, maxPerAccount: 1 } }, async ({ api }) => {
    const invalid = await postWebhook(api, 'k-fix', { ...HOOK, url: 'not a url' });
    assert.is(invalid.status, 400);
    const fixed = await postWebhook(api, 'k-fix');
    assert.is(fixed.status, 201);
    assert.is(fixed.headers.get('idempotent-replayed'), null);
    // Over the account's limit: a 409 that is not kept, so the same key works once there is room.
    const refused = await postWebhook(api, 'k-limit', { ...HOOK, url: 'https://receiver.example/second' });
    assert.is(refused.status, 409);
    await api(`/webhooks/${(await json(fixed)).id}`, { method: 'DELETE' });
    const retried = await postWebhook(api, 'k-limit', { ...HOOK, url: 'https://receiver.example/second' });
    assert.is(retried.status, 201);
  });
});

test('POST /webhooks: a concurrent duplicate gets 409 while the first runs; one webhook is created', async () => {
  const base = memoryStorage();
  let release!: () => void;
  const held = new Promise<void>((resolve) => (release = resolve));
  let inserting!: () => void;
  const started = new Promise<void>((resolve) => (inserting = resolve));
  const storage: Storage = {
    ...base,
    async insertWebhook(...args) {
      inserting();
      await held;
      return base.insertWebhook(...args);
    },
  };
  await withPortal({ storage }, async ({ api }) => {
    const first = postWebhook(api, 'k-race');
    await started;
    const duplicate = await postWebhook(api, 'k-race');
    assert.is(duplicate.status, 409);
    assert.is(duplicate.headers.get('retry-after'), '1');
    assert.match((await json(duplicate)).message, /still in progress/);
    release();
    const answered = await first;
    assert.is(answered.status, 201);
    const replay = await postWebhook(api, 'k-race');
    assert.is(replay.headers.get('idempotent-replayed'), 'true');
    assert.is(await replay.text(), await answered.text());
    assert.is((await base.listWebhooks('acct_a')).length, 1);
  });
});

test('a claim left by a request that never finished (a process that died) blocks its key only until its lease ends', async () => {
  const storage = memoryStorage();
  const time = movableClock();
  await withPortal({ storage, clock: time.clock }, async ({ api }) => {
    // What a process killed mid-request leaves behind: a claim nobody will complete or release.
    await storage.claimIdempotencyKey({
      accountId: 'acct_a',
      key: 'k-orphan',
      token: 'dead-process',
      fingerprint: null,
      now: atom(time.clock()),
      leaseUntil: atom(new Date(time.clock().getTime() + IDEMPOTENCY_LEASE_MS)),
    });
    assert.is((await postWebhook(api, 'k-orphan')).status, 409);
    time.advance(IDEMPOTENCY_LEASE_MS - 1000);
    assert.is((await postWebhook(api, 'k-orphan')).status, 409);
    time.advance(1000);
    const taken = await postWebhook(api, 'k-orphan');
    assert.is(taken.status, 201);
    assert.is(taken.headers.get('idempotent-replayed'), null);
  });
});

test('an answer is replayed for 24 hours, then the key is a new request; the sweep removes it', async () => {
  const storage = memoryStorage();
  const time = movableClock();
  await withPortal({ storage, clock: time.clock }, async ({ api }) => {
    const first = await (await postWebhook(api, 'k-day')).text();
    time.advance(IDEMPOTENCY_TTL_MS - 1000);
    assert.is(await (await postWebhook(api, 'k-day')).text(), first);
    time.advance(1000);
    assert.is(await storage.sweepIdempotencyKeys(atom(time.clock()), 100), 1);
    const fresh = await postWebhook(api, 'k-day');
    assert.is(fresh.status, 201);
    assert.is(fresh.headers.get('idempotent-replayed'), null);
    assert.is.not(await fresh.text(), first);
  });
});

const postForm = (api: (path: string, init?: RequestInit) => Promise<Response>, key: string, form: FormData) =>
  api('/agreements', { method: 'POST', headers: { 'idempotency-key': key }, body: form });

test('POST /agreements: a retry in a new multipart framing is replayed byte for byte; one agreement, one event, no blob left by the retry', async () => {
  const tracked = trackedAdapters();
  try {
    await withPortal(
      { storage: tracked.storage, blobs: tracked.blobs, webhooks: { worker: false } },
      async ({ api, url }) => {
        const hook = await json(
          await postWebhook(api, null, { type: 'agreement-created', url: 'https://receiver.example/agreements' }),
        );
        const documents = [
          { name: 'lease.pdf', bytes: documentBytes(200_000, 3) },
          { name: 'annex.pdf', bytes: documentBytes(5_000, 4) },
        ];
        const first = await postForm(api, 'agr-1', validFormData({ documents }));
        assert.is(first.status, 201);
        const firstBody = await first.text();
        const blobsAfterFirst = (await tracked.blobKeys()).sort();
        assert.is(blobsAfterFirst.length, 2);
        // fetch draws a new boundary for each FormData; a hand-built body has another framing again.
        const again = await postForm(api, 'agr-1', validFormData({ documents }));
        const handBuilt = multipart([
          ...validParts().filter((part) => part.name !== 'documents'),
          { name: 'documents[0]', filename: 'lease.pdf', bytes: documents[0]!.bytes },
          { name: 'documents[1]', filename: 'annex.pdf', bytes: documents[1]!.bytes },
        ]);
        const raw = await rawRequest(`${url}/v1/agreements`, {
          method: 'POST',
          headers: {
            authorization: 'Bearer key-of-account-a',
            'content-type': MULTIPART,
            'idempotency-key': '"agr-1"',
          },
          body: handBuilt,
        });
        for (const replay of [
          { status: again.status, body: await again.text(), headers: again.headers },
          { ...raw, headers: new Headers(raw.headers as Record<string, string>) },
        ]) {
          assert.is(replay.status, 201);
          assert.is(replay.body, firstBody);
          assert.is(replay.headers.get('idempotent-replayed'), 'true');
          assert.is(replay.headers.get('location'), first.headers.get('location'));
        }
        assert.is(tracked.inserted.length, 1);
        assert.equal((await tracked.blobKeys()).sort(), blobsAfterFirst, 'a replay stores no blob');
        const deliveries = (await json(await api(`/webhooks/${hook.id}/deliveries`))).data;
        assert.is(deliveries.length, 1, 'one agreement-created event, one delivery');
      },
    );
  } finally {
    tracked.dispose();
  }
});

test('POST /agreements: the same key with another document is a 422, and leaves no blob', async () => {
  const tracked = trackedAdapters();
  try {
    await withPortal({ storage: tracked.storage, blobs: tracked.blobs }, async ({ api }) => {
      await postForm(
        api,
        'agr-2',
        validFormData({ documents: [{ name: 'lease.pdf', bytes: documentBytes(10_000, 1) }] }),
      );
      const blobs = await tracked.blobKeys();
      const changed = await postForm(
        api,
        'agr-2',
        validFormData({ documents: [{ name: 'lease.pdf', bytes: documentBytes(10_000, 2) }] }),
      );
      assert.is(changed.status, 422);
      const renamed = await postForm(
        api,
        'agr-2',
        validFormData({ documents: [{ name: 'other.pdf', bytes: documentBytes(10_000, 1) }] }),
      );
      assert.is(renamed.status, 422);
      assert.is(tracked.inserted.length, 1);
      assert.equal(await tracked.blobKeys(), blobs);
    });
  } finally {
    tracked.dispose();
  }
});

test('POST /agreements: a duplicate sent while the first form still arrives gets 409 at once; one agreement is created', async () => {
  const tracked = trackedAdapters();
  try {
    await withPortal({ storage: tracked.storage, blobs: tracked.blobs }, async ({ api, url }) => {
      const bytes = documentBytes(1024 * 1024, 5);
      const head = multipart(
        [
          ...validParts().filter((part) => part.name !== 'documents'),
          { name: 'documents', filename: 'big.bin', bytes: Buffer.alloc(0) },
        ],
        { close: false },
      );
      const before = head.subarray(0, head.length - 2);
      const after = Buffer.from(`\r\n--${BOUNDARY}--\r\n`);
      const client = rawClient(url);
      await client.send(
        postHead({
          'Content-Type': MULTIPART,
          'Content-Length': before.length + bytes.length + after.length,
          'Idempotency-Key': 'agr-race',
        }),
      );
      await client.send(Buffer.concat([before, bytes.subarray(0, 512 * 1024)]));
      // The first holds the key from its headers on: a duplicate needs no body read to be refused.
      let duplicate: Response | undefined;
      for (let i = 0; i < 100 && duplicate?.status !== 409; i++) {
        duplicate = await postForm(api, 'agr-race', validFormData());
        if (duplicate.status !== 409) await new Promise((resolve) => setTimeout(resolve, 10));
      }
      assert.is(duplicate!.status, 409);
      await client.send(Buffer.concat([bytes.subarray(512 * 1024), after]));
      const first = await client.response;
      assert.is(first.status, 201, first.body);
      client.socket.destroy();
      assert.is(tracked.inserted.length, 1);
      const replay = rawClient(url);
      const body = Buffer.concat([before, bytes, after]);
      await replay.send(
        Buffer.concat([
          Buffer.from(
            postHead({ 'Content-Type': MULTIPART, 'Content-Length': body.length, 'Idempotency-Key': 'agr-race' }),
          ),
          body,
        ]),
      );
      const replayed = await replay.response;
      replay.socket.destroy();
      assert.is(replayed.status, 201);
      assert.is(replayed.body, first.body);
      assert.match(replayed.head, /\r\nIdempotent-Replayed: true\r\n/i);
      assert.is(tracked.inserted.length, 1);
      assert.is((await tracked.blobKeys()).length, 1);
    });
  } finally {
    tracked.dispose();
  }
});

test('POST /agreements: a form refused for a bad part frees its key, and removes its blobs', async () => {
  const tracked = trackedAdapters();
  try {
    await withPortal({ storage: tracked.storage, blobs: tracked.blobs }, async ({ api }) => {
      const bad = multipart([...validParts(), { name: 'comment', value: 'unknown part' }]);
      const refused = await api('/agreements', {
        method: 'POST',
        headers: { 'content-type': MULTIPART, 'idempotency-key': 'agr-3' },
        body: bad,
      });
      assert.is(refused.status, 400);
      assert.equal(await tracked.blobKeys(), []);
      const created = await postForm(api, 'agr-3', validFormData());
      assert.is(created.status, 201);
      assert.is(created.headers.get('idempotent-replayed'), null);
      assert.is(tracked.inserted.length, 1);
    });
  } finally {
    tracked.dispose();
  }
});

test.run();
