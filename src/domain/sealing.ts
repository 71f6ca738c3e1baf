import { X509Certificate, createHash } from 'node:crypto';
import type { Signer } from '@libpdf/core';
import { errorMessage } from '../errors.js';
import { loadLibpdf } from './pdf-layout.js';

/**
 * The `sealing` option: a PKCS#12 file, or a key the library never sees (a PKCS#11 token, an HSM,
 * a cloud KMS) given as its certificate and a `sign` function. `timestampUrl`: an RFC 3161
 * timestamp authority, for PAdES B-T.
 */
export type SealingOptions =
  | { p12: Buffer; password?: string; timestampUrl?: string }
  | {
      /** PEM: the sealing certificate first, then its chain. */
      certificate: string;
      /**
       * The signature of `digest`, the SHA-256 of the CMS signed attributes (32 bytes): PKCS#1 v1.5
       * for an RSA key, DER for an ECDSA one.
       */
      sign(digest: Buffer, algorithm: 'RSA-SHA256' | 'ECDSA-SHA256'): Promise<Buffer | Uint8Array>;
      timestampUrl?: string;
    };

/** PAdES levels a seal reaches here: with a timestamp (`B-T`) or without (`B-B`). */
export type SealLevel = 'B-B' | 'B-T';

interface Sealed {
  bytes: Buffer;
  level: SealLevel;
  /** Why the timestamp was left out, when the authority was set and failed; `null` otherwise. */
  degraded: string | null;
}

/** Seals PDFs with one key: an incremental update that adds a PAdES signature (`ETSI.CAdES.detached`) over the whole file. */
export interface Sealer {
  seal(pdf: Uint8Array, reason: string, now: Date): Promise<Sealed>;
}

/**
 * The sealer the `sealing` option describes, or `null` without one (copies are then stamped, not
 * sealed). Checked at start: a PKCS#12 file that does not open with its password, or a certificate
 * that is not PEM of an RSA or EC key, stops `createPortal` with the reason.
 */
export async function createSealer(options: SealingOptions | undefined): Promise<Sealer | null> {
  if (options === undefined) return null;
  if (options === null || typeof options !== 'object')
    throw new TypeError('sealing must be { p12, password?, timestampUrl? } or { certificate, sign, timestampUrl? }');
  const timestampUrl = options.timestampUrl;
  if (
    timestampUrl !== undefined &&
    (typeof timestampUrl !== 'string' ||
      !/^https?:$/.test(URL.canParse(timestampUrl) ? new URL(timestampUrl).protocol : ''))
  ) {
    throw new TypeError('sealing.timestampUrl must be an http or https URL');
  }
  const lib = await loadLibpdf();
  const signer = 'p12' in options ? await p12Signer(lib, options) : externalSigner(options);
  const authority =
    timestampUrl === undefined ? null : new lib.HttpTimestampAuthority(timestampUrl, { timeout: 10_000 });
  return {
    async seal(pdf, reason, now) {
      const load = () => lib.PDF.load(pdf);
      const signing = { signer, reason, signingTime: now, subFilter: 'ETSI.CAdES.detached' as const };
      if (authority !== null) {
        try {
          const { bytes } = await (await load()).sign({ ...signing, level: 'B-T', timestampAuthority: authority });
          return { bytes: Buffer.from(bytes), level: 'B-T', degraded: null };
        } catch (error) {
          // A timestamp authority that fails costs the timestamp, never the seal.
          if (!(error instanceof lib.TimestampError)) throw error;
          const { bytes } = await (await load()).sign({ ...signing, level: 'B-B' });
          return { bytes: Buffer.from(bytes), level: 'B-B', degraded: errorMessage(error) };
        }
      }
      const { bytes } = await (await load()).sign({ ...signing, level: 'B-B' });
      return { bytes: Buffer.from(bytes), level: 'B-B', degraded: null };
    },
  };
}

async function p12Signer(
  lib: typeof import('@libpdf/core'),
  options: { p12: Buffer; password?: string },
): Promise<Signer> {
  if (!Buffer.isBuffer(options.p12))
    throw new TypeError('sealing.p12 must be a Buffer holding a PKCS#12 (.p12, .pfx) file');
  if (options.password !== undefined && typeof options.password !== 'string')
    throw new TypeError('sealing.password must be a string');
  try {
    return await lib.P12Signer.create(new Uint8Array(options.p12), options.password ?? '');
  } catch (error) {
    throw new TypeError(`sealing.p12 could not be opened: ${errorMessage(error)}`);
  }
}

/** A signer over the host's `sign`: libpdf hands it the signed attributes, it hands the host their SHA-256. */
function externalSigner(options: Extract<SealingOptions, { certificate: string }>): Signer {
  if (typeof options.sign !== 'function')
    throw new TypeError('sealing.sign must be a function (digest, algorithm) => Promise<Buffer>');
  const blocks =
    typeof options.certificate === 'string'
      ? (options.certificate.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? [])
      : [];
  if (blocks.length === 0)
    throw new TypeError('sealing.certificate must be PEM: the sealing certificate first, then its chain');
  const chain = blocks.map((block, index) => {
    try {
      return new X509Certificate(block);
    } catch (error) {
      throw new TypeError(`sealing.certificate: certificate ${index + 1} is not valid PEM (${errorMessage(error)})`);
    }
  });
  const leaf = chain[0]!;
  const type = leaf.publicKey.asymmetricKeyType;
  if (type !== 'rsa' && type !== 'ec')
    throw new TypeError(`sealing.certificate: an RSA or EC key is needed, not ${type}`);
  const algorithm = type === 'rsa' ? 'RSA-SHA256' : 'ECDSA-SHA256';
  return {
    certificate: new Uint8Array(leaf.raw),
    certificateChain: chain.slice(1).map((one) => new Uint8Array(one.raw)),
    keyType: type === 'rsa' ? 'RSA' : 'EC',
    signatureAlgorithm: type === 'rsa' ? 'RSASSA-PKCS1-v1_5' : 'ECDSA',
    async sign(data, digestAlgorithm) {
      if (digestAlgorithm !== 'SHA-256')
        throw new Error(`sealing: ${digestAlgorithm} asked for; the external key signs SHA-256 digests`);
      const digest = createHash('sha256').update(data).digest();
      return new Uint8Array(await options.sign(digest, algorithm));
    },
  };
}
