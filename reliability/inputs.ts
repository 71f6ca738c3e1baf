/**
 * Bad input: generated (fast-check, seeded) and hand-written requests against a real server. Every
 * answer must be a 4xx JSON `{message}` (or the documented success), and the server must answer an
 * ordinary read after each batch.
 */
import fc from 'fast-check';
import {
  BOUNDARY,
  MULTIPART,
  PNG_SIGNATURE,
  SIGNER,
  documentBytes,
  multipart,
  validParts,
  type RawPart,
} from '../test/helpers/agreements.js';
import { KEY_A } from '../test/helpers/server.js';
import { exchange, judge4xx, isJsonError, type Exchange, type RawRequest } from './raw-http.js';
import { check, count, row, type Row } from './tally.js';
import { healthy, type Target } from './target.js';

const AUTH: [string, string] = ['Authorization', `Bearer ${KEY_A}`];
const SECTION = 'inputs';

async function healthAfter(target: Target, into: Row): Promise<void> {
  check(into, await healthy(target.app.url), 'the server did not answer a health read after the batch');
}

/** Runs `cases` a few at a time (the machine is shared), each judged by `expect`. */
async function batch<T>(items: T[], run: (item: T) => Promise<void>, parallel = 4): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: parallel }, async () => {
      while (next < items.length) await run(items[next++]!);
    }),
  );
}

/** An upload answer is right when it is 201 with an agreement, or a 4xx JSON error. */
function judgeUpload(into: Row, answer: Exchange, what: string): void {
  if (answer.status === 201) {
    let ok = false;
    try {
      ok = /^agr_/.test((JSON.parse(answer.body) as { id: string }).id);
    } catch {}
    check(into, ok, `${what}: 201 without an agreement`);
    return;
  }
  const { outcome, detail } = judge4xx(answer, true);
  count(into, outcome, `${what}: ${detail}`);
}

const upload = (body: Buffer, contentType: string | null = MULTIPART, extra: [string, string][] = []): RawRequest => ({
  method: 'POST',
  path: '/v1/agreements',
  headers: [AUTH, ...(contentType === null ? [] : [['Content-Type', contentType] as [string, string]]), ...extra],
  body,
});

/** Multipart bodies generated from valid ones: parts dropped, renamed, refilled, reordered, bytes cut or flipped. */
export async function generatedMultipart(target: Target, seed: number, runs: number): Promise<void> {
  const into = row(SECTION, 'multipart, generated (fast-check)');
  into.notes.push(`seed ${seed}, ${runs} runs (replay: FC_SEED=${seed})`);
  const partName = fc.oneof(
    fc.constantFrom(
      'name',
      'signerName',
      'signerSignatureData',
      'signers',
      'documents',
      'documents[]',
      'documents[3]',
      'documents.items',
      'other',
    ),
    fc.string({ maxLength: 40 }),
  );
  const value = fc.oneof(
    fc.string({ maxLength: 300 }),
    fc.string({ unit: 'binary', maxLength: 100 }),
    fc.constantFrom(
      '{',
      '[]',
      '[{}]',
      'null',
      JSON.stringify(SIGNER),
      JSON.stringify([SIGNER, SIGNER]),
      PNG_SIGNATURE,
      'data:image/svg+xml;base64,PHN2Zz4=',
      '',
    ),
    fc.uint8Array({ maxLength: 200 }).map((bytes) => Buffer.from(bytes).toString('latin1')),
  );
  const randomPart: fc.Arbitrary<RawPart> = fc.record({
    name: partName,
    value,
    filename: fc.option(fc.string({ maxLength: 60 }), { nil: undefined }),
  });
  const mutation = fc.oneof(
    fc.constant({ kind: 'none' as const }),
    fc.record({ kind: fc.constant('truncate' as const), at: fc.double({ min: 0, max: 1, noNaN: true }) }),
    fc.record({
      kind: fc.constant('flip' as const),
      at: fc.array(fc.double({ min: 0, max: 1, noNaN: true }), { minLength: 1, maxLength: 8 }),
      byte: fc.integer({ min: 0, max: 255 }),
    }),
  );
  const contentType = fc.oneof(
    fc.constant(MULTIPART),
    fc.constant(MULTIPART),
    fc.constantFrom(
      'multipart/form-data',
      'multipart/form-data; boundary=',
      'multipart/form-data; boundary=other',
      'text/plain',
      'application/json',
      'multipart/mixed; boundary=' + BOUNDARY,
    ),
    fc.string({ maxLength: 80 }).filter((text) => !/[\r\n]/.test(text)),
  );
  const arbitrary = fc.record({
    keep: fc.array(fc.boolean(), { minLength: 5, maxLength: 5 }),
    extra: fc.array(randomPart, { maxLength: 6 }),
    shuffle: fc.boolean(),
    mutation,
    contentType,
    close: fc.boolean(),
  });
  const cases = fc.sample(arbitrary, { seed, numRuns: runs });
  await batch(cases, async (input) => {
    let parts: RawPart[] = validParts().map((part) =>
      part.bytes === undefined ? part : { ...part, bytes: documentBytes(300) },
    );
    parts = parts.filter((_, i) => input.keep[i]);
    parts.push(...input.extra);
    if (input.shuffle) parts.reverse();
    let body = multipart(parts, { close: input.close });
    if (input.mutation.kind === 'truncate') body = body.subarray(0, Math.floor(body.length * input.mutation.at));
    if (input.mutation.kind === 'flip') {
      body = Buffer.from(body);
      for (const at of input.mutation.at)
        if (body.length > 0) body[Math.min(body.length - 1, Math.floor(at * body.length))] = input.mutation.byte;
    }
    const answer = await exchange(target.app.url, upload(body, input.contentType), 10_000);
    judgeUpload(into, answer, `case ${JSON.stringify({ ...input, extra: input.extra.length })}`);
  });
  await healthAfter(target, into);
}

/** The multipart attacks the issue names, written out. */
export async function handWrittenMultipart(target: Target): Promise<void> {
  const into = row(SECTION, 'multipart, hand-written');
  const valid = multipart(validParts());
  const manyParts = multipart(Array.from({ length: 5000 }, (_, i) => ({ name: `field${i}`, value: 'x' })));
  const manySigners = multipart([
    ...validParts(),
    ...Array.from({ length: 3000 }, () => ({ name: 'signers', value: JSON.stringify(SIGNER) })),
  ]);
  const manyDocs = multipart([
    ...validParts(),
    ...Array.from({ length: 2000 }, (_, i) => ({ name: 'documents', filename: `d${i}.pdf`, bytes: Buffer.from('x') })),
  ]);
  const hugeHeader = multipart([
    { name: 'name', value: 'x', headers: [`X-Pad: ${'a'.repeat(200_000)}`] },
    ...validParts(),
  ]);
  const hugeDisposition = multipart([{ name: 'n'.repeat(100_000), value: 'x' }, ...validParts()]);
  const invalidUtf8Name = Buffer.concat([
    Buffer.from(`--${BOUNDARY}\r\nContent-Disposition: form-data; name="`),
    Buffer.from([0xff, 0xfe, 0xc3, 0x28, 0xed, 0xa0, 0x80]),
    Buffer.from(`"\r\n\r\nvalue\r\n`),
    multipart(validParts()),
  ]);
  const invalidUtf8Filename = multipart(
    validParts().map((p) =>
      p.name === 'documents' ? { ...p, disposition: undefined, filename: '\udc80\ud800.pdf' } : p,
    ),
  );
  const badFilenameBytes = Buffer.concat([
    ...validParts()
      .filter((p) => p.name !== 'documents')
      .map((p) => multipart([p], { close: false })),
    Buffer.from(`--${BOUNDARY}\r\nContent-Disposition: form-data; name="documents"; filename="`),
    Buffer.from([0xc0, 0xaf, 0x2e, 0x2e, 0xc0, 0xaf, 0xff]),
    Buffer.from(`"\r\nContent-Type: application/pdf\r\n\r\nbytes\r\n--${BOUNDARY}--\r\n`),
  ]);
  const textAsDocument = multipart(
    validParts().map((p) => (p.name === 'documents' ? { name: 'documents', value: 'not a file' } : p)),
  );
  const fileAsName = multipart(
    validParts().map((p) =>
      p.name === 'name' ? { name: 'name', filename: 'name.txt', bytes: Buffer.from('Lease') } : p,
    ),
  );
  const fileAsSigners = multipart(
    validParts().map((p) =>
      p.name === 'signers' ? { name: 'signers', filename: 's.json', bytes: Buffer.from(JSON.stringify(SIGNER)) } : p,
    ),
  );
  const withSigners = (value: string) =>
    multipart(validParts().map((p) => (p.name === 'signers' ? { name: 'signers', value } : p)));
  const withSignature = (value: string) =>
    multipart(validParts().map((p) => (p.name === 'signerSignatureData' ? { name: 'signerSignatureData', value } : p)));
  const cases: [string, RawRequest][] = [
    ['no Content-Type', upload(valid, null)],
    ['no boundary', upload(valid, 'multipart/form-data')],
    ['empty boundary', upload(valid, 'multipart/form-data; boundary=')],
    ['boundary of 200 characters', upload(valid, `multipart/form-data; boundary=${'b'.repeat(200)}`)],
    ['wrong boundary', upload(valid, 'multipart/form-data; boundary=not-the-one')],
    ['boundary with quotes unclosed', upload(valid, 'multipart/form-data; boundary="abc')],
    ['text/plain', upload(valid, 'text/plain')],
    ['application/json', upload(Buffer.from('{"name":"x"}'), 'application/json')],
    ['multipart/mixed', upload(valid, `multipart/mixed; boundary=${BOUNDARY}`)],
    ['empty body', upload(Buffer.alloc(0))],
    ['only the closing boundary', upload(Buffer.from(`--${BOUNDARY}--\r\n`))],
    ['unclosed (no closing boundary)', upload(multipart(validParts(), { close: false }))],
    ['truncated in a part header', upload(valid.subarray(0, 60))],
    ['truncated in the document', upload(valid.subarray(0, valid.length - 400))],
    [
      'truncated: Content-Length longer than sent, then end',
      {
        ...upload(valid.subarray(0, 500)),
        headers: [AUTH, ['Content-Type', MULTIPART], ['Content-Length', String(valid.length)]],
      },
    ],
    ['5000 unknown parts', upload(manyParts)],
    ['3000 signer parts', upload(manySigners)],
    ['2000 document parts', upload(manyDocs)],
    ['a part header of 200 kB', upload(hugeHeader)],
    ['a part name of 100 kB', upload(hugeDisposition)],
    ['invalid UTF-8 in a part name', upload(invalidUtf8Name)],
    ['lone surrogates in a filename', upload(invalidUtf8Filename)],
    ['invalid UTF-8 and ../ in a filename', upload(badFilenameBytes)],
    ['text part where documents go', upload(textAsDocument)],
    ['file part for name', upload(fileAsName)],
    ['file part for signers', upload(fileAsSigners)],
    ['signers: not JSON', upload(withSigners('{"firstName": "Bo",'))],
    ['signers: JSON string', upload(withSigners('"Bo"'))],
    ['signers: JSON number', upload(withSigners('12'))],
    ['signers: null', upload(withSigners('null'))],
    ['signers: nested 10000 deep', upload(withSigners('['.repeat(10_000) + ']'.repeat(10_000)))],
    ['signers: 6 in one array', upload(withSigners(JSON.stringify(Array.from({ length: 6 }, () => SIGNER))))],
    [
      'signers: __proto__ key',
      upload(
        withSigners(
          '{"__proto__":{"admin":true},"firstName":"a","lastName":"b","email":"a@b.co","shouldIdentify":true}',
        ),
      ),
    ],
    ['signature: SVG', upload(withSignature('data:image/svg+xml;base64,PHN2ZyBvbmxvYWQ9YWxlcnQoMSk+'))],
    ['signature: bad base64', upload(withSignature('data:image/png;base64,@@@@'))],
    ['signature: PNG type, JPEG bytes', upload(withSignature('data:image/png;base64,/9j/4AAQSkZJRg=='))],
    ['signature: 2 MB', upload(withSignature('data:image/png;base64,' + 'A'.repeat(2_000_000)))],
    [
      'documents over 5 MiB',
      upload(
        multipart(
          validParts().map((p) => (p.name === 'documents' ? { ...p, bytes: Buffer.alloc(5 * 1024 * 1024 + 10) } : p)),
        ),
      ),
    ],
    [
      'Content-Length of 10 GB announced',
      {
        ...upload(valid.subarray(0, 100)),
        headers: [AUTH, ['Content-Type', MULTIPART], ['Content-Length', '10000000000']],
      },
    ],
    [
      'chunked with a broken chunk size',
      {
        ...upload(Buffer.from('zz\r\nabc\r\n0\r\n\r\n')),
        noLength: true,
        headers: [AUTH, ['Content-Type', MULTIPART], ['Transfer-Encoding', 'chunked']],
      },
    ],
    [
      'Content-Length and Transfer-Encoding both',
      {
        ...upload(Buffer.from('5\r\nhello\r\n0\r\n\r\n')),
        noLength: true,
        headers: [AUTH, ['Content-Type', MULTIPART], ['Content-Length', '5'], ['Transfer-Encoding', 'chunked']],
      },
    ],
  ];
  // The truncated-then-ended case cannot be answered (the body never completes): the server must not hang on it forever
  // only as long as the client holds the socket; it is counted by the server staying healthy, not by its answer.
  for (const [what, request] of cases) {
    const answer = await exchange(target.app.url, request, 10_000);
    if (what.startsWith('truncated: Content-Length longer')) {
      // The client stops sending and waits: no answer is possible before the body ends. Count as correct when no 5xx came.
      check(into, answer.status < 500, `${what}: ${answer.status}`, '5xx');
      continue;
    }
    if (what === 'Content-Length of 10 GB announced') {
      check(
        into,
        answer.status === 413 && isJsonError(answer),
        `${what}: ${answer.status} ${answer.body.slice(0, 200)}`,
        answer.status >= 500 ? '5xx' : answer.hung ? 'hung' : 'wrong',
      );
      continue;
    }
    judgeUpload(into, answer, what);
  }
  await healthAfter(target, into);
}

/** Path ids and query strings: encoding garbage, overlong, wrong prefixes, generated. */
export async function generatedIds(target: Target, seed: number, runs: number): Promise<void> {
  const into = row(SECTION, 'ids and query strings, generated');
  into.notes.push(`seed ${seed}, ${runs} runs`);
  const { a } = target;
  const prefix = fc.constantFrom(
    '',
    'wbh_',
    'agr_',
    'tck_',
    'tcm_',
    'tca_',
    'fsd_',
    'fsf_',
    'whd_',
    'evt_',
    'WBH_',
    'wbh-',
    'wbh_' + a.webhook.id.slice(4, 10),
  );
  const garbage = fc.oneof(
    fc.string({ maxLength: 60 }).map(encodeURIComponent),
    fc
      .string({ unit: 'binary', maxLength: 40 })
      .map((text) => encodeURIComponent(text.replace(/[\ud800-\udfff]/g, 'x'))),
    fc
      .uint8Array({ maxLength: 30 })
      .map((bytes) => [...bytes].map((b) => '%' + b.toString(16).padStart(2, '0')).join('')),
    fc.constantFrom(
      '%',
      '%z',
      '%zz',
      '%%',
      '%c0%af',
      '%ed%a0%80',
      '%00',
      '..',
      '%2e%2e',
      '%2F',
      '%u0041',
      '~',
      '*',
      ';',
      '$',
    ),
    fc.integer({ min: 300, max: 5000 }).map((n) => 'A'.repeat(n)),
    fc.stringMatching(/^[0-9A-Za-z]{1,40}$/),
  );
  // Never empty: `/webhooks/` is the list route (a trailing slash is ignored), not an id.
  const id = fc
    .tuple(prefix, garbage)
    .map(([p, g]) => p + g)
    .filter((text) => text !== '');
  const route = fc.constantFrom(
    (x: string) => ({ method: 'GET', path: `/v1/webhooks/${x}` }),
    (x: string) => ({ method: 'DELETE', path: `/v1/webhooks/${x}` }),
    (x: string) => ({ method: 'GET', path: `/v1/webhooks/${x}/deliveries` }),
    (x: string) => ({ method: 'POST', path: `/v1/webhooks/${a.webhook.id}/deliveries/${x}/redeliver` }),
    (x: string) => ({ method: 'POST', path: `/v1/webhooks/${x}/deliveries/${a.deliveryId}/redeliver` }),
    (x: string) => ({ method: 'GET', path: `/v1/agreements/${x}` }),
    (x: string) => ({ method: 'GET', path: `/v1/files?directoryId=${x}` }),
    (x: string) => ({ method: 'GET', path: `/v1/files?directoryId=${a.directoryId}&directoryId=${x}` }),
    (x: string) => ({
      method: 'GET',
      path: `/v1/tickets/${x}/message/${a.attachment.messageId}/attachment/${a.attachment.id}/download`,
    }),
    (x: string) => ({
      method: 'GET',
      path: `/v1/tickets/${a.attachment.ticketId}/message/${x}/attachment/${a.attachment.id}/download`,
    }),
    (x: string) => ({
      method: 'GET',
      path: `/v1/tickets/${a.attachment.ticketId}/message/${a.attachment.messageId}/attachment/${x}/download`,
    }),
    (x: string) => ({
      method: 'GET',
      path: `/v1/downloads/${x}?account=acct_a&ticket=${x}&message=${x}&expires=${x}&signature=${x}`,
    }),
    (x: string) => ({ method: 'GET', path: `/v1/downloads/${a.attachment.id}?${x}` }),
  );
  const cases = fc.sample(fc.tuple(route, id), { seed, numRuns: runs });
  await batch(
    cases,
    async ([make, x]) => {
      const { method, path } = make(x);
      const answer = await exchange(target.app.url, { method, path, headers: [AUTH] });
      // A generated id may collide with nothing real, so the only success that can be right is the file listing's.
      if (answer.status === 200 && path.startsWith('/v1/files?') && !/directoryId=[^&]/.test(path)) {
        check(into, true, '');
        return;
      }
      const { outcome, detail } = judge4xx(answer, true);
      count(into, outcome, `${method} ${path.slice(0, 120)}: ${detail}`);
    },
    6,
  );
  await healthAfter(target, into);
}

/** Oversized, repeated and oddly cased headers. */
export async function headers(target: Target): Promise<void> {
  const into = row(SECTION, 'headers');
  const url = target.app.url;
  type Expect = (answer: Exchange) => boolean;
  const ok200: Expect = (x) => x.status === 200;
  const is401: Expect = (x) =>
    x.status === 401 && isJsonError(x) && /Bearer realm="customer-portal"/.test(x.headers['www-authenticate'] ?? '');
  const parserOr4xx: Expect = (x) => x.status >= 400 && x.status < 500;
  const cases: [string, [string, string][], Expect][] = [
    ['Authorization of 60 kB', [['Authorization', `Bearer ${'k'.repeat(60_000)}`]], (x) => is401(x) || parserOr4xx(x)],
    ['one header of 100 kB', [AUTH, ['X-Pad', 'p'.repeat(100_000)]], parserOr4xx],
    [
      '2000 headers',
      [AUTH, ...Array.from({ length: 2000 }, (_, i) => [`X-H${i}`, 'v'] as [string, string])],
      (x) => ok200(x) || parserOr4xx(x),
    ],
    ['Authorization twice, valid first', [AUTH, ['Authorization', 'Bearer wrong-key']], (x) => ok200(x) || is401(x)],
    ['Authorization twice, wrong first', [['Authorization', 'Bearer wrong-key'], AUTH], is401],
    [
      'Authorization twice, other account first',
      [['Authorization', 'Bearer key-of-account-b'], AUTH],
      (x) => ok200(x) && !x.body.includes('private-dir-a'),
    ],
    ['AUTHORIZATION in capitals', [['AUTHORIZATION', `Bearer ${KEY_A}`]], ok200],
    ['scheme in lower case', [['Authorization', `bearer ${KEY_A}`]], ok200],
    ['scheme in odd case', [['Authorization', `BeArEr ${KEY_A}`]], ok200],
    ['Basic scheme', [['Authorization', `Basic ${Buffer.from(`${KEY_A}:`).toString('base64')}`]], is401],
    // RFC 9110 §11.4: `auth-scheme [ 1*SP token68 ]`, so more than one space is still valid.
    ['two spaces after Bearer', [['Authorization', `Bearer  ${KEY_A}`]], ok200],
    ['key with a trailing tab', [['Authorization', `Bearer ${KEY_A}\t`]], (x) => ok200(x) || is401(x)],
    ['Bearer and nothing', [['Authorization', 'Bearer']], is401],
    ['Bearer and a space', [['Authorization', 'Bearer ']], is401],
    ['key as a prefix of the real one', [['Authorization', `Bearer ${KEY_A.slice(0, -1)}`]], is401],
    ['key with a character appended', [['Authorization', `Bearer ${KEY_A}x`]], is401],
    ['key in latin1 bytes', [['Authorization', `Bearer ${KEY_A}\u00ff\u00e9`]], is401],
    [
      'X-Request-Id of 10 kB',
      [AUTH, ['X-Request-Id', 'r'.repeat(10_000)]],
      (x) => ok200(x) && (x.headers['x-request-id'] ?? '').length < 300,
    ],
    ['X-Request-Id with a CR', [AUTH, ['X-Request-Id', 'a\rb']], parserOr4xx],
    ['X-Request-Id repeated', [AUTH, ['X-Request-Id', 'one'], ['X-Request-Id', 'two']], ok200],
    ['Host missing', [AUTH, ['Host', '']], (x) => ok200(x) || parserOr4xx(x)],
    ['Host of garbage', [AUTH, ['Host', '<script>:99999']], ok200],
    ['X-Forwarded-Host of garbage', [AUTH, ['X-Forwarded-Host', 'evil.example.com']], ok200],
    ['Content-Length negative on GET', [AUTH, ['Content-Length', '-1']], parserOr4xx],
    ['Content-Length twice, different', [AUTH, ['Content-Length', '0'], ['Content-Length', '5']], parserOr4xx],
    ['Transfer-Encoding unknown', [AUTH, ['Transfer-Encoding', 'gzip']], parserOr4xx],
    ['Expect: 100-continue on GET', [AUTH, ['Expect', '100-continue']], (x) => ok200(x) || parserOr4xx(x)],
    ['Expect: something else', [AUTH, ['Expect', 'teapot']], parserOr4xx],
  ];
  for (const [what, given, expect] of cases) {
    const answer = await exchange(url, { path: '/v1/files', headers: given });
    const detail = `${what}: ${answer.status} ${answer.body.slice(0, 150)}`;
    if (answer.hung) count(into, 'hung', detail);
    else if (answer.status >= 500) count(into, '5xx', detail);
    else check(into, expect(answer), detail);
  }
  await healthAfter(target, into);
}

/** Every route with every method, including ones `fetch` will not send. */
export async function methods(target: Target): Promise<void> {
  const into = row(SECTION, 'methods');
  const { a } = target;
  const paths = [
    `/v1/webhooks`,
    `/v1/webhooks/${a.webhook.id}`,
    `/v1/webhooks/${a.webhook.id}/deliveries`,
    `/v1/webhooks/${a.webhook.id}/deliveries/${a.deliveryId}/redeliver`,
    `/v1/agreements`,
    `/v1/agreements/${a.agreementId}`,
    `/v1/files`,
    `/v1/tickets/${a.attachment.ticketId}/message/${a.attachment.messageId}/attachment/${a.attachment.id}/download`,
    `/v1/downloads/${a.attachment.id}`,
    `/v1`,
    `/`,
  ];
  const verbs = [
    'PUT',
    'PATCH',
    'OPTIONS',
    'TRACE',
    'PROPFIND',
    'MKCOL',
    'LOCK',
    'PURGE',
    'SEARCH',
    'FOO',
    'get',
    'CONNECT',
  ];
  for (const path of paths) {
    for (const method of verbs) {
      const answer = await exchange(target.app.url, { method, path, headers: [AUTH] });
      const detail = `${method} ${path}: ${answer.status} ${answer.body.slice(0, 150)}`;
      if (answer.hung) count(into, 'hung', detail);
      else if (answer.status >= 500) count(into, '5xx', detail);
      // node:http closes a CONNECT it has no 'connect' listener for: the host's server decides, not the handler.
      else if (method === 'CONNECT')
        check(into, answer.status === 0 || (answer.status >= 400 && answer.status < 500), detail);
      else if (answer.status === 405) check(into, isJsonError(answer) && (answer.headers.allow ?? '') !== '', detail);
      else {
        const { outcome } = judge4xx(answer, true);
        count(into, outcome === 'correct' ? 'correct' : 'wrong', detail);
      }
    }
  }
  await healthAfter(target, into);
}

/** GET and HEAD with bodies: the body is ignored or refused, and the connection stays in step. */
export async function bodiesOnGet(target: Target): Promise<void> {
  const into = row(SECTION, 'bodies on GET/HEAD/DELETE');
  const { a } = target;
  const body = Buffer.from(JSON.stringify({ directoryId: 'fsd_x', junk: 'y'.repeat(5000) }));
  const chunked = Buffer.from(`${(5000).toString(16)}\r\n${'z'.repeat(5000)}\r\n0\r\n\r\n`);
  const cases: [string, RawRequest, (x: Exchange) => boolean][] = [
    [
      'GET /files with a JSON body',
      { path: '/v1/files', headers: [AUTH, ['Content-Type', 'application/json']], body },
      (x) => x.status === 200,
    ],
    [
      'GET /files with a chunked body',
      { path: '/v1/files', headers: [AUTH, ['Transfer-Encoding', 'chunked']], body: chunked, noLength: true },
      (x) => x.status === 200,
    ],
    [
      'GET /webhooks/{id} with 1 MB',
      { path: `/v1/webhooks/${a.webhook.id}`, headers: [AUTH], body: Buffer.alloc(1024 * 1024, 0x61) },
      (x) => x.status === 200,
    ],
    ['HEAD /files with a body', { method: 'HEAD', path: '/v1/files', headers: [AUTH], body }, (x) => x.status === 200],
    [
      'GET download route with a body',
      { path: `/v1/downloads/${a.attachment.id}?account=acct_a`, headers: [], body },
      (x) => x.status === 403 && isJsonError(x),
    ],
    [
      'DELETE of a missing webhook with a body',
      { method: 'DELETE', path: '/v1/webhooks/wbh_missing', headers: [AUTH], body },
      (x) => x.status === 404 && isJsonError(x),
    ],
    [
      'POST /webhooks: JSON that is not JSON',
      { method: 'POST', path: '/v1/webhooks', headers: [AUTH, ['Content-Type', 'application/json']], body: '{"type":' },
      (x) => x.status === 400 && isJsonError(x),
    ],
    [
      'POST /webhooks: deep JSON',
      {
        method: 'POST',
        path: '/v1/webhooks',
        headers: [AUTH, ['Content-Type', 'application/json']],
        body: '['.repeat(100_000),
      },
      (x) => x.status >= 400 && x.status < 500 && isJsonError(x),
    ],
    [
      'POST /webhooks: 5 MB JSON',
      {
        method: 'POST',
        path: '/v1/webhooks',
        headers: [AUTH, ['Content-Type', 'application/json']],
        body: JSON.stringify({ type: 'customer-created', url: 'https://x.example/' + 'a'.repeat(5_000_000) }),
      },
      (x) => x.status >= 400 && x.status < 500 && isJsonError(x),
    ],
    [
      'POST /webhooks: form encoded',
      {
        method: 'POST',
        path: '/v1/webhooks',
        headers: [AUTH, ['Content-Type', 'application/x-www-form-urlencoded']],
        body: 'type=customer-created&url=https://x',
      },
      (x) => x.status >= 400 && x.status < 500 && isJsonError(x),
    ],
    [
      'POST /webhooks: javascript: URL',
      {
        method: 'POST',
        path: '/v1/webhooks',
        headers: [AUTH, ['Content-Type', 'application/json']],
        body: JSON.stringify({ type: 'customer-created', url: 'javascript:alert(1)' }),
      },
      (x) => x.status === 400 && isJsonError(x),
    ],
    [
      'POST /webhooks: type outside the list',
      {
        method: 'POST',
        path: '/v1/webhooks',
        headers: [AUTH, ['Content-Type', 'application/json']],
        body: JSON.stringify({ type: 'x', url: 'https://x.example/' }),
      },
      (x) => x.status === 400 && isJsonError(x),
    ],
    [
      'POST /webhooks: __proto__',
      {
        method: 'POST',
        path: '/v1/webhooks',
        headers: [AUTH, ['Content-Type', 'application/json']],
        body: '{"__proto__":{"type":"customer-created"},"url":"https://x.example/"}',
      },
      (x) => x.status === 400 && isJsonError(x),
    ],
  ];
  for (const [what, request, expect] of cases) {
    const answer = await exchange(target.app.url, request, 10_000);
    const detail = `${what}: ${answer.status} ${answer.body.slice(0, 150)}`;
    if (answer.hung) count(into, 'hung', detail);
    else if (answer.status >= 500) count(into, '5xx', detail);
    else check(into, expect(answer), detail);
  }
  await healthAfter(target, into);
}
