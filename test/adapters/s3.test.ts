import { suite } from 'uvu';
import { blobStoreSuite } from '../conformance/blobs.js';
import { skipping } from '../helpers/skip.js';
import { s3BlobsFactory, startMoto } from '../helpers/moto.js';
import { connectPostgres } from '../helpers/sql.js';
import { s3Tests } from './s3/blobs.js';
import { instanceTests } from './s3/instances.js';
import { s3PortalTests } from './s3/portal.js';

// moto_server is a real S3 API on a loopback port; where it is not installed these suites skip, saying so.
const started = await startMoto();
const test = suite('s3 adapter');
const instances = suite('s3 adapter: two portals on one PostgreSQL and one bucket');

if (started.moto === undefined) {
  console.log(`SKIP every s3 suite: ${started.reason}`);
  s3Tests(skipping(test, started.reason), undefined);
  s3PortalTests(skipping(test, started.reason), undefined);
  instanceTests(skipping(instances, started.reason), undefined);
} else {
  const { moto } = started;
  const bucket = await moto.bucket();
  blobStoreSuite(s3BlobsFactory('s3 (moto)', moto.client, bucket));
  s3Tests(test, { moto, bucket });
  s3PortalTests(test, { moto, bucket });
  const postgres = await connectPostgres();
  if (postgres.pool === undefined) instanceTests(skipping(instances, postgres.reason), undefined);
  else {
    const pool = postgres.pool;
    instanceTests(instances, { moto, bucket, pool });
    instances.after(() => pool.end());
  }
  instances.after(() => moto.stop());
}
test.run();
instances.run();
