import type { Readable } from 'node:stream';
import { PortalError } from '../errors.js';
import { signedName } from './completed-copy.js';
import type { BlobReader, BlobStore, ByteRange, Storage } from '../ports.js';
import type { DownloadLink } from '../records.js';
import { atom } from '../shared/time.js';
import { type DownloadGrant, type LinkSigner, downloadLinkUrl } from './download-links.js';

/** How long a download link serves (spec: "The link is valid for 5 minutes"). */
const LINK_LIFETIME_SECONDS = 5 * 60;

/** What a link serves: the bytes under `id` in the blob store, and how they are named and typed. */
export interface Downloadable {
  kind: DownloadGrant['kind'];
  id: string;
  name: string;
  mime: string;
  size: number;
  createdAt: string;
}

/** A grant before its expiry is set: what a service asks a link for. */
export type DownloadTarget = DownloadGrant extends infer G
  ? G extends DownloadGrant
    ? Omit<G, 'expires'>
    : never
  : never;

/**
 * An agreement document's media type: a document is stored without one, and a PDF is what
 * agreements carry; anything else goes out as bytes.
 */
const documentMime = (name: string) => (/\.pdf$/i.test(name) ? 'application/pdf' : 'application/octet-stream');

const removed = (kind: DownloadGrant['kind']) => new PortalError('DOWNLOAD_REMOVED', kind);

export interface DownloadServiceDeps {
  storage: Storage;
  blobs: BlobStore;
  clock: () => Date;
  signer: LinkSigner;
  /** The configured `publicUrl`: the API root of links made outside a request. */
  publicUrl: string | undefined;
}

/**
 * Signed links to stored bytes (ticket attachments, files, agreement documents) and what the
 * signed route serves for one. The services check that the caller may see the record before
 * asking for a link; the route needs no Authorization, as the link's signature is its authorization.
 */
export function createDownloadService(deps: DownloadServiceDeps) {
  const { storage, blobs, clock, signer } = deps;

  /** The record a grant names, as a download, or `null` when it is gone (or never sat where the grant says). */
  async function find(grant: DownloadGrant): Promise<Downloadable | null> {
    switch (grant.kind) {
      case 'attachment': {
        const record = await storage.getAttachment(grant.accountId, grant.id);
        if (record === null || record.ticketId !== grant.ticketId || record.messageId !== grant.messageId) return null;
        return {
          kind: grant.kind,
          id: record.id,
          name: record.name,
          mime: record.mime,
          size: record.size,
          createdAt: record.createdAt,
        };
      }
      case 'file': {
        const record = await storage.getFileEntry(grant.accountId, grant.id);
        if (record === null || record.type !== 'file') return null;
        return {
          kind: grant.kind,
          id: record.id,
          name: record.name,
          mime: record.mime,
          size: record.size,
          createdAt: record.createdAt,
        };
      }
      case 'document': {
        const agreement = await storage.getAgreement(grant.accountId, grant.agreementId);
        const document = agreement?.documents.find((candidate) => candidate.id === grant.id);
        if (agreement == null || document === undefined) return null;
        const { documentName: name, fileSize: size } = document;
        return {
          kind: grant.kind,
          id: document.id,
          name,
          mime: documentMime(name),
          size,
          createdAt: agreement.createdAt,
        };
      }
      case 'signed': {
        // The completed copy is its own blob; its size is the blob's.
        const agreement = await storage.getAgreement(grant.accountId, grant.agreementId);
        const key = agreement?.documents.find((candidate) => candidate.id === grant.id)?.signedFileKey ?? null;
        const stat = key === null ? null : await blobs.stat(key);
        if (agreement == null || key === null || stat === null) return null;
        const name = signedName(agreement.documents.find((candidate) => candidate.id === grant.id)!.documentName);
        return {
          kind: grant.kind,
          id: key,
          name,
          mime: 'application/pdf',
          size: stat.size,
          createdAt: agreement.createdAt,
        };
      }
    }
  }

  return {
    /**
     * A link to `target` that serves for five minutes (or `lifetimeSeconds`) without Authorization,
     * under `baseUrl` (default: the `publicUrl` option). The caller has checked that the record is
     * the account's.
     */
    link(
      target: DownloadTarget,
      baseUrl: string | undefined,
      what: string,
      lifetimeSeconds = LINK_LIFETIME_SECONDS,
    ): DownloadLink {
      const root = baseUrl ?? deps.publicUrl;
      if (root === undefined)
        throw new TypeError(`${what}: give baseUrl, or set the publicUrl option, to build a link outside a request`);
      // Whole seconds: the expiry the client reads is the second the link stops serving.
      const expires = Math.floor(clock().getTime() / 1000) + lifetimeSeconds;
      const grant = { ...target, expires } as DownloadGrant;
      return { link: downloadLinkUrl(root, grant, signer.sign(grant)), expiresAt: atom(new Date(expires * 1000)) };
    },

    /**
     * What a download request presents a grant for: 403 unless the signature is one of ours over
     * exactly this grant, 410 once expired, 404 when the record has been removed since.
     */
    async redeem(presented: { grant: DownloadGrant; signature: string } | null): Promise<Downloadable> {
      if (presented === null || !signer.verify(presented.grant, presented.signature)) {
        throw new PortalError('LINK_INVALID');
      }
      const { grant } = presented;
      if (clock().getTime() >= grant.expires * 1000) {
        throw new PortalError('LINK_EXPIRED', atom(new Date(grant.expires * 1000)));
      }
      const found = await find(grant);
      if (found === null) throw removed(grant.kind);
      return found;
    },

    /**
     * Where the blob store serves the bytes itself (a presigned URL, valid no longer than the link
     * that led here, whose expiry is `expires`, unix seconds), or `null` when the store does not, or
     * less than a second of the link remains: the portal then streams the bytes.
     */
    async directUrl(
      download: Downloadable,
      expires: number,
      answer: { contentType: string; contentDisposition: string },
    ): Promise<string | null> {
      if (blobs.presign === undefined) return null;
      const expiresInSeconds = Math.floor((expires * 1000 - clock().getTime()) / 1000);
      if (expiresInSeconds < 1) return null;
      return blobs.presign(download.id, { expiresInSeconds, ...answer });
    },

    /**
     * The bytes (only `range`, when given), or a 404 when they went meanwhile: a reader into the
     * caller's buffers where the store has one (`BlobStore.reader`), else a stream.
     */
    async openBytes(download: Downloadable, range?: ByteRange): Promise<Readable | BlobReader> {
      const body =
        blobs.reader === undefined ? await blobs.get(download.id, range) : await blobs.reader(download.id, range);
      if (body === null) throw removed(download.kind);
      return body;
    },

    /** A 404 unless the bytes are still there: what a HEAD checks instead of reading them. */
    async checkBytes(download: Downloadable): Promise<void> {
      if ((await blobs.stat(download.id)) === null) throw removed(download.kind);
    },
  };
}

export type DownloadService = ReturnType<typeof createDownloadService>;
