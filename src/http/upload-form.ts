import type { IncomingMessage } from 'node:http';
import type { Readable } from 'node:stream';
import type { BusboyFileStream } from '@fastify/busboy';
import { PortalError } from '../errors.js';
import { MAX_DOCUMENT_BYTES } from '../domain/inputs.js';
import { MultipartReading, partName } from './multipart.js';

/** The file of an upload: its part's filename and media type, and its bytes as they arrive. */
interface UploadedFile {
  name: string;
  mime: string;
  body: Readable;
}

/**
 * Where an upload goes, in two steps: `keep` stores the file's bytes as they arrive, before the
 * text fields are known (they may come after the file); `complete` makes the record from what was
 * kept and every field, once the whole form is read. `discard` removes what `keep` stored, when a
 * later part fails or `complete` refuses.
 */
export interface UploadSink<K, T> {
  keep(file: UploadedFile): Promise<K>;
  complete(kept: K, fields: Record<string, string>): Promise<T>;
  discard(kept: K): Promise<unknown>;
}

const FILE_PART = 'file';
/** A text field holds an id: anything longer is not one. */
const MAX_FIELD_BYTES = 1024;

/**
 * Reads a multipart upload of one file, in a part named `file`, and the text `fields` named, in any
 * order. The file streams into `keep` as it arrives, at most 5 MiB; once every part is read,
 * `complete` makes the record. Past the limit, on a bad part, a malformed body or the client going
 * away, reading stops, the file stream is destroyed (so `keep` settles and keeps nothing, or what
 * it kept is discarded) and the promise rejects (see `MultipartReading`). The dispatcher then
 * answers at once with `Connection: close` (the route's `streamsBody`).
 */
export function readUpload<K, T>(
  req: IncomingMessage,
  route: string,
  fields: readonly string[],
  sink: UploadSink<K, T>,
): Promise<T> {
  const partList = [FILE_PART, ...fields].join(', ');
  const values: Record<string, string> = {};
  let file: BusboyFileStream | undefined;
  let kept: Promise<K> | undefined;
  const reading = new MultipartReading<T>(
    req,
    route,
    { limits: { fieldSize: MAX_FIELD_BYTES, fileSize: MAX_DOCUMENT_BYTES } },
    (cause) => {
      file?.destroy(cause);
      // `keep` settles once its stream is destroyed, keeping nothing; what it had kept is discarded.
      // Then the refusal goes out.
      return kept?.then(sink.discard, () => {});
    },
  );
  const { parser, fail } = reading;

  parser.on('field', (name: string | undefined, value: string, _nameTruncated: boolean, valueTruncated: boolean) => {
    if (reading.failure !== undefined) return;
    if (name === undefined || !fields.includes(name))
      return fail(new PortalError('MULTIPART_UNKNOWN_PART', partName(name), partList));
    if (name in values) return fail(new PortalError('INPUT_INVALID', name, 'was given more than once.'));
    if (valueTruncated)
      return fail(new PortalError('INPUT_INVALID', name, `must be at most ${MAX_FIELD_BYTES} bytes.`));
    values[name] = value;
  });

  parser.on(
    'file',
    (
      name: string | undefined,
      stream: BusboyFileStream,
      filename: string | undefined,
      _encoding: string,
      mime: string,
    ) => {
      stream.on('error', () => fail(new PortalError('MULTIPART_MALFORMED')));
      if (reading.failure !== undefined) return void stream.resume();
      let problem: PortalError | null = null;
      if (name !== FILE_PART) problem = new PortalError('MULTIPART_UNKNOWN_PART', partName(name), partList);
      else if (file !== undefined) problem = new PortalError('INPUT_INVALID', FILE_PART, 'send one file per request.');
      else if (filename === undefined || filename === '')
        problem = new PortalError('INPUT_INVALID', FILE_PART, 'must be a file part with a filename.');
      if (problem !== null) {
        stream.resume();
        return fail(problem);
      }
      file = stream;
      // busboy truncates silently at `fileSize`; its 'limit' event is the sign, and comes before the end.
      stream.once('limit', () => fail(new PortalError('UPLOAD_TOO_LARGE', MAX_DOCUMENT_BYTES)));
      kept = sink.keep({ name: filename!, mime, body: stream });
      kept.catch(fail);
    },
  );

  parser.on('finish', () => {
    if (reading.failure !== undefined) return;
    if (kept === undefined) return fail(new PortalError('INPUT_REQUIRED', FILE_PART));
    // A refusal of `complete` (a directory that is not there) fails the reading, which discards the bytes.
    kept.then((bytes) => sink.complete(bytes, { ...values })).then((result) => reading.succeed(result), fail);
  });

  reading.start();
  return reading.result;
}
