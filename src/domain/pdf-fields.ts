import type { PDF, PDFPage } from '@libpdf/core';
import type { AgreementField, FieldType } from '../records.js';
import { printable } from './pdf-layout.js';

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

/**
 * A page as the reader sees it: its crop box, turned by its `/Rotate`. Fields are measured on the
 * page as shown (from its top-left corner, as the `fields` part gives them), and drawn into the
 * page's own space turned back, so that on a page shown turned a signature still stands upright.
 */
interface Frame {
  rotation: 0 | 90 | 180 | 270;
  /** The crop box in the page's own space. */
  x0: number;
  y0: number;
  width: number;
  height: number;
  /** The page's size as shown. */
  shownWidth: number;
  shownHeight: number;
}

/** A box on the page as shown: from its bottom-left corner, in points. */
interface ShownBox {
  left: number;
  bottom: number;
  width: number;
  height: number;
}

/** A field where it is drawn: its page (0-based) and its box on the page as shown. */
export interface PlacedField {
  pageIndex: number;
  signerId: string;
  type: FieldType;
  box: ShownBox;
}

/** An anchor's text, to be covered: its box in the page's own space, as the text finder gives it. */
export interface Anchor {
  pageIndex: number;
  box: ShownBox;
}

function frameOf(page: PDFPage): Frame {
  const area = page.getCropBox();
  const rotation = (((page.rotation % 360) + 360) % 360) as Frame['rotation'];
  const turned = rotation === 90 || rotation === 270;
  return {
    rotation,
    x0: area.x,
    y0: area.y,
    width: area.width,
    height: area.height,
    shownWidth: turned ? area.height : area.width,
    shownHeight: turned ? area.width : area.height,
  };
}

/** A point of the page as shown (`u` from its left, `w` from its bottom) in the page's own space. */
function toPage(frame: Frame, u: number, w: number): { x: number; y: number } {
  const v = frame.shownHeight - w;
  const { x0, y0, width, height } = frame;
  switch (frame.rotation) {
    case 90:
      return { x: x0 + v, y: y0 + u };
    case 180:
      return { x: x0 + width - u, y: y0 + v };
    case 270:
      return { x: x0 + width - v, y: y0 + height - u };
    default:
      return { x: x0 + u, y: y0 + w };
  }
}

/** A point of the page's own space on the page as shown. */
function toShown(frame: Frame, x: number, y: number): { u: number; w: number } {
  const { x0, y0, width, height, shownHeight } = frame;
  switch (frame.rotation) {
    case 90:
      return { u: y - y0, w: shownHeight - (x - x0) };
    case 180:
      return { u: x0 + width - x, w: shownHeight - (y - y0) };
    case 270:
      return { u: y0 + height - y, w: shownHeight - (x0 + width - x) };
    default:
      return { u: x - x0, w: y - y0 };
  }
}

/** A field of the `fields` part, turned from percent of the page as shown (top-left) into points (bottom-left). */
export function placeField(pdf: PDF, field: AgreementField): PlacedField {
  const page = pdf.getPage(field.page - 1);
  if (page === null) throw new Error(`the document has no page ${field.page}`);
  const frame = frameOf(page);
  const width = (field.width / 100) * frame.shownWidth;
  const height = (field.height / 100) * frame.shownHeight;
  const top = frame.shownHeight - (field.y / 100) * frame.shownHeight;
  return {
    pageIndex: field.page - 1,
    signerId: field.signerId,
    type: field.type,
    box: { left: (field.x / 100) * frame.shownWidth, bottom: top - height, width, height },
  };
}

/**
 * The fields the document's text anchors stand for, and where each anchor's text is (to be hidden
 * under a white box). An anchor naming no signer (`{{signature:7}}` of three) is hidden and places
 * nothing.
 */
export function anchoredFields(pdf: PDF, signerIds: readonly string[]): { fields: PlacedField[]; anchors: Anchor[] } {
  const fields: PlacedField[] = [];
  const anchors: Anchor[] = [];
  for (const match of pdf.findText(ANCHOR)) {
    const { x, y, width, height } = match.bbox;
    anchors.push({ pageIndex: match.pageIndex, box: { left: x, bottom: y, width, height } });
    const [, type, position] = /\{\{\s*(\w+)\s*:\s*(\d+)/.exec(match.text) ?? [];
    const signerId = signerIds[Number(position) - 1];
    const page = pdf.getPage(match.pageIndex);
    if (signerId === undefined || type === undefined || page === null) continue;
    // The anchor's box on the page as shown: its two corners turned, whichever way round they land.
    const frame = frameOf(page);
    const corners = [toShown(frame, x, y), toShown(frame, x + width, y + height)];
    const left = Math.min(corners[0]!.u, corners[1]!.u);
    const bottom = Math.min(corners[0]!.w, corners[1]!.w);
    const shown = { width: Math.abs(corners[0]!.u - corners[1]!.u), height: Math.abs(corners[0]!.w - corners[1]!.w) };
    const placed: ShownBox =
      type === 'signature'
        ? {
            left,
            bottom,
            width: Math.max(shown.width, ANCHORED_SIGNATURE.width),
            height: Math.max(shown.height, ANCHORED_SIGNATURE.height),
          }
        : { left, bottom, width: Math.max(shown.width, 120), height: shown.height };
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
  anchors: readonly Anchor[],
  values: ReadonlyMap<string, FieldValues>,
): void {
  for (const anchor of anchors) {
    const { left, bottom, width, height } = anchor.box;
    // The box reaches a little below the baseline's descenders and past the last glyph.
    pdf.getPage(anchor.pageIndex)?.drawRectangle({
      x: left - 1,
      y: bottom - height * 0.3,
      width: width + 2,
      height: height * 1.4,
      color: lib.white,
    });
  }
  for (const field of fields) {
    const page = pdf.getPage(field.pageIndex);
    const value = values.get(field.signerId);
    if (page === null || value === undefined) continue;
    const frame = frameOf(page);
    const { left, bottom, width, height } = field.box;
    if (field.type === 'signature') {
      const caption = Math.min(7, Math.max(4, height * 0.18));
      drawFitted(page, lib, frame, value.name, field.box, caption);
      const room = { width, height: height - caption * 1.4 };
      if (value.png !== null && room.height > 2) {
        const image = pdf.embedPng(value.png);
        const scale = Math.min(room.width / image.width, room.height / image.height);
        const at = toPage(frame, left, bottom + caption * 1.4);
        page.drawImage(image, {
          ...at,
          width: image.width * scale,
          height: image.height * scale,
          ...upright(frame, at),
        });
      }
      continue;
    }
    const text = field.type === 'name' ? value.name : field.type === 'date' ? value.date : value.initials;
    drawFitted(page, lib, frame, text, field.box, Math.min(12, height * 0.8));
  }
}

/** On a page shown turned, what is drawn turns the other way about its corner, to stand upright. */
const upright = (frame: Frame, at: { x: number; y: number }) =>
  frame.rotation === 0 ? {} : { rotate: { angle: frame.rotation, origin: at } };

/** One line of text at the box's bottom left, as large as `size` but shrunk to the box's width (never below 4 points). */
function drawFitted(
  page: PDFPage,
  lib: typeof import('@libpdf/core'),
  frame: Frame,
  text: string,
  box: ShownBox,
  size: number,
): void {
  const shown = printable(text);
  const font = lib.StandardFonts.Helvetica;
  const natural = lib.measureText(shown, font, size);
  const fitted = natural <= box.width ? size : Math.max(4, (size * box.width) / natural);
  const at = toPage(frame, box.left, box.bottom + fitted * 0.25);
  page.drawText(shown, { ...at, size: fitted, font, ...upright(frame, at) });
}
