import type { EventCatalogue } from '../../domain/event-types.js';
import type { Route } from '../handler.js';

/** `GET /event-types` (an extension): the event catalogue, each type with its schema and example. */
export function eventTypeRoutes(catalogue: EventCatalogue): Route[] {
  return [
    {
      method: ['GET', 'HEAD'],
      path: '/event-types',
      async handler() {
        return { status: 200, body: { data: catalogue.list() } };
      },
    },
  ];
}
