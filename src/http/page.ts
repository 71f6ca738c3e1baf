import { readFile } from 'node:fs/promises';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { PortalError } from '../errors.js';
import { type HeaderList, contractHeaders } from './reply.js';

/**
 * The customer portal page (the `ui` option): one HTML page and its two assets, a script and a
 * stylesheet, built by `npm run build` into `dist/ui/` with content hashes in their names. The page
 * only talks to the `/v1` API with the key the user signs in with; the server adds no power of its own.
 *
 * Under the page's path `P`: `P/` is the page, `P` redirects there (so that the page's relative URLs
 * hold under any mount prefix), `P/assets/<name>` are the assets; anything else under `P/` is a 404.
 */
export interface Page {
  /** The page's path (`/portal`). */
  readonly path: string;
  /** Whether `url` is the page's path or below it. */
  owns(url: string): boolean;
  /** Answers a request `owns` accepted. Throws a `PortalError` (404, 405) for the error renderer. */
  serve(req: IncomingMessage, res: ServerResponse, requestId: string): void;
}

export interface PageOptions {
  /** The page's path, normalized (`/portal`). */
  path: string;
  /** The API's base path (`/v1`), which the page calls relative to itself. */
  basePath: string;
  eventTypes: readonly string[];
  /** The schemes a webhook URL may have (`http`, `https`, and the configured destinations'): the page offers those. */
  schemes: readonly string[];
  /** Where the build put the assets; default `dist/ui/` of this package. */
  assetsDir?: URL;
}

interface Manifest {
  script: { file: string; integrity: string };
  /** The signing page's script (`signing-page.ts`). */
  signing: { file: string; integrity: string };
  style: { file: string; integrity: string };
  /** pdf.js, which the signing page imports to show a document's pages, and its worker. */
  pdf: { file: string; integrity: string };
  pdfWorker: { file: string; integrity: string };
}

export interface Asset {
  body: Buffer;
  type: string;
  /** The body gzipped by the build, for a client that accepts it; the assets only. */
  gzipped?: Buffer;
}

/**
 * The policy the page is served under: its own script and stylesheet and nothing else; no inline
 * code; calls to its own origin only; images of its own, data-URLs, and `https:` ones (the host's
 * `branding.logoUrl`); no framing, no `<base>`, no form posts; and Trusted Types, so that no string
 * can ever reach `innerHTML` or another HTML sink in the browsers that enforce it.
 */
export const PAGE_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "connect-src 'self'",
  "img-src 'self' data: https:",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
  "require-trusted-types-for 'script'",
  "trusted-types 'none'",
].join('; ');

/**
 * The Trusted Types policy the signing page may create, and the only one: it turns the one URL of
 * pdf.js's worker into a script URL, and refuses any other (`ui/src/pdf-pages.ts`).
 */
export const PDF_WORKER_POLICY = 'customer-portal-pdf-worker';

/** The signing page's policy: the page's, and a worker of its own origin started through that one policy. */
export const SIGNING_CSP = PAGE_CSP.replace("trusted-types 'none'", `trusted-types ${PDF_WORKER_POLICY}`).replace(
  "connect-src 'self'",
  "connect-src 'self'; worker-src 'self'",
);

const IMMUTABLE = 'public, max-age=31536000, immutable';
const ALLOW = ['GET', 'HEAD'];
const TYPES: Record<string, string> = {
  js: 'text/javascript; charset=utf-8',
  mjs: 'text/javascript; charset=utf-8',
  css: 'text/css; charset=utf-8',
};

/**
 * The built assets (`dist/ui/`) a page needs: the manifest, and each file with its type and the
 * build's gzipped copy. The portal page takes its script and the stylesheet; the signing page its
 * own script, the stylesheet and pdf.js.
 */
export async function builtAssets(
  page: 'portal' | 'signing',
  dir: URL = new URL('../../ui/', import.meta.url),
): Promise<{ manifest: Manifest; assets: Map<string, Asset> }> {
  let manifest: Manifest;
  try {
    manifest = JSON.parse(await readFile(new URL('manifest.json', dir), 'utf8')) as Manifest;
  } catch (error) {
    throw new Error(
      `ui: the portal page is not built (${new URL('manifest.json', dir).pathname}: ${(error as Error).message}); run \`npm run build\``,
    );
  }
  const asset = async ({ file }: { file: string }): Promise<[string, Asset]> => {
    const [body, gzipped] = await Promise.all([readFile(new URL(file, dir)), readFile(new URL(`${file}.gz`, dir))]);
    return [file, { body, type: TYPES[file.slice(file.lastIndexOf('.') + 1)]!, gzipped }];
  };
  const files =
    page === 'portal'
      ? [manifest.script, manifest.style]
      : [manifest.signing, manifest.style, manifest.pdf, manifest.pdfWorker];
  return { manifest, assets: new Map(await Promise.all(files.map(asset))) };
}

/**
 * Writes a page (its CSP, no framing, no referrer) or an asset (cached for a year, gzipped when
 * the client takes it), with the contract's headers.
 */
export function writeAsset(
  req: IncomingMessage,
  res: ServerResponse,
  requestId: string,
  asset: Asset,
  page: { csp: string; frameAncestors?: readonly string[] } | null,
): void {
  const head: HeaderList = contractHeaders(requestId);
  const frameAncestors = page?.frameAncestors ?? [];
  if (page !== null && frameAncestors.length > 0) {
    // Framing by the named origins: the CSP says which; X-Frame-Options can only say all or none.
    const csp = page.csp.replace("frame-ancestors 'none'", `frame-ancestors ${frameAncestors.join(' ')}`);
    head.push('Content-Security-Policy', csp, 'Referrer-Policy', 'no-referrer');
  } else if (page !== null) {
    head.push('Content-Security-Policy', page.csp, 'X-Frame-Options', 'DENY', 'Referrer-Policy', 'no-referrer');
  } else {
    // The contract's `no-store` is for API answers; an asset's name changes with its content.
    head[head.indexOf('Cache-Control') + 1] = IMMUTABLE;
    head.push('Vary', 'Accept-Encoding');
  }
  const gzip = asset.gzipped !== undefined && acceptsGzip(req.headers['accept-encoding']);
  const body = gzip ? asset.gzipped! : asset.body;
  if (gzip) head.push('Content-Encoding', 'gzip');
  head.push('Content-Type', asset.type, 'Content-Length', body.length);
  res.writeHead(200, head);
  res.end(req.method === 'HEAD' ? undefined : body);
}

export async function createPage(options: PageOptions): Promise<Page> {
  const { manifest, assets } = await builtAssets('portal', options.assetsDir);
  const page: Asset = {
    body: Buffer.from(
      pageHtml(manifest, apiFromPage(options.path, options.basePath), options.eventTypes, options.schemes),
    ),
    type: 'text/html; charset=utf-8',
  };
  const { path } = options;
  const last = path.slice(path.lastIndexOf('/') + 1);
  const assetPrefix = `${path}/assets/`;

  return {
    path,
    owns(url) {
      if (!url.startsWith(path)) return false;
      const next = url.charCodeAt(path.length);
      return Number.isNaN(next) || next === 47 /* / */ || next === 63 /* ? */;
    },
    serve(req, res, requestId) {
      const [pathname = '', query] = (req.url ?? '').split(/\?(.*)/s, 2);
      const method = req.method ?? 'GET';
      const isRedirect = pathname === path;
      const asset =
        pathname === path + '/'
          ? page
          : pathname.startsWith(assetPrefix)
            ? assets.get(pathname.slice(assetPrefix.length))
            : undefined;
      if (!isRedirect && asset === undefined) {
        throw new PortalError(
          'ROUTE_NOT_FOUND',
          method,
          pathname.length > 200 ? pathname.slice(0, 200) + '…' : pathname,
        );
      }
      if (method !== 'GET' && method !== 'HEAD') throw new PortalError('METHOD_NOT_ALLOWED', method, ALLOW);
      if (asset === undefined) {
        // Relative, so that a host's mount prefix (`app.use('/account', portal.handler)`) is kept.
        const head: HeaderList = contractHeaders(requestId);
        head.push('Location', `${last}/${query === undefined ? '' : '?' + query}`, 'Content-Length', 0);
        res.writeHead(302, head).end();
        return;
      }
      writeAsset(req, res, requestId, asset, asset === page ? { csp: PAGE_CSP } : null);
    },
  };
}

/** Whether an `Accept-Encoding` header takes gzip: listed (or `*`) without `q=0`. */
function acceptsGzip(header: string | undefined): boolean {
  if (header === undefined) return false;
  return header.split(',').some((part) => {
    const [coding = '', ...params] = part.trim().toLowerCase().split(';');
    if (coding.trim() !== 'gzip' && coding.trim() !== '*') return false;
    const q = params.map((param) => param.trim()).find((param) => param.startsWith('q='));
    return q === undefined || Number(q.slice(2)) > 0;
  });
}

/** The API root relative to the page at `<pagePath>/`: `../v1` for `/portal` and `/v1`. */
function apiFromPage(pagePath: string, basePath: string): string {
  const depth = pagePath.split('/').length - 1;
  return '../'.repeat(depth) + basePath.slice(1);
}

const escapeHtml = (text: string) =>
  text.replace(/[&<>"']/g, (char) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[char]!);

/** One of the built pages: its own `<meta>`s and title, the stylesheet and one script under `assets`, an app root. */
export function htmlPage(page: {
  title: string;
  metas: Record<string, string>;
  assets: string;
  style: Manifest['style'];
  script: Manifest['script'];
  noscript: string;
}): string {
  const metas = Object.entries(page.metas)
    .map(([name, content]) => `<meta name="${name}" content="${escapeHtml(content)}">\n`)
    .join('');
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
${metas}<title>${escapeHtml(page.title)}</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="${page.assets}/${page.style.file}" integrity="${page.style.integrity}">
<script src="${page.assets}/${page.script.file}" integrity="${page.script.integrity}" defer></script>
</head>
<body>
<div id="app"><noscript><p>${escapeHtml(page.noscript)}</p></noscript></div>
</body>
</html>
`;
}

function pageHtml(manifest: Manifest, api: string, eventTypes: readonly string[], schemes: readonly string[]): string {
  return htmlPage({
    title: 'Customer portal',
    metas: {
      'portal-api': api,
      'portal-event-types': JSON.stringify(eventTypes),
      'portal-schemes': JSON.stringify(schemes),
    },
    assets: 'assets',
    style: manifest.style,
    script: manifest.script,
    noscript: 'The customer portal needs JavaScript.',
  });
}
