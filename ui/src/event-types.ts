import { api } from './api.js';
import { el, errorBox, replace } from './dom.js';
import type { Screen } from './screen.js';
import type { EventType, List } from './types.js';

/** The event catalogue: each type a webhook may subscribe to, what it means, its data's schema and an example. */
export const eventTypeScreen: Screen = ({ main, title }) => {
  const errors = errorBox();
  const list = el('ul', { class: 'cards', 'aria-live': 'polite' });
  replace(
    main,
    title('Event types'),
    el(
      'p',
      { class: 'hint' },
      'What each event a webhook may subscribe to carries as its data: an event whose data breaks its schema is never sent.',
    ),
    errors.node,
    list,
  );
  void (async () => {
    try {
      const { data } = await api<List<EventType>>('GET', '/event-types');
      replace(list, ...data.map(eventTypeCard));
    } catch (error) {
      errors.show(error);
    }
  })();
  return () => {};
};

function eventTypeCard(type: EventType): HTMLLIElement {
  return el(
    'li',
    { class: 'card event-type', 'data-name': type.name },
    el('h2', {}, el('code', {}, type.name), type.deprecated ? el('span', { class: 'badge warn' }, 'Deprecated') : null),
    el('p', {}, type.description ?? 'No description.'),
    type.schema === null
      ? el('p', { class: 'hint' }, 'No schema: any JSON object.')
      : el(
          'details',
          {},
          el('summary', {}, 'Schema of the data'),
          el('pre', { class: 'event-data' }, JSON.stringify(type.schema, null, 2)),
        ),
    type.example === null
      ? null
      : el(
          'details',
          {},
          el('summary', {}, 'Example'),
          el('pre', { class: 'event-data' }, JSON.stringify(type.example, null, 2)),
        ),
  );
}
