import { Readable } from 'node:stream';
import { buffer } from 'node:stream/consumers';
import { describeError } from '../errors.js';
import type { BlobStore, Storage } from '../ports.js';
import type { AgreementRecord } from '../records.js';
import type { Logger } from '../shared/logger.js';
import { certificatePdf } from './certificate.js';
import type { Sealer } from './sealing.js';
import type { BrandingOf } from './branding.js';

/**
 * The blob key of an agreement's certificate: `agc_` and the agreement id's own part, so the key
 * follows from the id, and the orphan sweep knows it as the agreement's (`isBlobReferenced`).
 */
export const certificateKey = (agreementId: string) => `agc_${agreementId.slice('agr_'.length)}`;

export interface Certificates {
  /**
   * Starts making the certificate of an agreement that has just been signed or closed, off the
   * request that closed it; a failure is logged, and the next `get` makes it.
   */
  prepare(record: AgreementRecord): void;
  /** The kept certificate of a signed or closed agreement, made now if it is not kept yet. */
  get(record: AgreementRecord): Promise<Buffer>;
  /**
   * Replaces the kept certificate of an agreement whose personal data was just erased: once a
   * making begun before has ended, the kept one is removed and a new one made from the agreement
   * as now stored. Resolves once the old one is gone; the new one is made off the request.
   */
  remake(record: AgreementRecord): Promise<void>;
  /** Resolves once every making begun so far has ended (the portal's `close` waits for it). */
  settled(): Promise<void>;
}

/**
 * Each certificate is made once, as its agreement closes, and kept in the blob store: a request
 * for it reads bytes, never makes a PDF. Makings run one at a time in a process, so closing many
 * agreements at once queues work rather than stacking PDF renderings; two requests for one
 * certificate share its making. The agreement is read as its turn comes, moments after its close,
 * and the kept certificate stays as it was made; a step recorded after that (a late view) is in
 * the trail, not in the PDF.
 */
export function createCertificates(deps: {
  storage: Storage;
  blobs: BlobStore;
  clock: () => Date;
  logger: Logger;
  sealer?: Sealer | null;
  /** The company the certificate is made under (option `branding`). */
  brandingOf?: BrandingOf;
}): Certificates {
  const { storage, blobs, clock, logger } = deps;
  const making = new Map<string, Promise<Buffer>>();
  let queue: Promise<unknown> = Promise.resolve();

  async function kept(key: string): Promise<Buffer | null> {
    const stream = await blobs.get(key);
    return stream === null ? null : buffer(stream);
  }

  /**
   * Queues the making of the certificate of agreement `id`. The queue holds ids only, the agreement
   * read when its turn comes: however many agreements close at once, the wait costs no images.
   */
  function make(accountId: string, id: string): Promise<Buffer> {
    const key = certificateKey(id);
    let made = making.get(key);
    if (made !== undefined) return made;
    const turn = queue.then(async () => {
      const stored = await kept(key);
      if (stored !== null) return stored;
      const record = await storage.getAgreement(accountId, id);
      if (record === null) throw new Error(`certificate: agreement ${id} is gone`);
      const now = clock();
      const drawn = await certificatePdf(record, now, (await deps.brandingOf?.(accountId)) ?? null);
      // Sealed like the completed copies, with the same key, when the portal has one.
      const pdf =
        deps.sealer == null
          ? drawn
          : (await deps.sealer.seal(drawn, `Certificate of completion of ${record.name}`, now)).bytes;
      await blobs.put(key, Readable.from([pdf]));
      return pdf;
    });
    made = turn.finally(() => making.delete(key));
    making.set(key, made);
    queue = turn.catch(() => undefined);
    return made;
  }

  function prepare(record: AgreementRecord): void {
    make(record.accountId, record.id).catch((error) =>
      logger.warn(
        { agreementId: record.id, error: describeError(error) },
        'certificate: could not be made as the agreement closed; the next request makes it',
      ),
    );
  }

  return {
    prepare,
    async remake(record) {
      const key = certificateKey(record.id);
      await making.get(key)?.catch(() => undefined);
      await blobs.delete(key);
      prepare(record);
    },
    async get(record) {
      return (await kept(certificateKey(record.id))) ?? make(record.accountId, record.id);
    },
    settled: () => queue.then(() => undefined),
  };
}
