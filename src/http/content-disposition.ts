/**
 * `Content-Disposition: attachment` for a file name (RFC 6266), in the two forms clients read:
 * `filename="…"`, an ASCII stand-in that every client understands (curl -J reads only this one),
 * and `filename*=UTF-8''…` (RFC 8187, formerly 5987), the exact name, which browsers prefer.
 */
export function attachmentDisposition(name: string): string {
  return `attachment; filename="${asciiFallback(name)}"; filename*=UTF-8''${encodeExtValue(name)}`;
}

/**
 * The name in printable ASCII: accents dropped (`Résumé` → `Resume`); any other character, the
 * quote and backslash a quoted-string would need escaped, and `%` (some clients percent-decode
 * this form, RFC 6266 §4.3) replaced by `_`.
 */
export function asciiFallback(name: string): string {
  const fallback = name
    .normalize('NFKD')
    .replace(/[\u0300-\u036f]/g, '')
    .replace(/[^\x20-\x7e]|["\\%]/gu, '_');
  return fallback === '' ? 'download' : fallback;
}

/** Percent-encodes every byte of the UTF-8 name outside RFC 8187's `attr-char`. */
function encodeExtValue(name: string): string {
  // encodeURIComponent throws on a lone surrogate, and leaves ' ( ) * unescaped, which attr-char does not allow.
  const wellFormed = name.replace(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g, '\uFFFD');
  return encodeURIComponent(wellFormed).replace(/['()*]/g, (c) => '%' + c.charCodeAt(0).toString(16).toUpperCase());
}
