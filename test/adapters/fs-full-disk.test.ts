import { readdirSync } from 'node:fs';
import path from 'node:path';
import { test as uvuTest } from 'uvu';
import * as assert from 'uvu/assert';
import { fsBlobs, fsStorage } from '../../adapters/fs/index.js';
import { isPortalError } from '../../src/errors.js';
import { documentBytes, validFormData } from '../helpers/agreements.js';
import { KEY_B, startPortal, type TestPortal } from '../helpers/server.js';
import { skipping } from '../helpers/skip.js';
import { fillDisk, freeDisk, mountTmpfs } from '../helpers/tmpfs.js';
import { NEVER } from '../helpers/webhooks.js';

/**
 * A full disk under the fs adapters (issue 19): one account fills it with uploads; then every write
 * answers 507 `{message}` and changes nothing visible (a write that failed is never listed, now or
 * after a restart), and once space is back writes succeed again by themselves, without a restart.
 */
const tmpfs = mountTmpfs('2m');
const test = tmpfs.dir === undefined ? skipping(uvuTest, tmpfs.reason) : uvuTest;

const open = (dir: string) =>
  startPortal({
    storage: fsStorage({ dir: path.join(dir, 'store') }),
    blobs: fsBlobs({ dir: path.join(dir, 'blobs') }),
    webhooks: { tick: NEVER },
  });

const asB = { authorization: `Bearer ${KEY_B}` };

async function postWebhook(app: TestPortal, n: number, headers: Record<string, string> = {}) {
  const res = await app.api('/webhooks', {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify({ type: 'customer-created', url: `https://hooks.example.com/${n}` }),
  });
  const body = (await res.json()) as { id?: string; url?: string; message?: string };
  return { status: res.status, body };
}

async function listed(app: TestPortal, headers: Record<string, string> = {}): Promise<string[]> {
  const res = await app.api('/webhooks', { headers });
  return ((await res.json()) as { data: { url: string }[] }).data.map((webhook) => webhook.url).sort();
}

/** A 507 as the contract has it: `{message}` and nothing else. */
function isFull(answer: { status: number; body: { message?: string } }, what: string) {
  assert.is(answer.status, 507, `${what}: ${JSON.stringify(answer.body)}`);
  assert.equal(Object.keys(answer.body), ['message'], what);
  assert.match(answer.body.message!, /storage is full/);
}

test('fs adapters on a full disk: 507 {message}, nothing half-made visible, and writes succeed again once space is back', async () => {
  const dir = tmpfs.dir!;
  let app = await open(dir);
  let filler: string | undefined;
  try {
    // One account fills the disk with uploads: blobs answer 507 once it is full, and leave nothing.
    const agreements: string[] = [];
    let refused = false;
    for (let i = 0; i < 12 && !refused; i++) {
      const res = await app.api('/agreements', {
        method: 'POST',
        body: validFormData({ documents: [{ name: `big${i}.pdf`, bytes: documentBytes(400_000, i) }] }),
      });
      const body = (await res.json()) as { id?: string; message?: string };
      if (res.status === 201) agreements.push(body.id!);
      else {
        isFull({ status: res.status, body }, `upload ${i}`);
        refused = true;
      }
    }
    assert.ok(refused && agreements.length > 0, `uploads: ${agreements.length} stored, then a 507`);
    // Whatever room is left goes too, so that the record log cannot grow either.
    filler = fillDisk(dir);

    // Every account's writes: acknowledged ones while the log's last page has room, then 507.
    const acknowledged = { a: [] as string[], b: [] as string[] };
    let n = 0;
    let full = 0;
    while (full < 3 && n < 400) {
      const b = n % 2 === 1;
      const answer = await postWebhook(app, n, b ? asB : {});
      if (answer.status === 201) (b ? acknowledged.b : acknowledged.a).push(answer.body.url!);
      else {
        isFull(answer, `webhook ${n}`);
        full++;
      }
      n++;
    }
    assert.is(full, 3, 'the record log fills up too');
    // Writes that arrive together, queued behind one another: all refused, none kept.
    const together = await Promise.all(
      Array.from({ length: 8 }, (_, i) => postWebhook(app, 1000 + i, i % 2 ? asB : {})),
    );
    for (const [i, answer] of together.entries()) isFull(answer, `concurrent webhook ${i}`);
    const published = await app.portal.events.publish('acct_a', 'customer-created', { big: 'x'.repeat(20_000) }).then(
      () => 'stored',
      (error: unknown) => (isPortalError(error, 'STORAGE_FULL') ? 'full' : String(error)),
    );
    assert.is(published, 'full', 'an event is refused with STORAGE_FULL in process');

    // Nothing that answered 507 is visible: exactly what was acknowledged is listed.
    assert.equal(await listed(app), acknowledged.a.sort());
    assert.equal(await listed(app, asB), acknowledged.b.sort());
    for (const id of agreements) assert.is((await app.api(`/agreements/${id}`)).status, 200);

    // Space is back: writes succeed again, for every account, without a restart; blobs too.
    freeDisk(filler);
    filler = undefined;
    for (const [account, headers] of [
      ['a', {}],
      ['b', asB],
    ] as const) {
      const answer = await postWebhook(app, 2000, headers);
      assert.is(answer.status, 201, `after space is back (${account}): ${JSON.stringify(answer.body)}`);
      acknowledged[account].push(answer.body.url!);
    }
    const upload = await app.api('/agreements', { method: 'POST', body: validFormData() });
    assert.is(upload.status, 201, 'an upload after space is back');
    agreements.push(((await upload.json()) as { id: string }).id);
    assert.equal(await listed(app), acknowledged.a.sort());

    // A restart finds exactly what was acknowledged, from a log that opens cleanly.
    await app.close();
    app = await open(dir);
    assert.equal(await listed(app), acknowledged.a.sort());
    assert.equal(await listed(app, asB), acknowledged.b.sort());
    for (const id of agreements) assert.is((await app.api(`/agreements/${id}`)).status, 200, id);
    assert.equal(
      readdirSync(path.join(dir, 'store')).filter((name) => name.includes('discarded')),
      [],
      'no damage set aside',
    );
  } finally {
    if (filler !== undefined) freeDisk(filler);
    await app.close();
  }
});

test.after(() => {
  if (tmpfs.dir !== undefined) tmpfs.unmount();
});

test.run();
