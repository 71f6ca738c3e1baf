import { createHash } from 'node:crypto';
import net from 'node:net';
import { crc32 } from 'node:zlib';
import jpeg from 'jpeg-js';
import { PNG } from 'pngjs';
import type { Readable } from 'node:stream';
import { fsBlobs } from '../../adapters/fs/index.js';
import { memoryBlobs, memoryStorage } from '../../adapters/memory/index.js';
import type { AgreementRecord, BlobStore, Storage } from '../../src/index.js';
import { removeDir, tempDir } from './fs-dirs.js';
import { KEY_A } from './server.js';

export const sha256 = (data: string | Buffer) => createHash('sha256').update(data).digest('hex');

/**
 * A real PNG of `n` bytes (or the fewest it can be, some 80): a 2 × 2 image whose colour depends on
 * `n`, so two sizes are two signatures, padded to `n` with a private ancillary chunk decoders skip.
 */
export function pngBytes(n = 64): Buffer {
  const image = new PNG({ width: 2, height: 2 });
  image.data.fill(n % 251);
  const plain = PNG.sync.write(image);
  const room = n - plain.length - 12;
  if (room < 0) return plain;
  const padding = Buffer.alloc(room, 0x42);
  const chunk = Buffer.alloc(12 + room);
  chunk.writeUInt32BE(room, 0);
  chunk.write('prVt', 4, 'latin1');
  padding.copy(chunk, 8);
  chunk.writeUInt32BE(crc32(chunk.subarray(4, 8 + room)), 8 + room);
  // Before IEND, the last 12 bytes.
  return Buffer.concat([plain.subarray(0, plain.length - 12), chunk, plain.subarray(plain.length - 12)]);
}
/** A real baseline JPEG, `width` × `height`, grey. */
export function jpegBytes(width = 4, height = 4): Buffer {
  return jpeg.encode({ width, height, data: Buffer.alloc(width * height * 4, 0x80) }, 90).data;
}
export const dataUrl = (type: string, bytes: Buffer) => `data:${type};base64,${bytes.toString('base64')}`;
export const PNG_SIGNATURE = dataUrl('image/png', pngBytes());
/** A one-pixel PNG that decodes: a signature the PDF library can draw. */
export const REAL_PNG =
  'data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==';

export const SIGNER = { firstName: 'Bo', lastName: 'Lee', email: 'bo@example.com', shouldIdentify: false };
export const signer = (n: number) => ({
  firstName: `Signer${n}`,
  lastName: 'Lee',
  email: `s${n}@example.com`,
  shouldIdentify: false,
});

/** A document of `n` bytes whose content depends on `seed` and position: a dropped or shifted chunk changes its hash. */
export function documentBytes(n: number, seed = 1): Buffer {
  const bytes = Buffer.alloc(n);
  for (let i = 0; i < n; i++) bytes[i] = (i * 13 + seed * 101 + (i >> 10)) & 0xff;
  return bytes;
}

export interface FormOptions {
  signers?: object[];
  documents?: { name: string; bytes: Buffer }[];
}

/** A valid form for `fetch`: the three text parts, one part per signer, then the documents. */
export function validFormData(options: FormOptions = {}): FormData {
  const form = new FormData();
  form.append('name', 'Lease 2026');
  form.append('signerName', 'Ann Owner');
  form.append('signerSignatureData', PNG_SIGNATURE);
  for (const item of options.signers ?? [SIGNER]) form.append('signers', JSON.stringify(item));
  for (const document of options.documents ?? [{ name: 'lease.pdf', bytes: documentBytes(1000) }]) {
    form.append('documents', new Blob([document.bytes]), document.name);
  }
  return form;
}

/** One part of a hand-built multipart body: either a text value or a file. */
export interface RawPart {
  name: string;
  value?: string;
  filename?: string;
  bytes?: Buffer;
  /** Extra header lines, or a complete replacement of the Content-Disposition line. */
  headers?: string[];
  disposition?: string;
}

export const BOUNDARY = 'test-boundary-7MA4YWxkTrZu0gW';

/** The bytes of a multipart/form-data body, built by hand so that every malformation can be had. */
export function multipart(parts: RawPart[], options: { boundary?: string; close?: boolean } = {}): Buffer {
  const boundary = options.boundary ?? BOUNDARY;
  const chunks: Buffer[] = [];
  for (const part of parts) {
    const disposition =
      part.disposition ??
      `Content-Disposition: form-data; name="${part.name}"${part.filename === undefined ? '' : `; filename="${part.filename}"`}`;
    const lines = [`--${boundary}`, disposition, ...(part.headers ?? [])];
    if (part.bytes !== undefined && !lines.some((line) => /^content-type/i.test(line)))
      lines.push('Content-Type: application/octet-stream');
    chunks.push(Buffer.from(lines.join('\r\n') + '\r\n\r\n'));
    chunks.push(part.bytes ?? Buffer.from(part.value ?? ''));
    chunks.push(Buffer.from('\r\n'));
  }
  if (options.close !== false) chunks.push(Buffer.from(`--${boundary}--\r\n`));
  return Buffer.concat(chunks);
}

/** The parts of a valid form, to be changed one at a time by the malformed-body tests. */
export function validParts(): RawPart[] {
  return [
    { name: 'name', value: 'Lease 2026' },
    { name: 'signerName', value: 'Ann Owner' },
    { name: 'signerSignatureData', value: PNG_SIGNATURE },
    { name: 'signers', value: JSON.stringify(SIGNER) },
    { name: 'documents', filename: 'lease.pdf', bytes: documentBytes(2000) },
  ];
}

export const MULTIPART = `multipart/form-data; boundary=${BOUNDARY}`;

/** A blob store the agreement tests run against, made fresh for each test, and its disposal. */
export interface BlobKind {
  name: string;
  create(clock?: () => Date): { blobs: BlobStore; dispose(): void };
}

/** Every blob store the upload path must hold against: memory, and files in a temp directory. */
export const BLOB_KINDS: BlobKind[] = [
  { name: 'memory blobs', create: (clock) => ({ blobs: memoryBlobs({ clock }), dispose() {} }) },
  {
    name: 'fs blobs',
    create(clock) {
      const dir = tempDir('agreements');
      return { blobs: fsBlobs({ dir, clock }), dispose: () => removeDir(dir) };
    },
  },
];

/**
 * Memory storage and a blob store of `kind`, with a view into what was written: every agreement
 * inserted, every blob key present. `dispose` after the portal on them is closed.
 */
export function trackedAdapters(options: { kind?: BlobKind; blobs?: BlobStore; storage?: Partial<Storage> } = {}) {
  const base = memoryStorage();
  const inserted: AgreementRecord[] = [];
  const storage: Storage = {
    ...base,
    async insertAgreement(agreement, events, idempotency) {
      await base.insertAgreement(agreement, events, idempotency);
      inserted.push(agreement);
    },
    ...options.storage,
  };
  const made = options.blobs === undefined ? (options.kind ?? BLOB_KINDS[0]!).create() : undefined;
  const blobs: BlobStore = options.blobs ?? made!.blobs;
  return {
    storage,
    blobs,
    inserted,
    blobKeys: () => blobKeysOf(blobs),
    dispose: () => made?.dispose(),
  };
}

/** Every key a blob store holds, whatever its age. */
export async function blobKeysOf(blobs: BlobStore): Promise<string[]> {
  const keys: string[] = [];
  for await (const info of blobs.listBefore('9999-12-31T23:59:59+00:00')) keys.push(info.key);
  return keys;
}

/** A blob store of `kind` that reports each `put` as it starts, and can hold its consumers until released. */
export function observedBlobs(kind: BlobKind = BLOB_KINDS[0]!) {
  const { blobs: inner, dispose } = kind.create();
  const started: string[] = [];
  const deleted: string[] = [];
  const waiters: (() => void)[] = [];
  const notify = () => {
    for (const wake of waiters.splice(0)) wake();
  };
  let gate: Promise<void> = Promise.resolve();
  let firstChunk = false;
  const blobs: BlobStore = {
    ...inner,
    async put(key, body) {
      started.push(key);
      notify();
      await gate;
      async function* observed() {
        for await (const chunk of body as AsyncIterable<Uint8Array>) {
          firstChunk = true;
          notify();
          yield chunk;
        }
      }
      return inner.put(key, observed());
    },
    async delete(key) {
      const removed = await inner.delete(key);
      deleted.push(key);
      notify();
      return removed;
    },
  };
  return {
    blobs,
    started,
    deleted,
    dispose,
    get firstChunkSeen() {
      return firstChunk;
    },
    /** Puts wait until `release` is called. */
    hold() {
      let release!: () => void;
      gate = new Promise((resolve) => (release = resolve));
      return release;
    },
    /** Resolves once `condition` holds; rechecked after every put, chunk and delete. */
    until(condition: () => boolean): Promise<void> {
      return new Promise((resolve) => {
        const check = () => (condition() ? resolve() : waiters.push(check));
        check();
      });
    },
  };
}

export interface RawResponse {
  status: number;
  head: string;
  body: string;
}

/**
 * A hand-driven HTTP/1.1 client on a plain socket: `send` writes request bytes whenever the test
 * says, `response` resolves the parsed answer once the server closes or the body is complete.
 */
export function rawClient(url: string) {
  const { hostname, port } = new URL(url);
  const socket = net.connect(Number(port), hostname);
  socket.on('error', () => {});
  let received = Buffer.alloc(0);
  let resolveResponse!: (response: RawResponse) => void;
  const response = new Promise<RawResponse>((resolve) => (resolveResponse = resolve));
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  const tryParse = (final: boolean) => {
    const end = received.indexOf('\r\n\r\n');
    if (end < 0) return final ? resolveResponse({ status: 0, head: '', body: '' }) : undefined;
    const head = received.subarray(0, end).toString('latin1');
    const length = Number(/\r\ncontent-length: *(\d+)/i.exec(head)?.[1] ?? NaN);
    const body = received.subarray(end + 4);
    if (final || body.length >= length) {
      resolveResponse({ status: Number(head.split(' ')[1]), head, body: body.subarray(0, length).toString() });
    }
  };
  socket.on('data', (chunk: Buffer) => {
    received = Buffer.concat([received, chunk]);
    tryParse(false);
  });
  socket.on('close', () => tryParse(true));
  return {
    socket,
    response,
    closed,
    /** Writes bytes, resolving once the socket took them (or at once when it is gone). */
    send(data: string | Buffer): Promise<void> {
      return new Promise((resolve) => {
        if (socket.destroyed) return resolve();
        socket.write(data, () => resolve());
      });
    },
  };
}

/** The request head of a `POST /v1/agreements` for `rawClient`. */
export function postHead(headers: Record<string, string | number>): string {
  const lines = ['POST /v1/agreements HTTP/1.1', 'Host: localhost', `Authorization: Bearer ${KEY_A}`];
  for (const [name, value] of Object.entries(headers)) lines.push(`${name}: ${value}`);
  return lines.join('\r\n') + '\r\n\r\n';
}

/** Reads a stream fully; for checking stored blob bytes. */
export async function readAll(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(Buffer.from(chunk));
  return Buffer.concat(chunks);
}

/** A small real PDF holding `text`, one page a string (@libpdf/core), for tests of completed copies. */
export async function simplePdf(text: string | string[]): Promise<Buffer> {
  const { PDF, StandardFonts } = await import('@libpdf/core');
  const pdf = PDF.create();
  for (const line of typeof text === 'string' ? [text] : text)
    pdf.addPage({ size: 'a4' }).drawText(line, { x: 60, y: 760, size: 14, font: StandardFonts.Helvetica });
  return Buffer.from(await pdf.save());
}
