import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { eventData } from '../../src/domain/agreements.js';
import { KEY_B, json, withPortal, type TestPortal } from '../helpers/server.js';
import { PNG_SIGNATURE, validFormData } from '../helpers/agreements.js';
import { manualClock } from '../helpers/webhooks.js';

/** Creates `n` agreements over HTTP, one a second on the portal's clock when `tick` is given; resolves them oldest first. */
async function createAgreements(app: TestPortal, n: number, tick?: () => void): Promise<any[]> {
  const made = [];
  for (let i = 0; i < n; i++) {
    const form = validFormData();
    form.set('name', `Agreement ${i}`);
    made.push(await json(await app.api('/agreements', { method: 'POST', body: form })));
    tick?.();
  }
  return made;
}

test('GET /agreements: 200 { data, nextCursor }, newest first, each agreement as its events carry it', async () => {
  await withPortal(async (app) => {
    assert.equal(await json(await app.api('/agreements')), { data: [], nextCursor: null });
    const made = await createAgreements(app, 3);
    const res = await app.api('/agreements');
    assert.is(res.status, 200);
    assert.is(res.headers.get('cache-control'), 'no-store');
    const body = await json(res);
    assert.equal(Object.keys(body), ['data', 'nextCursor']);
    // Made within one second: the last made first.
    assert.equal(
      body.data.map((agreement: any) => agreement.id),
      made.map((agreement) => agreement.id).reverse(),
    );
    assert.equal(body.data[0], eventData(made[2]));
    assert.equal(JSON.stringify(body.data[0]), JSON.stringify(eventData(made[2])), 'the same JSON, key order included');
    assert.not.ok(JSON.stringify(body).includes(PNG_SIGNATURE), 'no signature image');
    assert.is(body.nextCursor, null);
  });
});

test('GET /agreements: pages of ?limit=, each from the nextCursor of the one before; one made meanwhile shifts nothing', async () => {
  const time = manualClock();
  await withPortal({ clock: time.clock }, async (app) => {
    const made = await createAgreements(app, 5, () => time.advance(1));
    const ids = made.map((agreement) => agreement.id).reverse();
    const first = await json(await app.api('/agreements?limit=2'));
    assert.equal(
      first.data.map((agreement: any) => agreement.id),
      ids.slice(0, 2),
    );
    assert.is(first.nextCursor, ids[1]);
    await createAgreements(app, 1);
    const second = await json(await app.api(`/agreements?limit=2&cursor=${first.nextCursor}`));
    assert.equal(
      second.data.map((agreement: any) => agreement.id),
      ids.slice(2, 4),
    );
    const third = await json(await app.api(`/agreements?limit=2&cursor=${second.nextCursor}`));
    assert.equal(
      third.data.map((agreement: any) => agreement.id),
      ids.slice(4),
    );
    assert.is(third.nextCursor, null, 'the last page says so');
    const exact = await json(await app.api('/agreements?limit=6'));
    assert.is(exact.data.length, 6);
    assert.is(exact.nextCursor, null, 'a page that ends exactly at the last agreement has no next');
  });
});

test('GET /agreements: the default page is 50, at most 100; a signed agreement shows its status and signing time', async () => {
  await withPortal(async (app) => {
    const made = await createAgreements(app, 101);
    const page = await json(await app.api('/agreements'));
    assert.is(page.data.length, 50);
    assert.is(page.nextCursor, page.data[49].id);
    assert.is((await json(await app.api('/agreements?limit=100'))).data.length, 100);
    const signed = await app.portal.agreements.sign('acct_a', made[100].id, made[100].signers[0].id, {
      signature: PNG_SIGNATURE,
    });
    const [top] = (await json(await app.api('/agreements?limit=1'))).data;
    assert.is(top.status, 'signed');
    assert.is(top.signers[0].signedAt, signed.signers[0]!.signedAt);
    assert.is(top.signers[0].signatureHash, signed.signers[0]!.signatureHash);
    assert.not.ok('signature' in top.signers[0]);
  });
});

test('GET /agreements: bad limit or cursor is a 400 naming it', async () => {
  await withPortal(async (app) => {
    const [made] = await createAgreements(app, 1);
    for (const limit of ['0', '101', '-1', '1.5', 'ten', '', ' 5', '1e1', '0x10', '99999999']) {
      const res = await app.api(`/agreements?limit=${encodeURIComponent(limit)}`);
      assert.is(res.status, 400, `limit=${limit}`);
      assert.is((await json(res)).message, 'limit: must be a whole number from 1 to 100.');
    }
    for (const cursor of ['', 'nope', 'agr_unknownButWellFormed0', made.id.slice(0, -1) + '!']) {
      const res = await app.api(`/agreements?cursor=${encodeURIComponent(cursor)}`);
      assert.is(res.status, 400, `cursor=${cursor}`);
      assert.match((await json(res)).message, /^cursor: /);
    }
    const twice = await app.api('/agreements?limit=1&limit=2');
    assert.is(twice.status, 400);
    assert.is((await json(twice)).message, 'limit must be given at most once.');
    assert.is((await app.api(`/agreements?cursor=${made.id}&cursor=${made.id}`)).status, 400);
  });
});

test("GET /agreements: only the key's account; another account's agreement is no cursor; needs a key", async () => {
  await withPortal(async (app) => {
    const [mine] = await createAgreements(app, 1);
    const asB = { headers: { authorization: `Bearer ${KEY_B}` } };
    assert.equal(await json(await app.api('/agreements', asB)), { data: [], nextCursor: null });
    const foreign = await app.api(`/agreements?cursor=${mine.id}`, asB);
    assert.is(foreign.status, 400);
    assert.match((await json(foreign)).message, /^cursor: /);
    assert.is((await fetch(`${app.url}/v1/agreements`)).status, 401);
    assert.equal((await app.portal.agreements.list('acct_b')).data, []);
    assert.equal(
      (await app.portal.agreements.list('acct_a', { limit: 1 })).data.map((agreement) => agreement.id),
      [mine.id],
    );
  });
});

test('portal.agreements.list refuses a limit or cursor of the wrong kind, naming it', async () => {
  await withPortal(async (app) => {
    for (const input of [{ limit: 0 }, { limit: 2.5 }, { limit: '5' }, { cursor: 5 }, { cursor: 'agr_x' }] as never[]) {
      let message = '';
      await app.portal.agreements.list('acct_a', input).catch((error) => (message = error.message));
      assert.match(message, /^(limit|cursor): /, JSON.stringify(input));
    }
    assert.equal(await app.portal.agreements.list('acct_a', { cursor: null }), { data: [], nextCursor: null });
  });
});

test('with extensions: false there is no GET /agreements', async () => {
  await withPortal({ extensions: false }, async (app) => {
    const res = await app.api('/agreements');
    assert.is(res.status, 405);
  });
});

test.run();
