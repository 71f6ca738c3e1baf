import { testDownloads } from '../helpers/download.js';
import { Readable } from 'node:stream';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { memoryBlobs, memoryStorage } from '../../adapters/memory/index.js';
import { createAgreementService } from '../../src/domain/agreements.js';
import { isPortalError } from '../../src/errors.js';
import type { BlobStore, Storage } from '../../src/index.js';
import { PNG_SIGNATURE } from '../helpers/agreements.js';

const signer = { firstName: 'Ada', lastName: 'Lovelace', email: 'ada@example.com', shouldIdentify: false };

async function blobKeys(blobs: BlobStore): Promise<string[]> {
  const keys: string[] = [];
  for await (const blob of blobs.listBefore('9999-01-01T00:00:00+00:00')) keys.push(blob.key);
  return keys;
}

function service(storage: Storage = memoryStorage()) {
  const blobs = memoryBlobs();
  return {
    blobs,
    agreements: createAgreementService({
      storage,
      blobs,
      clock: () => new Date(),
      downloads: testDownloads(storage, blobs),
    }),
  };
}

test('the service stores each document, measuring size and SHA-256 on the way, and records the agreement', async () => {
  const { blobs, agreements } = service();
  const agreement = await agreements.create('acct_a', async (documents) => ({
    name: 'Lease',
    signerName: 'Portal Ltd',
    signerSignatureData: PNG_SIGNATURE,
    signers: [signer],
    documents: [await documents.store('../contract.pdf', Readable.from([Buffer.from('hello '), Buffer.from('world')]))],
  }));
  const [document] = agreement.documents;
  assert.equal(
    { ...document!, id: '' },
    {
      id: '',
      documentName: 'contract.pdf',
      fileSize: 11,
      fileHash: 'b94d27b9934d3e08a52e52d7da7dabfac484efe37a5380ee9088f7ace2efcde9',
      signedFileHash: null,
    },
  );
  assert.equal(await blobKeys(blobs), [document!.id]);
});

test('a reader that fails after storing documents: every document is removed before create rejects', async () => {
  const { blobs, agreements } = service();
  const failure = new Error('the client went away');
  const error = await agreements
    .create('acct_a', async (documents) => {
      await documents.store('a.pdf', Readable.from([Buffer.from('a')]));
      await documents.store('b.pdf', Readable.from([Buffer.from('b')]));
      throw failure;
    })
    .catch((caught: unknown) => caught);
  assert.is(error, failure);
  assert.equal(await blobKeys(blobs), []);
});

test('documents over 5 MiB together are refused with DOCUMENTS_TOO_LARGE, and nothing is left', async () => {
  const { blobs, agreements } = service();
  const three = Buffer.alloc(3 * 1024 * 1024, 1);
  const error = await agreements
    .create('acct_a', async (documents) => {
      await documents.store('a.pdf', Readable.from([three]));
      await documents.store('b.pdf', Readable.from([three]));
      throw new Error('not reached');
    })
    .catch((caught: unknown) => caught);
  assert.ok(isPortalError(error, 'DOCUMENTS_TOO_LARGE'), String(error));
  assert.equal(await blobKeys(blobs), []);
});

test('a record that cannot be stored: the documents are removed and the storage error surfaces', async () => {
  const storage = memoryStorage();
  const broken: Storage = { ...storage, insertAgreement: async () => Promise.reject(new Error('disk full')) };
  const { blobs, agreements } = service(broken);
  const error = await agreements
    .create('acct_a', async (documents) => ({
      name: 'Lease',
      signerName: 'Portal Ltd',
      signerSignatureData: PNG_SIGNATURE,
      signers: [signer],
      documents: [await documents.store('a.pdf', Readable.from([Buffer.from('a')]))],
    }))
    .catch((caught: unknown) => caught);
  assert.match(String(error), 'disk full');
  assert.equal(await blobKeys(blobs), []);
});

test.run();
