import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import net from 'node:net';
import { CreateBucketCommand, DeleteObjectsCommand, ListObjectsV2Command, S3Client } from '@aws-sdk/client-s3';
import { s3Blobs } from '../../adapters/s3/index.js';
import type { BlobStoreFactory } from '../conformance/types.js';
import { namespacedBlobsFactory } from './blob-factory.js';

/** A moto S3 server on a free loopback port, and a client of it; `stop` ends both. */
export interface Moto {
  endpoint: string;
  client: S3Client;
  /** A new, empty bucket. */
  bucket(): Promise<string>;
  stop(): Promise<void>;
}

async function freePort(): Promise<number> {
  const server = net.createServer().listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as net.AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** Starts `moto_server` (from the Python package moto), or says why it cannot: not installed, or not answering in 20 s. */
export async function startMoto(): Promise<{ moto: Moto; reason?: undefined } | { moto?: undefined; reason: string }> {
  const port = await freePort();
  const endpoint = `http://127.0.0.1:${port}`;
  let child: ChildProcess;
  try {
    child = spawn('moto_server', ['-H', '127.0.0.1', '-p', String(port)], { stdio: 'ignore' });
    await Promise.race([once(child, 'spawn'), once(child, 'error').then(([error]) => Promise.reject(error))]);
  } catch (error) {
    return {
      reason: `moto_server cannot be started (${(error as Error).message}); install it with \`pip install 'moto[server]'\``,
    };
  }
  const deadline = Date.now() + 20_000;
  for (;;) {
    if (child.exitCode !== null) return { reason: `moto_server exited with ${child.exitCode} before it answered` };
    const answered = await fetch(`${endpoint}/moto-api/`).then(
      () => true,
      () => false,
    );
    if (answered) break;
    if (Date.now() > deadline) {
      child.kill();
      return { reason: `moto_server did not answer on ${endpoint} within 20 s` };
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  const client = new S3Client({
    endpoint,
    region: 'us-east-1',
    forcePathStyle: true,
    credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
  });
  return {
    moto: {
      endpoint,
      client,
      async bucket() {
        const name = `cp-test-${randomBytes(6).toString('hex')}`;
        await client.send(new CreateBucketCommand({ Bucket: name }));
        return name;
      },
      async stop() {
        client.destroy();
        const exited = once(child, 'exit');
        child.kill();
        await exited;
      },
    },
  };
}

/** Removes every object under `prefix` of `bucket`. */
export async function emptyPrefix(client: S3Client, bucket: string, prefix: string): Promise<void> {
  for (;;) {
    const page = await client.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: prefix }));
    const keys = (page.Contents ?? []).map((object) => ({ Key: object.Key! }));
    if (keys.length === 0) return;
    await client.send(new DeleteObjectsCommand({ Bucket: bucket, Delete: { Objects: keys } }));
  }
}

/** Conformance factory: each store under a fresh prefix of `bucket`, emptied when destroyed. */
export function s3BlobsFactory(name: string, client: S3Client, bucket: string): BlobStoreFactory {
  return namespacedBlobsFactory(name, {
    fresh: () => `run-${randomBytes(4).toString('hex')}/`,
    async open(prefix, clock) {
      const blobs = s3Blobs({ client, bucket, prefix, clock });
      await blobs.open!();
      return blobs;
    },
    drop: (prefix) => emptyPrefix(client, bucket, prefix),
  });
}
