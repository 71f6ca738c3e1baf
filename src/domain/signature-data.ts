import * as v from 'valibot';
import { SignatureImageError, redrawSignature } from './signature-image.js';
import {
  type ImageType,
  SIGNATURE_PREFIX,
  SIGNATURE_MAX_LENGTH,
  signatureDataUrl,
  signatureProblem,
} from '../shapes/values.js';

export { SIGNATURE_MAX_LENGTH };

/**
 * A signature image as a signer or sender gives it: checked as `signatureDataUrl`, then decoded
 * within a pixel budget and redrawn (`redrawSignature`); the output is the data-URL of the redrawn
 * PNG, the only form that is stored, hashed or drawn.
 */
export const signatureInput = v.pipe(
  signatureDataUrl,
  v.rawTransform<string, string>(({ dataset, addIssue, NEVER }) => {
    const prefix = SIGNATURE_PREFIX.exec(dataset.value)!;
    const bytes = Buffer.from(dataset.value.slice(prefix[0].length), 'base64');
    try {
      return `data:image/png;base64,${redrawSignature(prefix[1]!.toLowerCase() as ImageType, bytes).toString('base64')}`;
    } catch (error) {
      if (!(error instanceof SignatureImageError)) throw error;
      addIssue({ message: error.message });
      return NEVER;
    }
  }),
);

/**
 * A stored signature image (`data:` URL) redrawn for drawing, or `null` when it cannot be: what a
 * PDF library is handed. Images stored before redrawing existed pass through here as any other.
 */
export function drawableSignature(dataUrl: string | null): Buffer | null {
  const prefix = dataUrl === null ? null : SIGNATURE_PREFIX.exec(dataUrl);
  if (prefix == null || signatureProblem(dataUrl!) !== null) return null;
  try {
    return redrawSignature(
      prefix[1]!.toLowerCase() as ImageType,
      Buffer.from(dataUrl!.slice(prefix[0].length), 'base64'),
    );
  } catch (error) {
    if (error instanceof SignatureImageError) return null;
    throw error;
  }
}
