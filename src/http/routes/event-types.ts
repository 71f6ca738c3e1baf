import { response } from '../route-doc.js';
import type { EventCatalogue } from '../../domain/event-types.js';
import type { Route } from '../handler.js';

/** `GET /event-types` (an extension): the event catalogue, each type with its schema and example. */
export function eventTypeRoutes(catalogue: EventCatalogue): Route[] {
  return [
    {
      method: ['GET', 'HEAD'],
      path: '/event-types',
      extension: true,
      doc: {
        operationId: 'listEventTypes',
        summary: 'The event catalogue',
        tags: ['Webhooks'],
        description: `Every type a webhook may subscribe to (the portal's \`eventTypes\`), with the JSON Schema its data matches, a description and an example: the library's own types come with theirs, and the host gives its types one with \`portal.eventTypes.define\`. A publish whose data breaks its type's schema is refused (400).`,
        responses: { 200: response('The catalogue, in the order of the `eventTypes` option.', 'EventTypeList') },
      },
      async handler() {
        return { status: 200, body: { data: catalogue.list() } };
      },
    },
  ];
}
