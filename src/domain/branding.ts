import { describeError } from '../errors.js';
import type { Branding } from '../options.js';
import type { Logger } from '../shared/logger.js';

/**
 * Who the portal speaks for (option `branding`): the company's name, logo, accent colour and
 * support address, shown on the signing page, the portal page, the certificate and in mails. A
 * static branding is checked once, at start (a `TypeError` naming the field); a function's answer
 * each time it is asked, and one that throws, hangs or answers something malformed is logged and
 * read as no branding: a host's bug never stops a signer from signing.
 */

/** A branding as the portal shows it: every field there, `null` where the host gave none. */
export interface ShownBranding {
  name: string;
  /** An `https:` URL, or a `data:image/…;base64,` URL of at most `MAX_LOGO_DATA_URL` characters. */
  logoUrl: string | null;
  /** `#rrggbb`. */
  accentColor: string | null;
  supportEmail: string | null;
}

/** The branding of an account, or `null` when the host gives none. */
export type BrandingOf = (accountId: string) => Promise<ShownBranding | null>;

/** A data-URL logo is kept in every answer that shows it: 96 KiB of base64 (72 KiB of image) at most. */
const MAX_LOGO_DATA_URL = 96 * 1024;
/** How long a branding function may take before the portal goes on without it. */
const BRANDING_TIMEOUT_MS = 2000;

const DATA_LOGO = /^data:image\/(?:png|jpeg|webp|svg\+xml);base64,[A-Za-z0-9+/]+={0,2}$/;
const COLOUR = /^#[0-9a-fA-F]{6}$/;
const EMAIL = /^[^\s@<>"]+@[^\s@<>"]+\.[^\s@<>"]+$/;

/** `branding` checked field by field: the shown branding, or the first problem in words. */
function check(branding: unknown): ShownBranding | string {
  if (typeof branding !== 'object' || branding === null) return 'must be an object with a name';
  const { name, logoUrl, accentColor, supportEmail } = branding as Record<string, unknown>;
  if (typeof name !== 'string' || name.trim() === '' || name.length > 100)
    return 'name must be a non-empty string of at most 100 characters';
  if (logoUrl !== undefined && !isLogoUrl(logoUrl))
    return `logoUrl must be an https: URL or a data:image/(png|jpeg|webp|svg+xml);base64 URL of at most ${MAX_LOGO_DATA_URL} characters`;
  if (accentColor !== undefined && (typeof accentColor !== 'string' || !COLOUR.test(accentColor)))
    return 'accentColor must be a colour as #rrggbb';
  if (supportEmail !== undefined && (typeof supportEmail !== 'string' || !EMAIL.test(supportEmail)))
    return 'supportEmail must be an e-mail address';
  return {
    name: name.trim(),
    logoUrl: (logoUrl as string | undefined) ?? null,
    accentColor: (accentColor as string | undefined)?.toLowerCase() ?? null,
    supportEmail: (supportEmail as string | undefined) ?? null,
  };
}

function isLogoUrl(value: unknown): value is string {
  if (typeof value !== 'string') return false;
  if (value.startsWith('data:')) return value.length <= MAX_LOGO_DATA_URL && DATA_LOGO.test(value);
  if (value.length > 2048) return false;
  try {
    return new URL(value).protocol === 'https:';
  } catch {
    return false;
  }
}

/** The branding service of the option: checks a static one now (throwing a `TypeError`), a function's answers as they come. */
export function createBranding(
  option: Branding | ((accountId: string) => Promise<Branding>) | undefined,
  logger: Logger,
): BrandingOf {
  if (option === undefined) return async () => null;
  if (typeof option !== 'function') {
    const shown = check(option);
    if (typeof shown === 'string') throw new TypeError(`branding.${shown}`);
    return async () => shown;
  }
  return async (accountId) => {
    let timer: NodeJS.Timeout | undefined;
    try {
      const answer = await Promise.race([
        option(accountId),
        new Promise<never>((_, reject) => {
          timer = setTimeout(
            () => reject(new Error(`no answer within ${BRANDING_TIMEOUT_MS} ms`)),
            BRANDING_TIMEOUT_MS,
          );
        }),
      ]);
      const shown = check(answer);
      if (typeof shown !== 'string') return shown;
      logger.warn(
        { accountId, problem: shown },
        'branding: the function answered a malformed branding; shown without it',
      );
    } catch (error) {
      logger.warn({ accountId, error: describeError(error) }, 'branding: the function failed; shown without it');
    } finally {
      clearTimeout(timer);
    }
    return null;
  };
}
