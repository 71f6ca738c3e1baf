import type { PDF, PDFPage } from '@libpdf/core';
import type { AgreementField, FieldType } from '../records.js';
import { printable } from './pdf-layout.js';

/** A field where it is drawn: its page (0-based) and its box in the page's own points, from the bottom left. */
export interface PlacedField {
  pageIndex: number;
  signerId: string;
  type: FieldType;
  box: { left: number; bottom: number; width: number; height: number };
}

/** What a signer's fields show, worked out before any is drawn. */
export interface FieldValues {
  name: string;
  /** `YYYY-MM-DD`, UTC (DESIGN §12). */
  date: string;
  initials: string;
  /** The signature image, redrawn as PNG; `null` when there is none to draw (the name stands in). */
  png: Buffer | null;
}

/**
 * The text anchors a PDF may carry instead of a `fields` part: `{{signature:N}}`, `{{name:N}}`,
 * `{{date:N}}` and `{{initials:N}}`, `N` the signer's 1-based position.
 */
const ANCHOR = /\{\{\s*(signature|name|date|initials)\s*:\s*(\d{1,2})\s*\}\}/g;

/** The height a signature drawn at an anchor takes above the anchor's baseline, and its widest. */
const ANCHORED_SIGNATURE = { height: 40, width: 160 } as const;

/** The page's visible area (its crop box, which defaults to the media box). */
const visibleArea = (page: PDFPage) => page.getCropBox();

/** A field of the `fields` part, turned from percent of the page (top-left) into the page's points (bottom-left). */
export function placeField(pdf: PDF, field: AgreementField): PlacedField {
  const page = pdf.getPage(field.page - 1);
  if (page === null) throw new Error(`the document has no page ${field.page}`);
  const area = visibleArea(page);
  const width = (field.width / 100) * area.width;
  const height = (field.height / 100) * area.height;
  const top = area.y + area.height - (field.y / 100) * area.height;
  return {
    pageIndex: field.page - 1,
    signerId: field.signerId,
    type: field.type,
    box: { left: area.x + (field.x / 100) * area.width, bottom: top - height, width, height },
  };
}

/**
 * The fields the document's text anchors stand for, and where each anchor's text is (to be hidden
 * under a white box). An anchor naming no signer (`{{signature:7}}` of three) is hidden and places
 * nothing.
 */
export function anchoredFields(pdf: PDF, signerIds: readonly string[]): { fields: PlacedField[]; anchors: { pageIndex: number; box: PlacedField['box'] }[] } {
  const fields: PlacedField[] = [];
  const anchors: { pageIndex: number; box: PlacedField['box'] }[] = [];
  for (const match of pdf.findText(ANCHOR)) {
    const { x, y, width, height } = match.bbox;
    const box = { left: x, bottom: y, width, height };
    anchors.push({ pageIndex: match.pageIndex, box });
    const [, type, position] = /\{\{\s*(\w+)\s*:\s*(\d+)/.exec(match.text) ?? [];
    const signerId = signerIds[Number(position) - 1];
    if (signerId === undefined || type === undefined) continue;
    const placed: PlacedField['box'] =
      type === 'signature'
        ? { left: x, bottom: y, width: Math.max(width, ANCHORED_SIGNATURE.width), height: Math.max(height, ANCHORED_SIGNATURE.height) }
        : { left: x, bottom: y, width: Math.max(width, 120), height };
    fields.push({ pageIndex: match.pageIndex, signerId, type: type as FieldType, box: placed });
  }
  return { fields, anchors };
}

/** The initials of a name: the first letter of each of its words, in capitals (`Ada King Lovelace` → `AKL`). */
export const initialsOf = (name: string) =>
  name
    .split(/\s+/)
    .filter((word) => word !== '')
    .map((word) => [...word][0]!.toUpperCase())
    .join('');

/**
 * Draws each field's value into its box: the signature image fitted (its proportions kept) above a
 * line naming the signer in small type, so that the page's text says who signed there; a name, a
 * date or initials as text sized to the box. Anchor text is first covered with white.
 */
export function stampFields(
  pdf: PDF,
  lib: typeof import('@libpdf/core'),
  fields: readonly PlacedField[],
  anchors: readonly { pageIndex: number; box: PlacedField['box'] }[],
  values: ReadonlyMap<string, FieldValues>,
): void {
  for (const anchor of anchors) {
    const { left, bottom, width, height } = anchor.box;
    // The box reaches a little below the baseline's descenders and past the last glyph.
    pdf.getPage(anchor.pageIndex)?.drawRectangle({ x: left - 1, y: bottom - height * 0.3, width: width + 2, height: height * 1.4, color: lib.white });
  }
  for (const field of fields) {
    const page = pdf.getPage(field.pageIndex);
    const value = values.get(field.signerId);
    if (page === null || value === undefined) continue;
    const { left, bottom, width, height } = field.box;
    if (field.type === 'signature') {
      const caption = Math.min(7, Math.max(4, height * 0.18));
      drawFitted(page, lib, value.name, field.box, caption);
      const room = { width, height: height - caption * 1.4 };
      if (value.png !== null && room.height > 2) {
        const image = pdf.embedPng(value.png);
        const scale = Math.min(room.width / image.width, room.height / image.height);
        page.drawImage(image, { x: left, y: bottom + caption * 1.4, width: image.width * scale, height: image.height * scale });
      }
      continue;
    }
    const text = field.type === 'name' ? value.name : field.type === 'date' ? value.date : value.initials;
    drawFitted(page, lib, text, field.box, Math.min(12, height * 0.8));
  }
}

/** One line of text at the box's bottom left, as large as `size` but shrunk to the box's width (never below 4 points). */
function drawFitted(page: PDFPage, lib: typeof import('@libpdf/core'), text: string, box: PlacedField['box'], size: number): void {
  const shown = printable(text);
  const font = lib.StandardFonts.Helvetica;
  const natural = lib.measureText(shown, font, size);
  const fitted = natural <= box.width ? size : Math.max(4, (size * box.width) / natural);
  page.drawText(shown, { x: box.left, y: box.bottom + fitted * 0.25, size: fitted, font });
}
