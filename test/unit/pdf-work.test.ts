import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { PdfError, createPdfWork } from '../../src/domain/pdf-work.js';

/**
 * The PDF worker thread: a PDF past its time or memory, or built to nest without end, fails that
 * one job with a PdfError and never this process; the next job gets a fresh thread.
 */

async function pdfOfPages(pages: number, text = 'A page'): Promise<Buffer> {
  const { PDF, StandardFonts } = await import('@libpdf/core');
  const pdf = PDF.create();
  for (let n = 1; n <= pages; n++) pdf.addPage({ size: 'a4' }).drawText(`${text} ${n}`, { x: 60, y: 760, size: 14, font: StandardFonts.Helvetica });
  return Buffer.from(await pdf.save());
}

const fails = async (job: Promise<unknown>, message: RegExp) =>
  job.then(
    () => assert.unreachable('the job should fail'),
    (error: Error) => {
      assert.instance(error, PdfError);
      assert.match(error.message, message);
    },
  );

test('pages are counted in the thread', async () => {
  const work = createPdfWork(undefined);
  try {
    assert.is(await work.pageCount(await pdfOfPages(3)), 3);
  } finally {
    await work.close();
  }
});

test('a job past its time ends the thread and fails; the next job runs on a new thread', async () => {
  const work = createPdfWork(undefined, { memoryMb: 512, pagesMs: 1, copyMs: 1 });
  try {
    await fails(work.pageCount(await pdfOfPages(200)), /took longer than 0\.001 s/);
  } finally {
    await work.close();
  }
  const roomy = createPdfWork(undefined, { memoryMb: 512, pagesMs: 15_000, copyMs: 15_000 });
  try {
    await fails(roomy.pageCount(Buffer.from('%PDF-1.7\nnothing here')), /./);
    assert.is(await roomy.pageCount(await pdfOfPages(2)), 2, 'a failed job leaves the thread able to take the next');
  } finally {
    await roomy.close();
  }
});

test('a PDF that needs more memory than the thread may use fails that job only', async () => {
  // 16 MiB of heap cannot hold a 2,000-page document's objects.
  const work = createPdfWork(undefined, { memoryMb: 16, pagesMs: 60_000, copyMs: 60_000 });
  const big = await pdfOfPages(2000, 'x'.repeat(400));
  try {
    await fails(work.pageCount(big), /more than the 16 MiB|PDF worker/);
    assert.ok(process.memoryUsage().heapUsed > 0, 'this process goes on');
  } finally {
    await work.close();
  }
});

test('arrays nested 200,000 deep: the reader fails, the process goes on', async () => {
  const work = createPdfWork(undefined);
  const depth = 200_000;
  const body = `1 0 obj\n<< /Type /Catalog /Pages 2 0 R /Deep ${'['.repeat(depth)}${']'.repeat(depth)} >>\nendobj\n2 0 obj\n<< /Type /Pages /Kids [] /Count 0 >>\nendobj\n`;
  const head = '%PDF-1.7\n';
  const xref = `xref\n0 3\n0000000000 65535 f \n${String(head.length).padStart(10, '0')} 00000 n \n${String(head.length + body.indexOf('2 0 obj')).padStart(10, '0')} 00000 n \n`;
  const pdf = Buffer.from(`${head}${body}${xref}trailer\n<< /Size 3 /Root 1 0 R >>\nstartxref\n${head.length + body.length}\n%%EOF\n`);
  try {
    const outcome = await work.pageCount(pdf).then(
      (pages) => ({ pages }),
      (error: Error) => ({ error }),
    );
    // Either the reader copes (no pages) or the job fails as a PdfError; the process is never touched.
    if ('error' in outcome) assert.instance(outcome.error, PdfError);
    else assert.is(outcome.pages, 0);
  } finally {
    await work.close();
  }
});

test.run();
