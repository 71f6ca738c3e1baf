import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * PDFs of varied make, for the completed copy to update without breaking them: written by
 * @libpdf/core (cross-reference table, and stream), rewritten by qpdf (object streams, linearized,
 * uncompressed QDF), by cairo (`pdftocairo -pdf`), and converted by LibreOffice from text when it is
 * installed. Each holds a line of text the copy must keep.
 */
export interface MadePdf {
  name: string;
  maker: string;
  bytes: Buffer;
  /** A line of the PDF's text, as pdftotext reads it. */
  text: string;
}

export const libreOfficeMissing = (): string | null =>
  spawnSync('soffice', ['--version'], { stdio: 'ignore' }).error === undefined
    ? null
    : 'LibreOffice is not installed (Debian: apt-get install libreoffice-writer-nogui)';

export async function variedPdfs(count: number): Promise<MadePdf[]> {
  const { PDF, StandardFonts } = await import('@libpdf/core');
  const dir = mkdtempSync(join(tmpdir(), 'portal-pdfs-'));
  const made: MadePdf[] = [];
  const withLibreOffice = libreOfficeMissing() === null;
  try {
    // LibreOffice takes seconds to start: every letter is converted by one run of it.
    const letters = withLibreOffice ? Math.ceil(count / 7) + 1 : 0;
    const letterText = (n: number) => `Contract number ${n} between Acme and the tenant`;
    if (letters > 0) {
      const files = Array.from({ length: letters }, (_, n) => {
        const txt = join(dir, `letter-${n}.txt`);
        writeFileSync(txt, `${letterText(n)}\n\nThe terms follow.\n`);
        return txt;
      });
      execFileSync('soffice', ['--headless', '--convert-to', 'pdf', '--outdir', dir, ...files], {
        stdio: 'pipe',
        env: { ...process.env, HOME: dir },
      });
    }
    for (let n = 0; made.length < count; n++) {
      const text = letterText(n);
      const pdf = PDF.create();
      for (let page = 1; page <= 1 + (n % 4); page++) {
        pdf
          .addPage({ size: page % 2 === 0 ? 'letter' : 'a4' })
          .drawText(page === 1 ? text : `Page ${page}`, { x: 60, y: 700, size: 12, font: StandardFonts.Helvetica });
      }
      const table = Buffer.from(await pdf.save({ useXRefStream: false }));
      const stream = Buffer.from(await pdf.save({ useXRefStream: true }));
      const source = join(dir, `source-${n}.pdf`);
      writeFileSync(source, table);
      const qpdf = (maker: string, args: string[]) => {
        const out = join(dir, `${maker}-${n}.pdf`);
        execFileSync('qpdf', [...args, source, out]);
        return readFileSync(out);
      };
      const cairo = join(dir, `cairo-${n}.pdf`);
      execFileSync('pdftocairo', ['-pdf', source, cairo]);
      const variants: [string, Buffer][] = [
        ['libpdf, xref table', table],
        ['libpdf, xref stream', stream],
        ['qpdf, object streams', qpdf('objstm', ['--object-streams=generate'])],
        ['qpdf, linearized', qpdf('linear', ['--linearize'])],
        ['qpdf, QDF uncompressed', qpdf('qdf', ['--qdf', '--object-streams=disable'])],
        ['cairo', readFileSync(cairo)],
      ];
      if (n < letters) variants.push(['LibreOffice', readFileSync(join(dir, `letter-${n}.pdf`))]);
      for (const [maker, bytes] of variants) {
        if (made.length < count) made.push({ name: `doc-${made.length}.pdf`, maker, bytes, text });
      }
    }
    return made;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
