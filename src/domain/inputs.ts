import * as v from 'valibot';
import { PortalError } from '../errors.js';

type Schema<T> = v.GenericSchema<unknown, T>;

/**
 * Parses `input` with `schema`, or throws a 400 whose message names what was wrong: the subject
 * (`signers[1].email`, `the webhook`), then the schema's own sentence. Only the first issue is
 * reported: one clear sentence beats a list.
 */
export function parseInput<T>(schema: Schema<T>, input: unknown, subject: string): T {
  const result = v.safeParse(schema, input, { abortEarly: true });
  if (result.success) return result.output;
  const issue = result.issues[0];
  const where = subject + pathOf(issue.path);
  if (issue.type.endsWith('object') && issue.path !== undefined && issue.input === undefined && issue.expected !== 'never') {
    throw new PortalError('INPUT_REQUIRED', where);
  }
  if (issue.type === 'strict_object' && issue.expected === 'never' && issue.path !== undefined) {
    const key = issue.path[issue.path.length - 1]?.key;
    const owner = subject + pathOf(issue.path.slice(0, -1) as typeof issue.path);
    throw new PortalError('INPUT_UNKNOWN_FIELD', owner, String(key));
  }
  throw new PortalError('INPUT_INVALID', where, issue.message);
}

function pathOf(path: v.BaseIssue<unknown>['path']): string {
  if (path === undefined) return '';
  let text = '';
  for (const item of path) {
    text += typeof item.key === 'number' ? `[${item.key}]` : `.${String(item.key)}`;
  }
  return text;
}

/** A display name for a file or directory: 1–255 characters, no path separators or control characters. */
export const entryName = v.pipe(
  v.string('must be a string'),
  v.minLength(1, 'must not be empty'),
  v.maxLength(255, 'must be at most 255 characters'),
  v.check((name) => name !== '.' && name !== '..', 'must not be "." or ".."'),
  // eslint-disable-next-line no-control-regex
  v.regex(/^[^/\\\u0000-\u001f\u007f]+$/, 'must not contain "/", "\\" or control characters'),
);

/** A media type `type/subtype` (RFC 6838 names), optionally with parameters. */
export const mediaType = v.pipe(
  v.string('must be a string'),
  v.maxLength(255, 'must be at most 255 characters'),
  v.regex(
    /^[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}\/[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}(\s*;\s*[A-Za-z0-9!#$&^_.+-]+=("[^"\\\r\n]*"|[A-Za-z0-9!#$&^_.+-]+))*$/,
    'must be a media type such as "application/pdf"',
  ),
);

export const accountId = v.pipe(v.string('must be a string'), v.minLength(1, 'must not be empty'));

/** One of the portal's `eventTypes`: a webhook subscribes to one, an event is published as one. */
export const eventType = (eventTypes: readonly string[]) =>
  v.picklist(eventTypes, `must be one of: ${eventTypes.join(', ')}`);
