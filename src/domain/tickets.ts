import type { DownloadService } from './downloads.js';
import { PortalError } from '../errors.js';
import { isId, newId } from '../shared/ids.js';
import type { BlobStore, Storage } from '../ports.js';
import { type Attachment, type AttachmentRecord, type DownloadLink, publicShape } from '../records.js';
import { atom } from '../shared/time.js';
import { checkAccountId, attachmentInput, parseInput } from './inputs.js';
import { type BlobBody, storeBytesThenRecord } from './files.js';

export interface AttachmentInput {
  /** The host's ticket id (`tck_…`); a new one is made when absent. */
  ticketId?: string | null;
  /** The host's message id (`tcm_…`); a new one is made when absent. Needs `ticketId`. */
  messageId?: string | null;
  name: string;
  mime: string;
  body: BlobBody;
}

/** Where an attachment sits: the three ids of the download-link route. */
export interface AttachmentRef {
  ticketId: string;
  messageId: string;
  attachmentId: string;
}

/** The 400 for the first id of `ref` without its shape, named as in the route's path. */
function checkRef(ref: AttachmentRef): void {
  const checks = [
    ['ticketId', 'tck', 'a ticket'],
    ['messageId', 'tcm', 'a message'],
    ['attachmentId', 'tca', 'an attachment'],
  ] as const;
  for (const [field, prefix, what] of checks) {
    if (!isId(prefix, ref[field])) throw new PortalError('ID_MALFORMED', field, what, prefix);
  }
}

const sitsUnder = (record: AttachmentRecord, ticketId: string, messageId: string) =>
  record.ticketId === ticketId && record.messageId === messageId;

export interface TicketServiceDeps {
  storage: Storage;
  blobs: BlobStore;
  clock: () => Date;
  downloads: DownloadService;
}

/** Ticket message attachments and their download links; the routes and `portal.tickets` both call these. */
export function createTicketService(deps: TicketServiceDeps) {
  const { storage, blobs, clock, downloads } = deps;

  /** The attachment at `ref`, or the 400 (malformed id) or 404 (not under that message and ticket) to answer. */
  async function requireAttachment(accountId: string, ref: AttachmentRef): Promise<AttachmentRecord> {
    checkAccountId(accountId);
    checkRef(ref);
    const record = await storage.getAttachment(accountId, ref.attachmentId);
    if (record === null || !sitsUnder(record, ref.ticketId, ref.messageId)) {
      throw new PortalError('ATTACHMENT_NOT_FOUND', ref.attachmentId, ref.messageId, ref.ticketId);
    }
    return record;
  }

  const service = {
    /** Streams `body` into the blob store under a new `tca_` id, then records the attachment. */
    async putAttachment(accountId: string, input: AttachmentInput): Promise<Attachment> {
      checkAccountId(accountId);
      const { ticketId, messageId, name, mime } = parseInput(attachmentInput, input, 'attachment');
      if (messageId != null && ticketId == null) {
        throw new PortalError(
          'INPUT_INVALID',
          'attachment.ticketId',
          'is required when messageId is given (a message belongs to a ticket).',
        );
      }
      if (input.body === undefined || input.body === null) throw new PortalError('INPUT_REQUIRED', 'attachment.body');
      const id = newId('tca');
      const record = await storeBytesThenRecord(
        blobs,
        id,
        input.body,
        (size): AttachmentRecord => ({
          id,
          accountId,
          ticketId: ticketId ?? newId('tck'),
          messageId: messageId ?? newId('tcm'),
          name,
          mime,
          size,
          createdAt: atom(clock()),
        }),
        (made) => storage.insertAttachment(made),
      );
      return publicShape(record);
    },

    /** The attachment, or `null` when absent or of another account. */
    async getAttachment(accountId: string, id: string): Promise<Attachment | null> {
      checkAccountId(accountId);
      // An id not of our shape (a control character in it, say) names nothing: it never reaches the store.
      if (!isId('tca', id)) return null;
      const record = await storage.getAttachment(accountId, id);
      return record && publicShape(record);
    },

    /** Removes the attachment at `ref`: 400 for a malformed id, 404 unless it sits under that message and ticket. */
    async removeAttachment(accountId: string, ref: AttachmentRef): Promise<void> {
      await requireAttachment(accountId, ref);
      await service.deleteAttachment(accountId, ref.attachmentId);
    },

    /** Removes the record, then the bytes (bytes no record names are swept; the reverse would be broken). */
    async deleteAttachment(accountId: string, id: string): Promise<boolean> {
      checkAccountId(accountId);
      if (!isId('tca', id)) return false;
      const removed = await storage.deleteAttachment(accountId, id);
      if (removed) await blobs.delete(id);
      return removed;
    },

    /**
     * A link to the attachment that serves for five minutes without Authorization: the portal's
     * signed route under `baseUrl` (default: the `publicUrl` option). 400 for a malformed id, 404
     * unless the attachment sits under that message and ticket in this account.
     */
    async downloadLink(accountId: string, ref: AttachmentRef, baseUrl?: string): Promise<DownloadLink> {
      await requireAttachment(accountId, ref);
      const { ticketId, messageId, attachmentId: id } = ref;
      return downloads.link(
        { kind: 'attachment', accountId, ticketId, messageId, id },
        baseUrl,
        'tickets.downloadLink',
      );
    },
  };
  return service;
}

export type TicketService = ReturnType<typeof createTicketService>;
