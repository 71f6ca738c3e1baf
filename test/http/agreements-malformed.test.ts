import { suite, type Test } from 'uvu';
import * as assert from 'uvu/assert';
import { KEY_A, rawRequest, startPortal, type TestPortal } from '../helpers/server.js';
import {
  BLOB_KINDS,
  BOUNDARY,
  MULTIPART,
  PNG_SIGNATURE,
  SIGNER,
  dataUrl,
  documentBytes,
  jpegBytes,
  multipart,
  pngBytes,
  signer,
  trackedAdapters,
  validParts,
  type BlobKind,
  type RawPart,
} from '../helpers/agreements.js';
import { HOSTILE_IMAGES } from '../helpers/hostile-images.js';

type Tracked = ReturnType<typeof trackedAdapters>;

function malformedSuite(kind: BlobKind): void {
  const test = suite<{ app: TestPortal; tracked: Tracked }>(`POST /agreements: hand-built bodies (${kind.name})`);

  test.before.each(async (context) => {
    context.tracked = trackedAdapters({ kind });
    context.app = await startPortal({ storage: context.tracked.storage, blobs: context.tracked.blobs });
  });
  test.after.each(async ({ app, tracked }) => {
    // Whatever the failure, it leaves no record and no blob.
    try {
      assert.equal(await tracked.blobKeys(), [], 'no blob is left');
      assert.is(tracked.inserted.length, 0, 'no agreement is stored');
    } finally {
      await app.close();
      tracked.dispose();
    }
  });

  registerTests(test);
  test.run();
}

async function post(
  app: TestPortal,
  body: Buffer | string,
  headers: Record<string, string> = { 'content-type': MULTIPART },
) {
  const res = await rawRequest(`${app.url}/v1/agreements`, {
    method: 'POST',
    headers: { authorization: `Bearer ${KEY_A}`, ...headers },
    body,
  });
  const message = JSON.parse(res.body).message as string;
  return { status: res.status, message, headers: res.headers };
}

/** The valid parts with the one named `name` replaced (or removed, with `null`). */
function withPart(name: string, replacement: RawPart | RawPart[] | null): RawPart[] {
  const parts: RawPart[] = [];
  for (const part of validParts()) {
    if (part.name !== name) parts.push(part);
    else if (Array.isArray(replacement)) parts.push(...replacement);
    else if (replacement !== null) parts.push(replacement);
  }
  return parts;
}

function registerTests(test: Test<{ app: TestPortal; tracked: Tracked }>): void {
  const expectations: [title: string, parts: RawPart[], message: string | RegExp][] = [
    [
      'an unknown text part',
      [...validParts(), { name: 'comment', value: 'hi' }],
      'Unknown part "comment"; the parts are name, signerName, signerSignatureData, signers, documents, signingOrder, expiresAt, locale and fields.',
    ],
    [
      'an unknown file part',
      [...validParts(), { name: 'attachment', filename: 'a.pdf', bytes: documentBytes(10) }],
      /^Unknown part "attachment"/,
    ],
    ['a part with an empty name', [{ name: '', value: 'x' }, ...validParts()], /^Unknown part ""/],
    [
      'a text part without a name',
      [{ name: '', disposition: 'Content-Disposition: form-data', value: 'x' }, ...validParts()],
      'Unknown part without a name; the parts are name, signerName, signerSignatureData, signers, documents, signingOrder, expiresAt, locale and fields.',
    ],
    [
      'a file part without a name',
      [
        ...validParts(),
        { name: '', disposition: 'Content-Disposition: form-data; filename="a.pdf"', bytes: documentBytes(10) },
      ],
      /^Unknown part without a name;/,
    ],
    ['name given twice', [...validParts(), { name: 'name', value: 'Again' }], 'name: was given more than once.'],
    ['no name', withPart('name', null), 'name: is required.'],
    ['an empty name', withPart('name', { name: 'name', value: '' }), 'name: must not be empty'],
    ['a blank name', withPart('name', { name: 'name', value: '   ' }), 'name: must not be empty'],
    [
      'a name of 256 characters',
      withPart('name', { name: 'name', value: 'n'.repeat(256) }),
      'name: must be at most 255 characters',
    ],
    ['no signerName', withPart('signerName', null), 'signerName: is required.'],
    [
      'a signerName of 256 characters',
      withPart('signerName', { name: 'signerName', value: 'é'.repeat(256) }),
      'signerName: must be at most 255 characters',
    ],
    ['no signerSignatureData', withPart('signerSignatureData', null), 'signerSignatureData: is required.'],
    ['no signers', withPart('signers', null), 'signers: at least one signer is required.'],
    [
      'an empty signers array',
      withPart('signers', { name: 'signers', value: '[]' }),
      'signers: at least one signer is required.',
    ],
    [
      'signers that are not JSON',
      withPart('signers', { name: 'signers', value: "{firstName: 'Bo'}" }),
      'signers: part 1 is not valid JSON.',
    ],
    [
      'a signer that is not an object',
      withPart('signers', { name: 'signers', value: '["Bo"]' }),
      'signers[0]: must be a JSON object.',
    ],
    [
      'a signer with an unknown key',
      withPart('signers', { name: 'signers', value: JSON.stringify({ ...SIGNER, phone: '1' }) }),
      'signers[0] has an unknown field "phone".',
    ],
    [
      'a signer without lastName',
      withPart('signers', { name: 'signers', value: JSON.stringify({ ...SIGNER, lastName: undefined }) }),
      'signers[0].lastName: is required.',
    ],
    [
      'a signer with a bad email',
      withPart('signers', [
        { name: 'signers', value: JSON.stringify(signer(1)) },
        { name: 'signers', value: JSON.stringify({ ...SIGNER, email: 'bo@' }) },
      ]),
      'signers[1].email: must be a valid e-mail address',
    ],
    [
      'a signer with shouldIdentify as a string',
      withPart('signers', { name: 'signers', value: JSON.stringify({ ...SIGNER, shouldIdentify: 'yes' }) }),
      'signers[0].shouldIdentify: must be true or false',
    ],
    [
      'an array part after an object part',
      withPart('signers', [
        { name: 'signers', value: JSON.stringify(SIGNER) },
        { name: 'signers', value: JSON.stringify([signer(2)]) },
      ]),
      /^signers: send one part per signer or one part holding an array/,
    ],
    [
      'six signers in one array',
      withPart('signers', { name: 'signers', value: JSON.stringify([1, 2, 3, 4, 5, 6].map(signer)) }),
      'signers: at most 5 signers are allowed.',
    ],
    [
      'a signers part over 64 KiB',
      withPart('signers', { name: 'signers', value: JSON.stringify({ ...SIGNER, firstName: 'x'.repeat(70_000) }) }),
      'signers: a part must be at most 64 KiB.',
    ],
    ['no documents', withPart('documents', null), 'documents: at least one document is required.'],
    [
      'a documents part without a filename',
      withPart('documents', { name: 'documents', value: 'just text' }),
      'documents[0]: must be a file part with a filename.',
    ],
    [
      'documents[x] as a part name',
      withPart('documents', { name: 'documents[x]', filename: 'a.pdf', bytes: documentBytes(10) }),
      /^Unknown part "documents\[x\]"/,
    ],
    [
      'six documents',
      [
        ...validParts(),
        ...[1, 2, 3, 4, 5].map((i) => ({ name: 'documents', filename: `d${i}`, bytes: documentBytes(50_000, i) })),
      ],
      'documents: at most 5 documents are allowed.',
    ],
  ];

  for (const [title, parts, message] of expectations) {
    test(`400 for ${title}`, async ({ app }) => {
      const res = await post(app, multipart(parts));
      assert.is(res.status, 400);
      if (typeof message === 'string') assert.is(res.message, message);
      else assert.match(res.message, message);
    });
  }

  const signatures: [title: string, value: string, message: string | RegExp][] = [
    [
      'an SVG image',
      dataUrl('image/svg+xml', Buffer.from('<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>')),
      'SVG images are refused; send a PNG or JPEG image',
    ],
    [
      'a GIF image',
      dataUrl('image/gif', Buffer.from('GIF89a0000')),
      'must be a data-URL of a PNG or JPEG image (data:image/png;base64,…)',
    ],
    [
      'a URL that is not a data-URL',
      'https://example.com/sig.png',
      'must be a data-URL of a PNG or JPEG image (data:image/png;base64,…)',
    ],
    [
      'a data-URL without base64',
      'data:image/png,' + encodeURIComponent(pngBytes().toString('latin1')),
      'must be a data-URL of a PNG or JPEG image (data:image/png;base64,…)',
    ],
    ['no image data', 'data:image/png;base64,', 'holds no image data'],
    [
      'base64 with a stray character',
      PNG_SIGNATURE.slice(0, -4) + '*AA=',
      'is not valid base64 (standard alphabet, padded, no whitespace)',
    ],
    [
      'base64 with a line break',
      PNG_SIGNATURE.slice(0, 40) + '\n' + PNG_SIGNATURE.slice(40),
      'is not valid base64 (standard alphabet, padded, no whitespace)',
    ],
    [
      'base64 without padding',
      PNG_SIGNATURE.replace(/=+$/, ''),
      'is not valid base64 (standard alphabet, padded, no whitespace)',
    ],
    [
      'URL-safe base64',
      'data:image/png;base64,' + Buffer.concat([pngBytes(8), Buffer.from([0xfb, 0xff, 0xfe])]).toString('base64url'),
      'is not valid base64 (standard alphabet, padded, no whitespace)',
    ],
    ['PNG bytes labelled as JPEG', dataUrl('image/jpeg', pngBytes()), 'the data is not a JPEG image'],
    [
      'a WebP image',
      dataUrl(
        'image/webp',
        Buffer.concat([Buffer.from('RIFF'), Buffer.alloc(4), Buffer.from('WEBPVP8 '), Buffer.alloc(20)]),
      ),
      'WebP images are refused; send a PNG or JPEG image',
    ],
    [
      'text labelled as PNG',
      dataUrl('image/png', Buffer.from('definitely not an image')),
      'the data is not a PNG image',
    ],
    ['an image of 1 MiB + 1 byte', dataUrl('image/png', pngBytes(1024 * 1024 + 1)), 'the image must be at most 1 MiB'],
    [
      'a value far over 1 MiB',
      'data:image/png;base64,' + 'A'.repeat(2 * 1024 * 1024),
      'the image must be at most 1 MiB',
    ],
    ...HOSTILE_IMAGES,
  ];

  for (const [title, value, message] of signatures) {
    test(`400 for a signerSignatureData holding ${title}`, async ({ app }) => {
      const res = await post(app, multipart(withPart('signerSignatureData', { name: 'signerSignatureData', value })));
      assert.is(res.status, 400);
      if (typeof message === 'string') assert.is(res.message, `signerSignatureData: ${message}`);
      else assert.match(res.message.replace(/^signerSignatureData: /, ''), message);
    });
  }

  test('a signature of exactly 1 MiB and a JPEG signature are accepted, and kept redrawn as PNG', async ({
    app,
    tracked,
  }) => {
    for (const value of [dataUrl('image/png', pngBytes(1024 * 1024)), dataUrl('image/jpeg', jpegBytes(30, 10))]) {
      const res = await post(app, multipart(withPart('signerSignatureData', { name: 'signerSignatureData', value })));
      assert.is(res.status, 201, res.message);
      const stored = tracked.inserted.at(-1)!.signerSignature;
      assert.match(stored, /^data:image\/png;base64,/);
      assert.ok(stored.length < 1000, `redrawn without the padding: ${stored.length} characters`);
    }
    // after.each checks that nothing is left; these uploads are meant to stay.
    tracked.inserted.length = 0;
    for (const key of await tracked.blobKeys()) await tracked.blobs.delete(key);
  });

  const contentTypes: [title: string, headers: Record<string, string>, status: number, message: RegExp][] = [
    ['no Content-Type', {}, 415, /^POST \/agreements takes multipart\/form-data, not a body without Content-Type\.$/],
    ['application/json', { 'content-type': 'application/json' }, 415, /not "application\/json"/],
    [
      'application/x-www-form-urlencoded',
      { 'content-type': 'application/x-www-form-urlencoded' },
      415,
      /not "application\/x-www-form-urlencoded"/,
    ],
    ['multipart/mixed', { 'content-type': `multipart/mixed; boundary=${BOUNDARY}` }, 415, /not "multipart\/mixed"/],
    [
      'a gzip Content-Encoding',
      { 'content-type': MULTIPART, 'content-encoding': 'gzip' },
      415,
      /^Content-Encoding "gzip" is not supported/,
    ],
    ['multipart/form-data without a boundary', { 'content-type': 'multipart/form-data' }, 400, /boundary/],
    ['an empty boundary', { 'content-type': 'multipart/form-data; boundary=""' }, 400, /boundary/],
    [
      'a boundary of 71 characters',
      { 'content-type': `multipart/form-data; boundary=${'b'.repeat(71)}` },
      400,
      /boundary/,
    ],
    [
      "a boundary only inside another parameter's quoted value",
      { 'content-type': `multipart/form-data; note="; boundary=${BOUNDARY}"` },
      400,
      /^The Content-Type multipart\/form-data has no boundary parameter that can be read\.$/,
    ],
  ];

  for (const [title, headers, status, message] of contentTypes) {
    test(`${status} for ${title}`, async ({ app }) => {
      const res = await post(app, multipart(validParts()), headers);
      assert.is(res.status, status);
      assert.match(res.message, message);
    });
  }

  test('a Content-Type with parameters in another case and a quoted boundary is accepted', async ({ app, tracked }) => {
    const res = await post(app, multipart(validParts()), {
      'content-type': `Multipart/Form-Data; charset=utf-8; boundary="${BOUNDARY}"`,
    });
    assert.is(res.status, 201, res.message);
    tracked.inserted.length = 0;
    for (const key of await tracked.blobKeys()) await tracked.blobs.delete(key);
  });

  const broken: [title: string, body: Buffer][] = [
    ['an empty body', Buffer.alloc(0)],
    ['a body whose boundary never appears', multipart(validParts(), { boundary: 'another-boundary' })],
    ['a body without its closing boundary', multipart(validParts(), { close: false })],
    [
      'a body cut in the middle of a document',
      multipart(validParts()).subarray(0, multipart(validParts()).length - 1000),
    ],
    ['a body cut in the middle of a part header', Buffer.from(`--${BOUNDARY}\r\nContent-Disposition: form-da`)],
  ];

  for (const [title, body] of broken) {
    test(`400 for ${title}`, async ({ app }) => {
      const res = await post(app, body);
      assert.is(res.status, 400);
      assert.is(res.message, 'The multipart body is malformed or ended before its closing boundary.');
    });
  }

  test('the first problem is the one reported; a document stored before it is removed', async ({ app }) => {
    const parts: RawPart[] = [
      { name: 'documents', filename: 'first.pdf', bytes: documentBytes(400_000) },
      { name: 'name', value: '' },
      { name: 'comment', value: 'unknown too' },
    ];
    const res = await post(app, multipart(parts));
    assert.is(res.status, 400);
    assert.is(res.message, 'name: must not be empty');
  });
}

for (const kind of BLOB_KINDS) malformedSuite(kind);
