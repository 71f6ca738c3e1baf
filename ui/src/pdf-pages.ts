import { el, replace } from './dom.js';
import type { Words } from './words.js';

/**
 * A document's pages, drawn in the signing page by pdf.js (`pdfjs-dist`), served by the portal
 * itself: nothing comes from another host. pdf.js is imported the first time a page is shown, and
 * its worker is started here, through the one Trusted Types policy the signing page's CSP names,
 * which turns the worker's URL (read from the page's meta tags) into a script URL and refuses
 * any other. pdf.js then starts no worker of its own, evaluates no string (`isEvalSupported`),
 * loads no WebAssembly and fetches no fonts.
 *
 * Bounds, for the signer's browser: a document over {@link MAX_BYTES} is not fetched, at most
 * {@link MAX_PAGES} pages are shown, and each is drawn only once it scrolls near the view, at the
 * width it is shown at. Whatever fails (a file that is not a PDF, a PDF pdf.js cannot read, a
 * browser without module workers) leaves the document's link, and says so.
 */

/** What of pdf.js this page uses (its module's exports). */
interface PdfJs {
  GlobalWorkerOptions: { workerPort: Worker | null };
  getDocument(source: {
    data: Uint8Array;
    isEvalSupported: boolean;
    useWasm: boolean;
    useWorkerFetch: boolean;
    enableXfa: boolean;
    verbosity: number;
  }): { promise: Promise<PdfDocument> };
}
interface PdfDocument {
  numPages: number;
  getPage(number: number): Promise<PdfPage>;
}
interface PdfPage {
  getViewport(options: { scale: number }): { width: number; height: number };
  render(options: { canvas: HTMLCanvasElement; viewport: { width: number; height: number } }): {
    promise: Promise<void>;
  };
  cleanup(): void;
}

/** Trusted Types, where the browser has them (not yet in TypeScript's DOM library). */
interface TrustedTypes {
  createPolicy(
    name: string,
    rules: { createScriptURL(url: string): string },
  ): { createScriptURL(url: string): unknown };
}

/** The largest document whose pages are shown: a bigger one is only linked. */
const MAX_BYTES = 25 * 1024 * 1024;
/** The most pages shown of one document; the rest are read in the downloaded file. */
const MAX_PAGES = 50;
/** The widest a page is drawn at, in CSS pixels; the device's pixel ratio is taken up to 2. */
const MAX_WIDTH = 900;

const meta = (name: string) => document.querySelector(`meta[name="${name}"]`)?.getAttribute('content') ?? null;

let loaded: Promise<PdfJs> | undefined;

/** pdf.js, imported once, with its worker started through the page's one policy. */
function pdfjs(): Promise<PdfJs> {
  loaded ??= (async () => {
    const moduleUrl = meta('customer-portal-pdf');
    const workerUrl = meta('customer-portal-pdf-worker');
    const policyName = meta('customer-portal-pdf-policy');
    if (moduleUrl === null || workerUrl === null || policyName === null) throw new Error('pdf.js is not in this page');
    const worker = new URL(workerUrl, location.href).href;
    const trustedTypes = (window as { trustedTypes?: TrustedTypes }).trustedTypes;
    const policy = trustedTypes?.createPolicy(policyName, {
      createScriptURL: (url: string) => {
        if (url !== worker) throw new TypeError(`not pdf.js's worker: ${url}`);
        return url;
      },
    });
    const lib = (await import(new URL(moduleUrl, location.href).href)) as PdfJs;
    // A TrustedScriptURL where the browser enforces Trusted Types; the plain URL where it does not.
    const scriptUrl = (policy?.createScriptURL(worker) ?? worker) as unknown as string;
    lib.GlobalWorkerOptions.workerPort = new Worker(scriptUrl, { type: 'module' });
    return lib;
  })();
  // A failure is not kept: the next document tries again.
  loaded.catch(() => {
    loaded = undefined;
  });
  return loaded;
}

/**
 * A section showing the pages of the document at `link` (`size` bytes), filled once they are read.
 * The link is read at once, so one from a view just asked for has not lapsed.
 */
export function pdfPages(name: string, size: number, link: string, words: Words): HTMLElement {
  const section = el('section', { class: 'pages', 'aria-label': words.pagesOf(name) });
  if (size > MAX_BYTES) {
    replace(section, el('p', { class: 'hint' }, words.pagesTooLarge));
    return section;
  }
  const status = el('p', { class: 'hint', role: 'status' }, words.pagesLoading);
  section.append(status);
  void draw(section, status, name, link, words);
  return section;
}

async function draw(
  section: HTMLElement,
  status: HTMLElement,
  name: string,
  link: string,
  words: Words,
): Promise<void> {
  let pdf: PdfDocument;
  try {
    const res = await fetch(link, { credentials: 'omit' });
    if (!res.ok) throw new Error(`${res.status}`);
    const data = new Uint8Array(await res.arrayBuffer());
    if (data.byteLength > MAX_BYTES) throw new Error('too large');
    // A document is a PDF when its bytes start with `%PDF-` (the portal's own rule for sealing).
    if (String.fromCharCode(...data.subarray(0, 5)) !== '%PDF-') {
      status.textContent = words.pagesNotPdf;
      return;
    }
    const lib = await pdfjs();
    pdf = await lib.getDocument({
      data,
      isEvalSupported: false,
      useWasm: false,
      useWorkerFetch: false,
      enableXfa: false,
      verbosity: 0,
    }).promise;
  } catch {
    status.textContent = words.pagesUnavailable;
    return;
  }
  const shown = Math.min(pdf.numPages, MAX_PAGES);
  status.remove();
  const observer = new IntersectionObserver(
    (entries) => {
      for (const entry of entries) {
        if (!entry.isIntersecting) continue;
        observer.unobserve(entry.target);
        void drawPage(pdf, entry.target as HTMLCanvasElement, words);
      }
    },
    { rootMargin: '400px 0px' },
  );
  for (let number = 1; number <= shown; number++) {
    const canvas = el('canvas', {
      class: 'page',
      role: 'img',
      'aria-label': words.pageOf(number, pdf.numPages, name),
      'data-page': number,
    });
    section.append(canvas);
    observer.observe(canvas);
  }
  if (pdf.numPages > shown) section.append(el('p', { class: 'hint' }, words.morePages(pdf.numPages - shown)));
}

async function drawPage(pdf: PdfDocument, canvas: HTMLCanvasElement, words: Words): Promise<void> {
  try {
    const page = await pdf.getPage(Number(canvas.dataset.page));
    const natural = page.getViewport({ scale: 1 });
    const cssWidth = Math.min(canvas.parentElement?.clientWidth || MAX_WIDTH, MAX_WIDTH);
    const viewport = page.getViewport({ scale: (cssWidth / natural.width) * Math.min(devicePixelRatio || 1, 2) });
    canvas.width = Math.floor(viewport.width);
    canvas.height = Math.floor(viewport.height);
    await page.render({ canvas, viewport }).promise;
    page.cleanup();
    canvas.dataset.drawn = '';
  } catch {
    canvas.replaceWith(el('p', { class: 'hint' }, words.pagesUnavailable));
  }
}
