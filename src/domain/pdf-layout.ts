import type { PDF, PDFPage } from '@libpdf/core';

/** The standard PDF fonts encode Windows-1252 only: another character is shown as `?` (the trail's JSON keeps it exact). */
export const printable = (text: string) =>
  text.replace(/[^\x20-\x7e\u00a0-\u00ff\u20ac\u2013\u2014\u2018\u2019\u201c\u201d\u2022\u2026]/g, '?');

/**
 * @libpdf/core, loaded with the first PDF made (a certificate, a completed copy): a portal that never makes one does not hold it
 * in its heap, where every collection would mark it again (docs/performance.md, "The portal's heap").
 */
let libpdf: Promise<typeof import('@libpdf/core')> | undefined;
export const loadLibpdf = () => (libpdf ??= import('@libpdf/core'));

/** A4, in points, and its margin. */
const PAGE = { width: 595.28, height: 841.89, margin: 50 } as const;

/**
 * Text laid out down the page, a new page where the next line would cross the bottom margin: the
 * few kinds of line a certificate or a signature page has, each wrapped within the margins.
 */
export class Flow {
  private page: PDFPage;
  private y = PAGE.height - PAGE.margin;
  private readonly width = PAGE.width - 2 * PAGE.margin;

  constructor(
    private readonly pdf: PDF,
    private readonly lib: typeof import('@libpdf/core'),
  ) {
    this.page = pdf.addPage({ size: 'a4' });
  }

  /** Room for `height` points more on this page, or a new page. */
  private room(height: number): void {
    if (this.y - height >= PAGE.margin) return;
    this.page = this.pdf.addPage({ size: 'a4' });
    this.y = PAGE.height - PAGE.margin;
  }

  /** `text` wrapped within `width` points from `x`, each line on the page it fits on. */
  text(text: string, { size = 10, bold = false, x = PAGE.margin as number, width = this.width } = {}): void {
    const font = bold ? this.lib.StandardFonts.HelveticaBold : this.lib.StandardFonts.Helvetica;
    const lineHeight = size * 1.25;
    for (const line of this.lib.layoutText(printable(text), font, size, width, lineHeight).lines) {
      this.room(lineHeight);
      this.page.drawText(line.text, { x, y: this.y - size, size, font });
      this.y -= lineHeight;
    }
  }

  /** `Label: value`, the label bold, the value wrapped beside it. */
  line(label: string, value: string): void {
    const size = 10;
    const lead = `${label}: `;
    const indent = this.lib.measureText(lead, this.lib.StandardFonts.HelveticaBold, size);
    this.room(size * 1.25);
    this.page.drawText(lead, { x: PAGE.margin, y: this.y - size, size, font: this.lib.StandardFonts.HelveticaBold });
    this.text(value, { size, x: PAGE.margin + indent, width: this.width - indent });
  }

  heading(text: string): void {
    this.gap(10);
    this.text(text, { size: 13, bold: true });
    this.gap(3);
  }

  gap(points: number): void {
    this.y -= points;
  }

  /** A PNG fitted within `width` × `height` points, its proportions kept. */
  image(png: Buffer, width: number, height: number): void {
    const image = this.pdf.embedPng(png);
    const scale = Math.min(width / image.width, height / image.height);
    const drawn = { width: image.width * scale, height: image.height * scale };
    this.room(drawn.height);
    this.page.drawImage(image, { x: PAGE.margin, y: this.y - drawn.height, ...drawn });
    this.y -= drawn.height + 4;
  }
}
