import type { Attachment } from '../../src/index.js';
import type { BlobStore, Storage } from '../../src/ports.js';
import { createLinkSigner } from '../../src/domain/download-links.js';
import { createDownloadService, type DownloadService } from '../../src/domain/downloads.js';
import { type TestPortal, json } from './server.js';

/** Signing keys of the length the option asks for (at least 32 characters). */
export const SIGNING_KEY_1 = 'signing-key-one-0123456789abcdefghij';
export const SIGNING_KEY_2 = 'signing-key-two-0123456789abcdefghij';

/** `/tickets/{ticketId}/message/{messageId}/attachment/{attachmentId}/download` for an attachment. */
export function linkPath(ref: { ticketId: string; messageId: string; id: string }): string {
  return `/tickets/${ref.ticketId}/message/${ref.messageId}/attachment/${ref.id}/download`;
}

/** Asks the API for a download link, as account A unless `key` says otherwise; fails loudly unless 200. */
export async function getLink(
  app: TestPortal,
  attachment: Attachment,
  key?: string,
): Promise<{ link: string; expiresAt: string }> {
  const init = key === undefined ? {} : { headers: { authorization: `Bearer ${key}` } };
  const res = await app.api(linkPath(attachment), init);
  if (res.status !== 200) throw new Error(`download link: expected 200, got ${res.status} ${await res.text()}`);
  return json(res);
}

/** The link with query parameter `name` set to `value` (or removed, for `null`). */
export function withParam(link: string, name: string, value: string | null): string {
  const url = new URL(link);
  if (value === null) url.searchParams.delete(name);
  else url.searchParams.set(name, value);
  return url.href;
}

/** A download service for a service made by hand in a test (links under `https://portal.test/v1`). */
export function testDownloads(storage: Storage, blobs: BlobStore): DownloadService {
  const signer = createLinkSigner([SIGNING_KEY_1]);
  return createDownloadService({
    storage,
    blobs,
    clock: () => new Date(),
    signer,
    publicUrl: 'https://portal.test/v1',
  });
}
