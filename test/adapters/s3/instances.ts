import { createHash } from 'node:crypto';
import { HeadObjectCommand } from '@aws-sdk/client-s3';
import type pg from 'pg';
import type { Test } from 'uvu';
import * as assert from 'uvu/assert';
import { s3Blobs } from '../../../adapters/s3/index.js';
import { sqlStorage } from '../../../adapters/sql/index.js';
import { documentBytes, validFormData } from '../../helpers/agreements.js';
import { SIGNING_KEY_1, getLink } from '../../helpers/download.js';
import { emptyPrefix, type Moto } from '../../helpers/moto.js';
import { type TestPortal, json, startPortal } from '../../helpers/server.js';
import { dropSchema, freshSchema } from '../../helpers/sql.js';

/**
 * The production shape: records in one PostgreSQL, bytes in one bucket, any number of portals in
 * front. Two portals here, each with its own pool and S3 client: what one writes, the other serves.
 */
export function instanceTests(test: Test, context: { moto: Moto; bucket: string; pool: pg.Pool } | undefined): void {
  test("two portals on one PostgreSQL and one bucket serve each other's uploads and links", async () => {
    const { moto, bucket, pool } = context!;
    const schema = freshSchema();
    const prefix = `instances-${Date.now()}/`;
    const portals: TestPortal[] = [];
    const start = async () => {
      const storage = sqlStorage({ client: pool, schema });
      const portal = await startPortal({
        signingKeys: [SIGNING_KEY_1],
        storage,
        blobs: s3Blobs({ client: moto.client, bucket, prefix }),
      });
      portals.push(portal);
      return portal;
    };
    try {
      const a = await start();
      const b = await start();

      // An agreement posted to a: its document streamed into the bucket, its record read back through b.
      const document = documentBytes(2 * 1024 * 1024 + 3, 7);
      const created = await a.api('/agreements', {
        method: 'POST',
        body: validFormData({ documents: [{ name: 'lease.pdf', bytes: document }] }),
      });
      assert.is(created.status, 201);
      const agreement = await json(created);
      const seen = await json(await b.api(`/agreements/${agreement.id}`));
      assert.is(seen.documents[0].fileHash, createHash('sha256').update(document).digest('hex'));
      const head = await moto.client.send(
        new HeadObjectCommand({ Bucket: bucket, Key: `${prefix}${seen.documents[0].id}` }),
      );
      assert.is(head.ContentLength, document.length, 'the document bytes are in the bucket');

      // An attachment stored through a, its link asked of b, the bytes served by a; and the other way round.
      const bytes = documentBytes(700_000, 9);
      const fromA = await a.portal.tickets.putAttachment('acct_a', {
        name: 'photo.jpg',
        mime: 'image/jpeg',
        body: bytes,
      });
      const linkFromB = await getLink(b, fromA);
      const servedByA = await fetch(linkFromB.link.replace(b.url, a.url));
      assert.is(servedByA.status, 200);
      assert.ok(Buffer.from(await servedByA.arrayBuffer()).equals(bytes));
      const fromB = await b.portal.tickets.putAttachment('acct_a', {
        name: 'note.txt',
        mime: 'text/plain',
        body: Buffer.from('from b'),
      });
      const ranged = await fetch((await getLink(a, fromB)).link.replace(a.url, b.url), {
        headers: { range: 'bytes=5-' },
      });
      assert.is(ranged.status, 206);
      assert.is(await ranged.text(), 'b');

      // A file put through b is listed by a; removed through a, b's link to it answers 404.
      const file = await b.portal.files.put('acct_a', {
        name: 'shared.txt',
        mime: 'text/plain',
        body: Buffer.from('shared'),
      });
      const listed = await json(await a.api('/files'));
      assert.ok(listed.data.some((entry: { id: string }) => entry.id === file.id));
      const linkToA = await getLink(b, fromA);
      assert.ok(await a.portal.tickets.deleteAttachment('acct_a', fromA.id));
      assert.is((await fetch(linkToA.link)).status, 404);
    } finally {
      for (const portal of portals) await portal.close();
      await emptyPrefix(moto.client, bucket, prefix);
      await dropSchema(pool, schema);
    }
  });
}
