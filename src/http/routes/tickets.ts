import type { Route } from '../handler.js';
import type { TicketService } from '../../domain/tickets.js';

/** `GET /tickets/{ticketId}/message/{messageId}/attachment/{attachmentId}/download`: a signed link, valid 5 minutes. */
export function ticketRoutes(tickets: TicketService): Route[] {
  return [
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
}
