import { X509Certificate, createHash, verify } from 'node:crypto';
import * as asn1js from 'asn1js';
import * as pkijs from 'pkijs';
import type { PDF, PdfDict } from '@libpdf/core';
import { atom } from '../shared/time.js';
import { loadLibpdf } from './pdf-layout.js';

/** The PAdES levels `/verify` names (DESIGN §12). */
export type PadesLevel = 'B-B' | 'B-T' | 'B-LT' | 'B-LTA';

/** What a PDF's own seal says of it, whoever made it. */
export interface SealReport {
  /** The PDF's last signature covers every byte of the file, and each of its signatures checks against the bytes it covers. */
  sealed: boolean;
  /** The PAdES level of its seal (`ETSI.CAdES.detached`); `null` when it is not sealed, or sealed otherwise (`adbe.pkcs7.detached`). */
  level: PadesLevel | null;
  /** When it was sealed: the timestamp's time, else the signing time the seal claims (ATOM). */
  signedAt: string | null;
}

const NOT_SEALED: SealReport = { sealed: false, level: null, signedAt: null };
/** id-aa-signatureTimeStampToken (RFC 3161 appendix A): an unsigned attribute holding the timestamp of the signature. */
const SIGNATURE_TIMESTAMP = '1.2.840.113549.1.9.16.2.14';
/** id-signingTime (RFC 5652 §11.3). */
const SIGNING_TIME = '1.2.840.113549.1.9.5';

interface Signature {
  subFilter: string;
  ranges: [number, number, number, number];
  contents: Uint8Array;
}

/**
 * Reads the seals of a PDF and checks each cryptographically against the bytes its `/ByteRange`
 * names: the CMS signature over its signed attributes, and their message digest over those bytes.
 * It checks integrity, not trust: the chain is not validated (a relying party's validator, pdfsig
 * or Adobe, does that against its own trust list). Runs in the PDF worker: the bytes are anyone's.
 *
 * `repair` reads a damaged file as a viewer would (@libpdf/core's lenient parser: a wrong offset,
 * a broken dictionary). Only for a file known to be a completed copy the portal made: that
 * parser's recovery can run until the thread's heap is exhausted on a stray `)`, `{` or `}` in a
 * dictionary (@libpdf/core 0.4.2), ten seconds of CPU for a file of a few KB. Any other file is read
 * strictly: one that only opens repaired is not sealed.
 */
export async function inspectSeal(bytes: Uint8Array, { repair }: { repair: boolean }): Promise<SealReport> {
  const lib = await loadLibpdf();
  let pdf: PDF;
  try {
    pdf = await lib.PDF.load(bytes, { lenient: repair });
  } catch {
    return NOT_SEALED;
  }
  let signatures: Signature[];
  try {
    signatures = signaturesOf(pdf);
  } catch {
    // A catalog or form the strict reader refuses (objects are read as they are reached).
    return NOT_SEALED;
  }
  if (signatures.length === 0) return NOT_SEALED;
  // The seal whose range ends where the file ends is the last word: anything appended after it is unsealed.
  if (!signatures.some((signature) => coversWholeFile(signature.ranges, bytes.length))) return NOT_SEALED;
  let seal: { signedAt: string | null; timestamped: boolean } | null = null;
  for (const signature of signatures) {
    const checked = await check(signature, bytes);
    if (checked === null) return NOT_SEALED;
    if (signature.subFilter === 'ETSI.CAdES.detached' || signature.subFilter === 'adbe.pkcs7.detached') seal = checked;
  }
  if (seal === null) return NOT_SEALED;
  const cades = signatures.some((signature) => signature.subFilter === 'ETSI.CAdES.detached');
  const dss = pdf.getCatalog().has('DSS');
  const documentTimestamp = signatures.some((signature) => signature.subFilter === 'ETSI.RFC3161');
  const level: PadesLevel | null = !cades
    ? null
    : dss && documentTimestamp
      ? 'B-LTA'
      : dss && seal.timestamped
        ? 'B-LT'
        : seal.timestamped
          ? 'B-T'
          : 'B-B';
  return { sealed: true, level, signedAt: seal.signedAt };
}

function signaturesOf(pdf: PDF): Signature[] {
  const found: Signature[] = [];
  for (const field of pdf.getForm()?.getSignatureFields() ?? []) {
    if (!field.isSigned()) continue;
    const dict = field.getSignatureDict();
    const signature = dict === null ? null : signatureOf(dict);
    if (signature !== null) found.push(signature);
  }
  return found.sort((a, b) => a.ranges[2] + a.ranges[3] - (b.ranges[2] + b.ranges[3]));
}

function signatureOf(dict: PdfDict): Signature | null {
  const range = dict.getArray('ByteRange');
  const contents = dict.getString('Contents');
  const subFilter = dict.getName('SubFilter')?.value ?? '';
  if (range === undefined || contents === undefined || range.length !== 4) return null;
  const numbers = [0, 1, 2, 3].map((index) => {
    const item = range.at(index) as { type?: string; value?: unknown } | undefined;
    return item?.type === 'number' && typeof item.value === 'number' ? item.value : Number.NaN;
  });
  if (numbers.some((value) => !Number.isSafeInteger(value) || value < 0)) return null;
  return { subFilter, ranges: numbers as Signature['ranges'], contents: contents.bytes };
}

const coversWholeFile = ([start, first, second, length]: Signature['ranges'], size: number) =>
  start === 0 && first <= second && second + length === size;

/** The signature checked against the bytes it covers: its time and whether it is timestamped, or `null` when it does not check. */
async function check(
  signature: Signature,
  bytes: Uint8Array,
): Promise<{ signedAt: string | null; timestamped: boolean } | null> {
  const [start, first, second, length] = signature.ranges;
  if (start + first > second || second + length > bytes.length) return null;
  if (!gapIsContents(bytes, start + first, second, signature.contents)) return null;
  const covered = new Uint8Array(first + length);
  covered.set(bytes.subarray(start, start + first), 0);
  covered.set(bytes.subarray(second, second + length), first);
  try {
    const parsed = asn1js.fromBER(trimmed(signature.contents));
    if (parsed.offset === -1) return null;
    const content = new pkijs.ContentInfo({ schema: parsed.result });
    if (content.contentType !== pkijs.ContentInfo.SIGNED_DATA) return null;
    const signed = new pkijs.SignedData({ schema: content.content });
    if (signed.signerInfos.length !== 1) return null;
    if (signature.subFilter === 'ETSI.RFC3161') {
      // A document timestamp: the token signs a TSTInfo whose message imprint is the covered bytes' hash.
      const info = tstInfo(signed);
      if (info === null || !signerVerifies(signed, new Uint8Array(signed.encapContentInfo.eContent!.getValue())))
        return null;
      if (!imprintMatches(info, covered)) return null;
      return { signedAt: atomOf(info.genTime), timestamped: true };
    }
    if (!signerVerifies(signed, covered)) return null;
    const info = signed.signerInfos[0]!;
    const token = info.unsignedAttrs?.attributes.find((attribute) => attribute.type === SIGNATURE_TIMESTAMP);
    const timestampTime =
      token === undefined ? null : tokenTime(token.values[0], new Uint8Array(info.signature.valueBlock.valueHexView));
    const claimed = info.signedAttrs?.attributes.find((attribute) => attribute.type === SIGNING_TIME);
    const signingTime = claimed === undefined ? null : timeOf(claimed.values[0]);
    return { signedAt: timestampTime ?? signingTime, timestamped: token !== undefined && timestampTime !== null };
  } catch {
    return null;
  }
}

/**
 * Whether the bytes a signature leaves out are exactly its own `/Contents`, as a hex string: `<`,
 * two hex digits a byte of the value the parser read, `>`. Without this, a file could add a new
 * signature dictionary whose `/ByteRange` skips bytes of its choosing (a changed page among them)
 * and still have the old signature check over what is left.
 */
export function gapIsContents(bytes: Uint8Array, from: number, to: number, contents: Uint8Array): boolean {
  if (to - from !== 2 + 2 * contents.length || bytes[from] !== 0x3c || bytes[to - 1] !== 0x3e) return false;
  const hex = Buffer.from(bytes.buffer, bytes.byteOffset + from + 1, to - from - 2).toString('latin1');
  if (!/^[0-9A-Fa-f]*$/.test(hex)) return false;
  return Buffer.from(hex, 'hex').equals(Buffer.from(contents.buffer, contents.byteOffset, contents.byteLength));
}

/** `/Contents` is padded with zeros past the DER it holds. */
function trimmed(contents: Uint8Array): ArrayBuffer {
  let end = contents.length;
  while (end > 0 && contents[end - 1] === 0) end--;
  return contents.slice(0, Math.min(contents.length, end + 2)).buffer;
}

function imprintMatches(info: pkijs.TSTInfo, covered: Uint8Array): boolean {
  const hash = HASHES[info.messageImprint.hashAlgorithm.algorithmId];
  if (hash === undefined) return false;
  return createHash(hash)
    .update(covered)
    .digest()
    .equals(Buffer.from(info.messageImprint.hashedMessage.valueBlock.valueHexView));
}

/** The digest algorithms a seal may use, by OID, as node:crypto names them. */
const HASHES: Record<string, string> = {
  '2.16.840.1.101.3.4.2.1': 'sha256',
  '2.16.840.1.101.3.4.2.2': 'sha384',
  '2.16.840.1.101.3.4.2.3': 'sha512',
};
/** id-messageDigest (RFC 5652 §11.2). */
const MESSAGE_DIGEST = '1.2.840.113549.1.9.4';

/**
 * The one signer of `signed` signed `content` (RFC 5652 §5.4): the message digest among its signed
 * attributes is the digest of `content`, and its signature over those attributes (DER, as a SET)
 * checks with the public key of its certificate, found among the SignedData's by serial number.
 * RSA PKCS#1 v1.5 and ECDSA; anything else does not check.
 */
function signerVerifies(signed: pkijs.SignedData, content: Uint8Array): boolean {
  const info = signed.signerInfos[0]!;
  const hash = HASHES[info.digestAlgorithm.algorithmId];
  const attributes = info.signedAttrs;
  if (hash === undefined || attributes === undefined) return false;
  const digest = attributes.attributes.find((attribute) => attribute.type === MESSAGE_DIGEST)?.values[0] as
    | asn1js.OctetString
    | undefined;
  if (
    digest === undefined ||
    !createHash(hash).update(content).digest().equals(Buffer.from(digest.valueBlock.valueHexView))
  )
    return false;
  const sid = info.sid as pkijs.IssuerAndSerialNumber;
  const serial = sid.serialNumber === undefined ? null : Buffer.from(sid.serialNumber.valueBlock.valueHexView);
  const certificate = (signed.certificates ?? []).find(
    (one): one is pkijs.Certificate =>
      one instanceof pkijs.Certificate &&
      serial !== null &&
      Buffer.from(one.serialNumber.valueBlock.valueHexView).equals(serial),
  );
  if (certificate === undefined) return false;
  const encoded = new Uint8Array(
    attributes.encodedValue.byteLength === 0 ? attributes.toSchema().toBER() : attributes.encodedValue.slice(0),
  );
  // Signed as a SET OF (RFC 5652 §5.4), stored under the [0] IMPLICIT tag.
  encoded[0] = 0x31;
  const key = new X509Certificate(Buffer.from(certificate.toSchema().toBER())).publicKey;
  return verify(hash, encoded, key, Buffer.from(info.signature.valueBlock.valueHexView));
}

function tstInfo(token: pkijs.SignedData): pkijs.TSTInfo | null {
  const content = token.encapContentInfo.eContent;
  if (content === undefined) return null;
  const parsed = asn1js.fromBER(content.getValue());
  return parsed.offset === -1 ? null : new pkijs.TSTInfo({ schema: parsed.result });
}

/** The time of a signature timestamp token (a ContentInfo of SignedData over a TSTInfo), once it checks as the timestamp of `signatureValue`. */
function tokenTime(value: unknown, signatureValue: Uint8Array): string | null {
  try {
    const content = new pkijs.ContentInfo({ schema: value as asn1js.AsnType });
    const token = new pkijs.SignedData({ schema: content.content });
    const info = tstInfo(token);
    const tst = token.encapContentInfo.eContent;
    if (
      info === null ||
      tst === undefined ||
      !signerVerifies(token, new Uint8Array(tst.getValue())) ||
      !imprintMatches(info, signatureValue)
    )
      return null;
    return atomOf(info.genTime);
  } catch {
    return null;
  }
}

function timeOf(value: unknown): string | null {
  if (value instanceof asn1js.UTCTime || value instanceof asn1js.GeneralizedTime) return atomOf(value.toDate());
  return null;
}

const atomOf = (date: Date) => (Number.isNaN(date.getTime()) ? null : atom(date));
