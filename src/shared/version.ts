import { readFileSync } from 'node:fs';

/**
 * The package version, read once from `package.json` (three levels above the compiled `dist/src/shared/`),
 * for the webhook `User-Agent`.
 */
export const VERSION: string = (() => {
  try {
    const manifest = JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as {
      version?: unknown;
    };
    return typeof manifest.version === 'string' ? manifest.version : '0.0.0';
  } catch {
    return '0.0.0';
  }
})();
