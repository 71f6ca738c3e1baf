import { en } from './en.js';
import { fr } from './fr.js';
import type { Speech } from './speech.js';

export type { Speech } from './speech.js';

const CATALOGUES: Record<string, Speech> = { en, fr };

/** The catalogue of `locale`'s language (`fr-CA` → French); English when there is none or no locale. */
export function speechOf(locale: string | undefined): Speech {
  return CATALOGUES[(locale ?? 'en').toLowerCase().split('-')[0]!] ?? en;
}
