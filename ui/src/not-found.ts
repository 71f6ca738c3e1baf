import { el, replace } from './dom.js';
import type { ScreenContext } from './screen.js';

/** The shape of a record id, as the API makes them: the prefix, `_`, 1–64 letters or digits. */
export const isId = (prefix: string, value: string | undefined): value is string =>
  value !== undefined && new RegExp(`^${prefix}_[0-9A-Za-z]{1,64}$`).test(value);

/**
 * What a link to something that is not there shows: a malformed id (checked before any request),
 * a location that does not decode, or an id the API does not know in this account.
 */
export function showNotFound(
  { main, title }: Pick<ScreenContext, 'main' | 'title'>,
  what: string,
  back: { href: string; label: string },
): void {
  replace(
    main,
    title('Not found'),
    el('p', { class: 'not-found', role: 'status' }, `${what} This link may be mistyped, or what it named was deleted.`),
    el('p', {}, el('a', { href: back.href }, back.label)),
  );
}
