import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { KEY_B, json, rawRequest, startPortal, withPortal } from '../helpers/server.js';
import {
  BLOB_KINDS,
  MULTIPART,
  PNG_SIGNATURE,
  SIGNER,
  documentBytes,
  multipart,
  readAll,
  sha256,
  signer,
  trackedAdapters,
  validFormData,
  validParts,
} from '../helpers/agreements.js';

const LIMIT = 5 * 1024 * 1024;
const ATOM = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00$/;

for (const kind of BLOB_KINDS) {
  test(`${kind.name}: fetch + FormData: 201, the Agreement exactly as the contract has it, hashes recomputed here`, async () => {
    const tracked = trackedAdapters({ kind });
    const app = await startPortal({ storage: tracked.storage, blobs: tracked.blobs });
    try {
      const lease = documentBytes(300_000, 1);
      const annex = documentBytes(70_001, 2);
      const form = validFormData({
        signers: [SIGNER, signer(2)],
        documents: [
          { name: 'lease.pdf', bytes: lease },
          { name: 'annex.pdf', bytes: annex },
        ],
      });
      const res = await app.api('/agreements', { method: 'POST', body: form });
      assert.is(res.status, 201);
      const body = await json(res);
      assert.is(res.headers.get('location'), `${app.url}/v1/agreements/${body.id}`);
      assert.equal(Object.keys(body), [
        'id',
        'name',
        'status',
        'signerName',
        'signerSignature',
        'signerSignatureHash',
        'signers',
        'documents',
        'createdAt',
        'signingOrder',
        'expiresAt',
        'closedAt',
        'closedReason',
      ]);
      assert.equal(
        [body.signingOrder, body.expiresAt, body.closedAt, body.closedReason],
        ['parallel', null, null, null],
      );
      assert.match(body.id, /^agr_[0-9A-Za-z]{22}$/);
      assert.is(body.name, 'Lease 2026');
      assert.is(body.status, 'sent');
      assert.is(body.signerName, 'Ann Owner');
      assert.is(body.signerSignature, PNG_SIGNATURE);
      assert.match(body.createdAt, ATOM);
      assert.is(body.signerSignatureHash, sha256(PNG_SIGNATURE + '\n' + body.createdAt));
      assert.is(body.signers.length, 2);
      assert.match(body.signers[0].id, /^ags_[0-9A-Za-z]{22}$/);
      assert.equal(
        { ...body.signers[0], id: undefined },
        {
          ...SIGNER,
          id: undefined,
          signature: null,
          signatureHash: null,
          signedAt: null,
          viewedAt: null,
          declinedAt: null,
          declineReason: null,
          identification: { required: false, verified: false, method: null, at: null },
        },
      );
      assert.equal(body.signers[1].email, 's2@example.com');
      assert.equal(
        body.documents.map((document: any) => ({ ...document, id: document.id.slice(0, 4) })),
        [
          { id: 'agd_', documentName: 'lease.pdf', fileSize: 300_000, fileHash: sha256(lease), signedFileHash: null },
          { id: 'agd_', documentName: 'annex.pdf', fileSize: 70_001, fileHash: sha256(annex), signedFileHash: null },
        ],
      );
      // Each document's bytes are in the blob store under its id, intact.
      assert.ok((await readAll((await tracked.blobs.get(body.documents[0].id))!)).equals(lease));
      assert.ok((await readAll((await tracked.blobs.get(body.documents[1].id))!)).equals(annex));
      assert.equal((await tracked.blobKeys()).sort(), body.documents.map((document: any) => document.id).sort());
      assert.is(tracked.inserted.length, 1);
    } finally {
      await app.close();
      tracked.dispose();
    }
  });
}

test('the created agreement is what portal.agreements.get and GET /agreements/{id} return, in its account only', async () => {
  await withPortal(async (app) => {
    const created = await json(await app.api('/agreements', { method: 'POST', body: validFormData() }));
    assert.equal(await app.portal.agreements.get('acct_a', created.id), created);
    assert.is(await app.portal.agreements.get('acct_b', created.id), null);
    const viaHttp = await app.api(`/agreements/${created.id}`);
    assert.is(viaHttp.status, 200);
    assert.equal(await json(viaHttp), created);
    const otherAccount = await app.api(`/agreements/${created.id}`, { headers: { authorization: `Bearer ${KEY_B}` } });
    assert.is(otherAccount.status, 404);
    assert.match((await json(otherAccount)).message, created.id);
  });
});

test('a malformed agreement, signer or document id is a 404 naming it on every route and method, before any lookup', async () => {
  await withPortal({}, async (app) => {
    const created = await json(await app.api('/agreements', { method: 'POST', body: validFormData() }));
    const signerId = created.signers[0].id;
    const documentId = created.documents[0].id;
    const routes: [string, string, RegExp, unknown?][] = [
      ['GET', '/agreements/nope', /^No agreement nope /],
      ['DELETE', '/agreements/nope', /^No agreement nope /],
      ['POST', '/agreements/nope/void', /^No agreement nope /, { reason: 'x' }],
      ['PATCH', `/agreements/nope/signers/${signerId}`, /^No agreement nope /, { firstName: 'X' }],
      ['PATCH', `/agreements/${created.id}/signers/nope`, /^No signer nope /, { firstName: 'X' }],
      ['GET', `/agreements/nope/documents/${documentId}/download`, /^No agreement nope /],
      ['GET', `/agreements/${created.id}/documents/nope/download`, /^No document nope /],
      ['GET', `/agreements/${created.id}/documents/nope/signed`, /^No document nope /],
      ['POST', `/agreements/nope/signers/${signerId}/signing-link`, /^No agreement nope /, {}],
      ['POST', `/agreements/${created.id}/signers/nope/signing-link`, /^No signer nope /, {}],
      ['GET', '/agreements/nope/audit', /^No agreement nope /],
      ['GET', '/agreements/nope/certificate', /^No agreement nope /],
    ];
    for (const [method, path, message, body] of routes) {
      const res = await app.api(path, {
        method,
        ...(body === undefined ? {} : { body: JSON.stringify(body), headers: { 'content-type': 'application/json' } }),
      });
      assert.is(res.status, 404, `${method} ${path}`);
      assert.match((await json(res)).message, message, `${method} ${path}`);
    }
    const notFound = (promise: Promise<unknown>, code: string) =>
      promise.then(
        () => assert.unreachable('resolved'),
        (error) => assert.is(error.code, code),
      );
    assert.is(await app.portal.agreements.get('acct_a', 'nope'), null);
    await notFound(
      app.portal.agreements.sign('acct_a', 'nope', signerId, { signature: PNG_SIGNATURE }),
      'AGREEMENT_NOT_FOUND',
    );
    await notFound(
      app.portal.agreements.sign('acct_a', created.id, 'nope', { signature: PNG_SIGNATURE }),
      'SIGNER_NOT_FOUND',
    );
    // Nothing was touched: the agreement is as it was made.
    assert.equal(await app.portal.agreements.get('acct_a', created.id), created);
  });
});

test('with extensions: false there is no GET /agreements/{id}, and POST still works', async () => {
  await withPortal({ extensions: false }, async (app) => {
    const res = await app.api('/agreements', { method: 'POST', body: validFormData() });
    assert.is(res.status, 201);
    const { id } = await json(res);
    assert.is((await app.api(`/agreements/${id}`)).status, 404);
  });
});

test('Location is built from publicUrl when one is configured', async () => {
  await withPortal({ publicUrl: 'https://portal.example.com/v1/' }, async (app) => {
    const res = await app.api('/agreements', { method: 'POST', body: validFormData() });
    const { id } = await json(res);
    assert.is(res.headers.get('location'), `https://portal.example.com/v1/agreements/${id}`);
  });
});

test('signers as one part holding a JSON array; documents under every accepted part name', async () => {
  await withPortal(async (app) => {
    const parts = validParts().filter((part) => part.name !== 'signers' && part.name !== 'documents');
    parts.push({ name: 'signers', value: JSON.stringify([signer(1), signer(2), signer(3)]) });
    const names = ['documents', 'documents[]', 'documents[0]', 'documents[17]', 'documents.items'];
    for (const [i, name] of names.entries())
      parts.push({ name, filename: `doc${i}.txt`, bytes: documentBytes(100 + i, i) });
    const res = await rawRequest(`${app.url}/v1/agreements`, {
      method: 'POST',
      headers: { authorization: 'Bearer key-of-account-a', 'content-type': MULTIPART },
      body: multipart(parts),
    });
    assert.is(res.status, 201, res.body);
    const body = JSON.parse(res.body);
    assert.equal(
      body.signers.map((item: any) => item.firstName),
      ['Signer1', 'Signer2', 'Signer3'],
    );
    assert.equal(
      body.documents.map((document: any) => document.documentName),
      ['doc0.txt', 'doc1.txt', 'doc2.txt', 'doc3.txt', 'doc4.txt'],
    );
    assert.equal(
      body.documents.map((document: any) => document.fileHash),
      names.map((_, i) => sha256(documentBytes(100 + i, i))),
    );
  });
});

test('five signers and five documents are accepted; text parts may come after the documents', async () => {
  await withPortal(async (app) => {
    const form = new FormData();
    for (let i = 0; i < 5; i++) form.append('documents', new Blob([documentBytes(1000, i)]), `d${i}.bin`);
    for (let i = 0; i < 5; i++) form.append('signers', JSON.stringify(signer(i)));
    form.append('signerSignatureData', PNG_SIGNATURE);
    form.append('signerName', 'Ann Owner');
    form.append('name', 'Late fields');
    const res = await app.api('/agreements', { method: 'POST', body: form });
    assert.is(res.status, 201);
    const body = await json(res);
    assert.is(body.signers.length, 5);
    assert.is(body.documents.length, 5);
  });
});

test('document names are reduced to a safe base name; text parts keep their Unicode', async () => {
  await withPortal(async (app) => {
    const names = [
      'C:\\Users\\ann\\Vertrag – Ünïcødé.pdf',
      '../../etc/passwd',
      '..',
      '\u202Efdp.exe',
      'a'.repeat(300) + '.pdf',
    ];
    const form = new FormData();
    form.append('name', 'Miete – Ünïcødé ✓');
    form.append('signerName', 'Zoë Ångström');
    form.append('signerSignatureData', PNG_SIGNATURE);
    form.append('signers', JSON.stringify({ ...SIGNER, firstName: 'Jürgen' }));
    for (const name of names) form.append('documents', new Blob([Buffer.from('x')]), name);
    const body = await json(await app.api('/agreements', { method: 'POST', body: form }));
    assert.is(body.name, 'Miete – Ünïcødé ✓');
    assert.is(body.signerName, 'Zoë Ångström');
    assert.is(body.signers[0].firstName, 'Jürgen');
    const documentNames = body.documents.map((document: any) => document.documentName);
    assert.equal(documentNames.slice(0, 4), ['Vertrag – Ünïcødé.pdf', 'passwd', 'document', 'fdp.exe']);
    assert.is(documentNames[4], 'a'.repeat(251) + '.pdf');
  });
});

for (const kind of BLOB_KINDS) {
  test(`${kind.name}: exactly 5,242,880 bytes of documents is accepted, in one document or spread over five`, async () => {
    const tracked = trackedAdapters({ kind });
    const app = await startPortal({ storage: tracked.storage, blobs: tracked.blobs });
    try {
      const whole = documentBytes(LIMIT, 3);
      const one = await app.api('/agreements', {
        method: 'POST',
        body: validFormData({ documents: [{ name: 'big.bin', bytes: whole }] }),
      });
      assert.is(one.status, 201);
      const body = await json(one);
      assert.equal(body.documents[0].fileSize, LIMIT);
      assert.equal(body.documents[0].fileHash, sha256(whole));
      const sizes = [1_048_576, 1_048_576, 1_048_576, 1_048_576, 1_048_576];
      const spread = await app.api('/agreements', {
        method: 'POST',
        body: validFormData({ documents: sizes.map((size, i) => ({ name: `p${i}`, bytes: documentBytes(size, i) })) }),
      });
      assert.is(spread.status, 201);
      assert.equal(
        (await json(spread)).documents.map((document: any) => document.fileSize),
        sizes,
      );
    } finally {
      await app.close();
      tracked.dispose();
    }
  });
}

for (const kind of BLOB_KINDS) {
  test(`${kind.name}: 5,242,881 bytes is a 413, in one document or spread over five, and nothing is left behind`, async () => {
    const tracked = trackedAdapters({ kind });
    const app = await startPortal({ storage: tracked.storage, blobs: tracked.blobs });
    try {
      const one = await app.api('/agreements', {
        method: 'POST',
        body: validFormData({ documents: [{ name: 'big.bin', bytes: documentBytes(LIMIT + 1) }] }),
      });
      assert.is(one.status, 413);
      assert.match((await json(one)).message, '5242880 bytes');
      const sizes = [1_048_576, 1_048_576, 1_048_576, 1_048_576, 1_048_577];
      const spread = await app.api('/agreements', {
        method: 'POST',
        body: validFormData({ documents: sizes.map((size, i) => ({ name: `p${i}`, bytes: documentBytes(size, i) })) }),
      });
      assert.is(spread.status, 413);
      assert.equal(await tracked.blobKeys(), []);
      assert.is(tracked.inserted.length, 0);
    } finally {
      await app.close();
      tracked.dispose();
    }
  });
}

for (const kind of BLOB_KINDS) {
  test(`${kind.name}: six documents or six signers are a 400 naming the limit, and no blob is left`, async () => {
    const tracked = trackedAdapters({ kind });
    const app = await startPortal({ storage: tracked.storage, blobs: tracked.blobs });
    try {
      const documents = Array.from({ length: 6 }, (_, i) => ({ name: `d${i}`, bytes: documentBytes(10_000, i) }));
      const tooManyDocuments = await app.api('/agreements', { method: 'POST', body: validFormData({ documents }) });
      assert.is(tooManyDocuments.status, 400);
      assert.is((await json(tooManyDocuments)).message, 'documents: at most 5 documents are allowed.');
      const signers = Array.from({ length: 6 }, (_, i) => signer(i));
      const tooManySigners = await app.api('/agreements', { method: 'POST', body: validFormData({ signers }) });
      assert.is(tooManySigners.status, 400);
      assert.is((await json(tooManySigners)).message, 'signers: at most 5 signers are allowed.');
      assert.equal(await tracked.blobKeys(), []);
      assert.is(tracked.inserted.length, 0);
    } finally {
      await app.close();
      tracked.dispose();
    }
  });
}

test('POST /agreements needs a bearer token, like every route', async () => {
  await withPortal(async (app) => {
    const res = await fetch(`${app.url}/v1/agreements`, { method: 'POST', body: validFormData() });
    assert.is(res.status, 401);
    assert.ok(res.headers.get('www-authenticate'));
  });
});

test.run();
