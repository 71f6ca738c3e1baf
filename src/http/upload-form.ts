import type { IncomingMessage } from 'node:http';
import type { Readable } from 'node:stream';
import type { BusboyFileStream } from '@fastify/busboy';
import { PortalError } from '../errors.js';
import { MAX_DOCUMENT_BYTES } from '../domain/inputs.js';
import { MultipartReading, partName } from './multipart.js';

/** The file of an upload: its part's filename and media type, and its bytes as they arrive. */
export interface UploadedFile {
  name: string;
  mime: string;
  body: Readable;
}

/** Where an upload goes: `store` keeps the file with the text fields sent before it and resolves what the route answers with; `undo` removes that again. */
export interface UploadSink<T> {
  store(file: UploadedFile, fields: Record<string, string>): Promise<T>;
  undo(stored: T): Promise<unknown>;
}

const FILE_PART = 'file';
/** A text field holds an id: anything longer is not one. */
const MAX_FIELD_BYTES = 1024;

/**
 * Reads a multipart upload of one file, in a part named `file`, and the text `fields` named (sent
 * before the file, as `curl -F` sends them in order). The file streams into `store` as it arrives,
 * at most 5 MiB; past that, or on a bad part, a malformed body or the client going away, reading
 * stops, the file stream is destroyed (so `store` settles and keeps nothing, or is undone when it
 * had finished before a later part failed) and the promise
 * rejects (see `MultipartReading`). The dispatcher then answers at once with `Connection: close`
 * (the route's `streamsBody`).
 */
export function readUpload<T>(req: IncomingMessage, route: string, fields: readonly string[], sink: UploadSink<T>): Promise<T> {
  const partList = [FILE_PART, ...fields].join(', ');
  const values: Record<string, string> = {};
  let file: BusboyFileStream | undefined;
  let stored: Promise<T> | undefined;
  const reading = new MultipartReading<T>(
    req,
    route,
    { limits: { fieldSize: MAX_FIELD_BYTES, fileSize: MAX_DOCUMENT_BYTES } },
    (cause) => {
      file?.destroy(cause);
      // `store` settles once its stream is destroyed, keeping nothing; one that had already finished
      // (a part after the file was the bad one) is undone. Then the refusal goes out.
      return stored?.then(sink.undo, () => {});
    },
  );
  const { parser, fail } = reading;

  parser.on('field', (name: string | undefined, value: string, _nameTruncated: boolean, valueTruncated: boolean) => {
    if (reading.failure !== undefined) return;
    if (name === undefined || !fields.includes(name)) return fail(new PortalError('MULTIPART_UNKNOWN_PART', partName(name), partList));
    if (file !== undefined) return fail(new PortalError('INPUT_INVALID', name, 'must come before the file part.'));
    if (name in values) return fail(new PortalError('INPUT_INVALID', name, 'was given more than once.'));
    if (valueTruncated) return fail(new PortalError('INPUT_INVALID', name, `must be at most ${MAX_FIELD_BYTES} bytes.`));
    values[name] = value;
  });

  parser.on('file', (name: string | undefined, stream: BusboyFileStream, filename: string | undefined, _encoding: string, mime: string) => {
    stream.on('error', () => fail(new PortalError('MULTIPART_MALFORMED')));
    if (reading.failure !== undefined) return void stream.resume();
    let problem: PortalError | null = null;
    if (name !== FILE_PART) problem = new PortalError('MULTIPART_UNKNOWN_PART', partName(name), partList);
    else if (file !== undefined) problem = new PortalError('INPUT_INVALID', FILE_PART, 'send one file per request.');
    else if (filename === undefined || filename === '') problem = new PortalError('INPUT_INVALID', FILE_PART, 'must be a file part with a filename.');
    if (problem !== null) {
      stream.resume();
      return fail(problem);
    }
    file = stream;
    // busboy truncates silently at `fileSize`; its 'limit' event is the sign, and comes before the end.
    stream.once('limit', () => fail(new PortalError('UPLOAD_TOO_LARGE', MAX_DOCUMENT_BYTES)));
    stored = sink.store({ name: filename!, mime, body: stream }, { ...values });
    stored.catch(fail);
  });

  parser.on('finish', () => {
    if (reading.failure !== undefined) return;
    if (stored === undefined) return fail(new PortalError('INPUT_REQUIRED', FILE_PART));
    stored.then((result) => reading.succeed(result), fail);
  });

  reading.start();
  return reading.result;
}
