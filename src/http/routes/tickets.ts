import type { Route } from '../handler.js';
import type { TicketService } from '../../domain/tickets.js';
import { readUpload } from '../upload-form.js';

/** `GET /tickets/{ticketId}/message/{messageId}/attachment/{attachmentId}/download`: a signed link, valid 5 minutes. */
export function ticketRoutes(tickets: TicketService, options: { extensions: boolean }): Route[] {
  const routes: Route[] = [
    {
      method: ['GET', 'HEAD'],
      path: '/tickets/:ticketId/message/:messageId/attachment/:attachmentId/download',
      async handler({ accountId, params, baseUrl }) {
        const { ticketId = '', messageId = '', attachmentId = '' } = params;
        const link = await tickets.downloadLink(accountId, { ticketId, messageId, attachmentId }, baseUrl);
        return { status: 200, body: link };
      },
    },
  ];
  if (!options.extensions) return routes;
  // Extensions: attach a file to a message (multipart, streamed), and remove an attachment.
  routes.push(
    {
      method: 'POST',
      path: '/tickets/:ticketId/message/:messageId/attachment',
      streamsBody: true,
      async handler({ req, accountId, params }) {
        const { ticketId = '', messageId = '' } = params;
        const attachment = await readUpload(req, 'POST /tickets/{ticketId}/message/{messageId}/attachment', [], {
          // No text part: the attachment is recorded as soon as its bytes are in.
          keep: (file) => tickets.putAttachment(accountId, { ticketId, messageId, name: file.name, mime: file.mime, body: file.body }),
          complete: async (attachment) => attachment,
          discard: (attachment) => tickets.deleteAttachment(accountId, attachment.id),
        });
        return { status: 201, body: attachment };
      },
    },
    {
      method: 'DELETE',
      path: '/tickets/:ticketId/message/:messageId/attachment/:attachmentId',
      async handler({ accountId, params }) {
        const { ticketId = '', messageId = '', attachmentId = '' } = params;
        await tickets.removeAttachment(accountId, { ticketId, messageId, attachmentId });
        return { status: 204 };
      },
    },
  );
  return routes;
}
