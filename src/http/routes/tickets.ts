import { response, attachmentParameters, failure, messageParameters, uploadBody } from '../route-doc.js';
import type { Route } from '../handler.js';
import type { TicketService } from '../../domain/tickets.js';
import { readUpload } from '../upload-form.js';

/**
 * `GET /tickets/{ticketId}/message/{messageId}/attachment/{attachmentId}/download`: a signed link,
 * valid 5 minutes; and the extensions: attach a file to a message, remove an attachment.
 */
export function ticketRoutes(tickets: TicketService): Route[] {
  return [
    {
      method: ['GET', 'HEAD'],
      path: '/tickets/:ticketId/message/:messageId/attachment/:attachmentId/download',
      doc: {
        operationId: 'getAttachmentDownloadLink',
        summary: 'A download link for a ticket message attachment',
        parameters: attachmentParameters,
        tags: ['Tickets'],
        description: 'The link serves for 5 minutes without Authorization.',
        responses: {
          200: response('The link and when it expires.', 'DownloadLink'),
          400: failure('An id is malformed.'),
          404: failure('No such attachment under that message and ticket in this account.'),
        },
      },
      async handler({ accountId, params, baseUrl }) {
        const { ticketId = '', messageId = '', attachmentId = '' } = params;
        const link = await tickets.downloadLink(accountId, { ticketId, messageId, attachmentId }, baseUrl);
        return { status: 200, body: link };
      },
    },
    // Extensions: attach a file to a message (multipart, streamed), and remove an attachment.
    {
      method: 'POST',
      path: '/tickets/:ticketId/message/:messageId/attachment',
      extension: true,
      doc: {
        operationId: 'createAttachment',
        summary: 'Attach a file to a ticket message',
        parameters: messageParameters,
        tags: ['Tickets'],
        description: `The file is streamed into the blob store as it arrives; a failed or aborted upload keeps nothing.`,
        requestBody: uploadBody('AttachmentUploadForm'),
        responses: {
          201: response('The attachment, with its id.', 'Attachment'),
          400: failure(
            'An id is malformed; the `file` part is missing, repeated or without a filename; an unknown part; a malformed body.',
          ),
          413: failure('The file is over 5 MiB (5,242,880 bytes).'),
          415: failure('The body is not `multipart/form-data`, or is compressed.'),
        },
      },
      streamsBody: true,
      async handler({ req, accountId, params }) {
        const { ticketId = '', messageId = '' } = params;
        const attachment = await readUpload(req, 'POST /tickets/{ticketId}/message/{messageId}/attachment', [], {
          // No text part: the attachment is recorded as soon as its bytes are in.
          keep: (file) =>
            tickets.putAttachment(accountId, {
              ticketId,
              messageId,
              name: file.name,
              mime: file.mime,
              body: file.body,
            }),
          complete: async (attachment) => attachment,
          discard: (attachment) => tickets.deleteAttachment(accountId, attachment.id),
        });
        return { status: 201, body: attachment };
      },
    },
    {
      method: 'DELETE',
      path: '/tickets/:ticketId/message/:messageId/attachment/:attachmentId',
      extension: true,
      doc: {
        operationId: 'deleteAttachment',
        summary: 'Remove an attachment',
        parameters: attachmentParameters,
        tags: ['Tickets'],
        description: `Its bytes go with it; links to it answer 404 from then on.`,
        responses: {
          204: response('Removed.'),
          400: failure('An id is malformed.'),
          404: failure('No such attachment under that message and ticket in this account.'),
        },
      },
      async handler({ accountId, params }) {
        const { ticketId = '', messageId = '', attachmentId = '' } = params;
        await tickets.removeAttachment(accountId, { ticketId, messageId, attachmentId });
        return { status: 204 };
      },
    },
  ];
}
