import type { AgreementService } from '../domain/agreements.js';
import type { BrandingOf } from '../domain/branding.js';
import type { DownloadService } from '../domain/downloads.js';
import type { EventCatalogue } from '../domain/event-types.js';
import type { FileService } from '../domain/files.js';
import type { PortalSessionService } from '../domain/portal-sessions.js';
import type { SigningService } from '../domain/signing.js';
import type { TicketService } from '../domain/tickets.js';
import type { WebhookService } from '../domain/webhooks.js';
import type { Route, RouteArea } from './handler.js';
import { agreementRoutes } from './routes/agreements.js';
import { brandingRoutes } from './routes/branding.js';
import { downloadRoutes } from './routes/downloads.js';
import { eventTypeRoutes } from './routes/event-types.js';
import { fileRoutes } from './routes/files.js';
import { portalSessionRoutes } from './routes/portal-sessions.js';
import { signingPageRoutes } from './routes/signing-page.js';
import { signingRoutes } from './routes/signing.js';
import { ticketRoutes } from './routes/tickets.js';
import { webhookDeliveryRoutes } from './routes/webhook-deliveries.js';
import { webhookHealthRoutes } from './routes/webhook-health.js';
import { webhookKeyRoutes, webhookSecretRoutes } from './routes/webhook-keys.js';
import { webhookExtensionRoutes, webhookRoutes } from './routes/webhooks.js';

export interface RouteServices {
  webhooks: WebhookService;
  catalogue: EventCatalogue;
  files: FileService;
  tickets: TicketService;
  downloads: DownloadService;
  agreements: AgreementService;
  signing: SigningService;
  sessions: PortalSessionService;
  brandingOf: BrandingOf;
}

/**
 * The route table: every route of the API and of the signing page, each with its operation. The
 * handler is built from it, and so is the OpenAPI document (`src/openapi/openapi.ts`), from the
 * same table made with stand-in services: a route only keeps its services for its handler.
 */
export function routeTable(
  services: RouteServices,
  options: {
    extensions: boolean;
    frameAncestors?: readonly string[];
    /** The portal page's address for a request's base URL, or `null` when no page is served. */
    pageUrl?: (baseUrl: string) => string | null;
  },
): Route[] {
  const { webhooks, catalogue, files, tickets, downloads, agreements, signing, sessions, brandingOf } = services;
  // Each route's area: what a portal session's scopes must include to reach it (handler.ts).
  const inArea = (area: RouteArea, routes: Route[]) => routes.map((route) => ({ ...route, area }));
  const routes = [
    ...inArea('webhooks', [
      ...webhookRoutes(webhooks),
      ...webhookExtensionRoutes(webhooks),
      ...webhookSecretRoutes(webhooks),
      ...webhookDeliveryRoutes(webhooks),
      ...webhookHealthRoutes(webhooks),
      ...webhookKeyRoutes(webhooks),
      ...eventTypeRoutes(catalogue),
    ]),
    ...inArea('agreements', [
      ...agreementRoutes(agreements),
      ...signingRoutes(signing),
      ...signingPageRoutes(options.frameAncestors ?? []),
    ]),
    ...inArea('files', fileRoutes(files)),
    ...inArea('tickets', ticketRoutes(tickets)),
    ...inArea('downloads', downloadRoutes(downloads)),
    ...inArea('sessions', portalSessionRoutes(sessions, options.pageUrl ?? (() => null))),
    ...inArea('account', brandingRoutes(brandingOf)),
  ];
  return options.extensions ? routes : routes.filter((route) => route.extension !== true);
}
