import { PortalError } from '../../errors.js';
import type { Route } from '../handler.js';
import { type Asset, PDF_WORKER_POLICY, SIGNING_CSP, builtAssets, htmlPage, writeAsset } from '../page.js';

type Built = Awaited<ReturnType<typeof builtAssets>>;

/**
 * The signing page a signer's link opens (`<API root>/sign#<token>`), and its assets under
 * `sign/assets/`: served to anyone (the page holds nothing; the token in its fragment authorizes its
 * calls), under the portal page's strict CSP with one Trusted Types policy more (pdf.js's worker); with
 * `signing.frameAncestors`, those origins (and no other) may frame it. Read from the build on the
 * first request.
 */
export function signingPageRoutes(
  frameAncestors: readonly string[],
  load: () => Promise<Built> = () => builtAssets('signing'),
): Route[] {
  let built: Promise<{ page: Asset; assets: Map<string, Asset> }> | undefined;
  const ready = () =>
    (built ??= load().then(({ manifest, assets }) => ({
      assets,
      page: { body: Buffer.from(pageHtml(manifest, frameAncestors)), type: 'text/html; charset=utf-8' },
    })));
  return [
    {
      method: ['GET', 'HEAD'],
      path: '/sign',
      public: true,
      extension: true,
      doc: null,
      writesResponse: true,
      async handler({ req, res, requestId }) {
        writeAsset(req, res, requestId, (await ready()).page, { csp: SIGNING_CSP, frameAncestors });
      },
    },
    {
      method: ['GET', 'HEAD'],
      path: '/sign/assets/:file',
      public: true,
      extension: true,
      doc: null,
      writesResponse: true,
      async handler({ req, res, requestId, params }) {
        const asset = (await ready()).assets.get(params.file!);
        if (asset === undefined)
          throw new PortalError('ROUTE_NOT_FOUND', req.method ?? 'GET', `sign/assets/${params.file!.slice(0, 100)}`);
        writeAsset(req, res, requestId, asset, null);
      },
    },
  ];
}

function pageHtml(manifest: Built['manifest'], frameAncestors: readonly string[]): string {
  return htmlPage({
    title: 'Sign',
    // The page posts its progress to a parent frame only on one of these origins.
    metas: {
      referrer: 'no-referrer',
      // Where the page imports pdf.js and starts its worker from, when it shows a document's pages.
      'customer-portal-pdf': `sign/assets/${manifest.pdf.file}`,
      'customer-portal-pdf-worker': `sign/assets/${manifest.pdfWorker.file}`,
      'customer-portal-pdf-policy': PDF_WORKER_POLICY,
      ...(frameAncestors.length > 0 ? { 'customer-portal-frame-ancestors': frameAncestors.join(' ') } : {}),
    },
    assets: 'sign/assets',
    style: manifest.style,
    script: manifest.signing,
    noscript: 'Signing needs JavaScript.',
  });
}
