/**
 * The control characters: C0 (NUL included), DEL and C1 — Unicode's `Cc` category. No name, address,
 * id or media type the portal takes may hold one: PostgreSQL's text cannot hold NUL at all, a line
 * break in a shown value misleads, and none has a meaning in any of them.
 */
// eslint-disable-next-line no-control-regex
const CONTROL_CHARACTER = /[\u0000-\u001f\u007f-\u009f]/;

/** Whether `text` holds a control character (see `CONTROL_CHARACTER`). */
export const hasControlCharacter = (text: string): boolean => CONTROL_CHARACTER.test(text);
