import { suite } from 'uvu';
import { blobStoreSuite } from '../conformance/blobs.js';
import { skipping } from '../helpers/skip.js';
import { s3BlobsFactory, startMoto } from '../helpers/moto.js';
import { s3Tests } from './s3/blobs.js';
import { s3PortalTests } from './s3/portal.js';

// moto_server is a real S3 API on a loopback port; where it is not installed these suites skip, saying so.
const started = await startMoto();
const test = suite('s3 adapter');

if (started.moto === undefined) {
  console.log(`SKIP every s3 suite: ${started.reason}`);
  s3Tests(skipping(test, started.reason), undefined);
  s3PortalTests(skipping(test, started.reason), undefined);
} else {
  const { moto } = started;
  const bucket = await moto.bucket();
  blobStoreSuite(s3BlobsFactory('s3 (moto)', moto.client, bucket));
  s3Tests(test, { moto, bucket });
  s3PortalTests(test, { moto, bucket });
  test.after(() => moto.stop());
}
test.run();
