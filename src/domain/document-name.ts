/** What a document is called when its filename holds nothing usable. */
const FALLBACK = 'document';
const MAX_BYTES = 255;

// eslint-disable-next-line no-control-regex
const INVISIBLE = /[\u0000-\u001f\u007f-\u009f\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff]/g;
const RESERVED = /[\\/:*?"<>|]/g;

/**
 * A client's filename reduced to a safe base name: no directories, no control or direction-changing
 * characters, none of the characters file systems reserve, no leading dots (so never `.` or `..`,
 * never a hidden file), at most 255 bytes of UTF-8 with the extension kept. `document` when
 * nothing is left.
 */
export function safeDocumentName(filename: string | undefined): string {
  const base = (filename ?? '').split(/[\\/]/).pop()!;
  const name = base.normalize('NFC').replace(INVISIBLE, '').replace(RESERVED, '_').trim().replace(/^\.+/, '').trim();
  return name === '' ? FALLBACK : fitBytes(name, MAX_BYTES);
}

/** Shortens the stem (never the extension, when it is short) until the name fits in `limit` UTF-8 bytes. */
function fitBytes(name: string, limit: number): string {
  if (Buffer.byteLength(name) <= limit) return name;
  const dot = name.lastIndexOf('.');
  const extension = dot > 0 && name.length - dot <= 16 ? name.slice(dot) : '';
  const stem = [...name.slice(0, name.length - extension.length)];
  const budget = limit - Buffer.byteLength(extension);
  let bytes = 0;
  let kept = '';
  for (const char of stem) {
    bytes += Buffer.byteLength(char);
    if (bytes > budget) break;
    kept += char;
  }
  return kept.trimEnd() + extension;
}
