import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { SealError } from '../../src/domain/completed-copy.js';
import { PdfBusy, PdfError, createPdfWork } from '../../src/domain/pdf-work.js';
import { makePki, pkiMissing } from '../helpers/pki.js';

/**
 * The PDF worker thread: a PDF past its time or memory, or built to nest without end, fails that
 * one job with a PdfError and never this process; the next job gets a fresh thread.
 */

async function pdfOfPages(pages: number, text = 'A page'): Promise<Buffer> {
  const { PDF, StandardFonts } = await import('@libpdf/core');
  const pdf = PDF.create();
  for (let n = 1; n <= pages; n++)
    pdf.addPage({ size: 'a4' }).drawText(`${text} ${n}`, { x: 60, y: 760, size: 14, font: StandardFonts.Helvetica });
  return Buffer.from(await pdf.save());
}

/** What a completed copy of a document with no signer shows: enough to make one. */
const PLAN = {
  agreement: { id: 'agr_1', name: 'A', senderName: 'S' },
  document: { name: 'a.pdf', fileHash: 'x' },
  signers: [],
  fields: [],
  completedAt: '2026-12-05T10:00:00+00:00',
};

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

test('a job past its time fails alone: the job after it, already on a new thread, is not ended by the old one', async () => {
  const work = createPdfWork(undefined, { memoryMb: 512, pagesMs: 15_000, copyMs: 1 });
  try {
    const big = await pdfOfPages(300);
    const [copy, pages] = await Promise.allSettled([
      work.completedCopy(big, PLAN),
      work.pageCount(await pdfOfPages(2)),
    ]);
    assert.is(copy.status, 'rejected');
    assert.instance((copy as PromiseRejectedResult).reason, PdfError);
    assert.equal(pages, { status: 'fulfilled', value: 2 }, 'the next job is answered by its own thread');
  } finally {
    await work.close();
  }
});

test('a key that does not answer in time: the copy fails as the key failing (retried), not as the PDF', async () => {
  const missing = pkiMissing();
  if (missing !== null) return void console.log(`  skipped: ${missing}`);
  const pki = makePki();
  let asked = 0;
  const work = createPdfWork(
    {
      certificate: pki.chainPem,
      sign: () => {
        asked++;
        return new Promise<Buffer>(() => {});
      },
    },
    { memoryMb: 512, pagesMs: 15_000, copyMs: 3_000 },
  );
  try {
    const pdf = await pdfOfPages(2);
    // The thread started and its PDF library loaded first: the copy's 3 s are then the stamping's and the key's, not a loaded machine's start-up.
    assert.is(await work.pageCount(pdf), 2);
    await work.completedCopy(pdf, PLAN).then(
      () => assert.unreachable('no key answered'),
      (error: Error) => {
        assert.instance(error, SealError);
        assert.match(error.message, /the key or the timestamp authority did not answer/);
      },
    );
    assert.is(asked, 1, 'the key was asked');
  } finally {
    await work.close();
    pki.close();
  }
});

test('at most 32 jobs wait: the next is refused at once as busy', async () => {
  const work = createPdfWork(undefined);
  try {
    const bytes = await pdfOfPages(50);
    const queued = Array.from({ length: 32 }, () => work.pageCount(bytes));
    await work.pageCount(bytes).then(
      () => assert.unreachable('a 33rd job waits for nothing'),
      (error: Error) => assert.instance(error, PdfBusy),
    );
    assert.ok((await Promise.all(queued)).every((pages) => pages === 50));
    assert.is(await work.pageCount(bytes), 50, 'once they are done, jobs are taken again');
  } finally {
    await work.close();
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

test("a stranger's PDF with a stray ')' in a dictionary: read strictly, not sealed; repaired, it would spend the heap", async () => {
  // @libpdf/core 0.4.2's lenient parser loops on a ')' where a key should be, growing its warnings until the heap is spent.
  const body = `1 0 obj\n<< /Type /Catalog ) /Pages 2 0 R >>\nendobj\n2 0 obj\n<< /Type /Pages /Kids [] /Count 0 >>\nendobj\n`;
  const head = '%PDF-1.7\n';
  const xref = `xref\n0 3\n0000000000 65535 f \n${String(head.length).padStart(10, '0')} 00000 n \n${String(head.length + body.indexOf('2 0 obj')).padStart(10, '0')} 00000 n \n`;
  const pdf = Buffer.from(
    `${head}${body}${xref}trailer\n<< /Size 3 /Root 1 0 R >>\nstartxref\n${head.length + body.length}\n%%EOF\n`,
  );
  const work = createPdfWork(undefined, { memoryMb: 32, pagesMs: 60_000, copyMs: 60_000 });
  try {
    assert.equal(
      await work.inspectSeal(pdf, { repair: false }),
      { sealed: false, level: null, signedAt: null },
      'read strictly: not sealed',
    );
    await fails(work.inspectSeal(pdf, { repair: true }), /more than the 32 MiB|PDF worker/);
    assert.is(await work.pageCount(await pdfOfPages(1)), 1, 'the next job has a thread');
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
  const pdf = Buffer.from(
    `${head}${body}${xref}trailer\n<< /Size 3 /Root 1 0 R >>\nstartxref\n${head.length + body.length}\n%%EOF\n`,
  );
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
