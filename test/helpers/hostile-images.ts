import { crc32, deflateSync } from 'node:zlib';
import jpeg from 'jpeg-js';
import { PNG } from 'pngjs';

/** A PNG chunk: length, type, data, CRC. */
function chunk(type: string, data: Buffer): Buffer {
  const out = Buffer.alloc(12 + data.length);
  out.writeUInt32BE(data.length, 0);
  out.write(type, 4, 'latin1');
  data.copy(out, 8);
  out.writeUInt32BE(crc32(out.subarray(4, 8 + data.length)), 8 + data.length);
  return out;
}

/** A PNG file from its header's fields and the bytes of its one IDAT chunk, CRCs right, content as given. */
function craftedPng(
  {
    width,
    height,
    colorType = 6,
    interlace = 0,
  }: { width: number; height: number; colorType?: number; interlace?: number },
  idat: Buffer,
): Buffer {
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(width, 0);
  ihdr.writeUInt32BE(height, 4);
  ihdr[8] = 8;
  ihdr[9] = colorType;
  ihdr[12] = interlace;
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk('IHDR', ihdr),
    chunk('IDAT', idat),
    chunk('IEND', Buffer.alloc(0)),
  ]);
}

/** A valid PNG, `width` × `height`, all white: a few tens of kilobytes that decode to `width × height × 4` bytes. */
function blankPng(width: number, height: number): Buffer {
  const image = new PNG({ width, height });
  image.data.fill(0xff);
  return PNG.sync.write(image, { deflateLevel: 9 });
}

const url = (type: string, bytes: Buffer) => `data:${type};base64,${bytes.toString('base64')}`;

/** A JPEG whose frame header declares `width` × `height` pixels, its data that of a 8 × 8 image. */
function jpegClaiming(width: number, height: number): Buffer {
  const small = Buffer.from(jpeg.encode({ width: 8, height: 8, data: Buffer.alloc(256, 0x80) }, 50).data);
  const sof = small.indexOf(Buffer.from([0xff, 0xc0]));
  small.writeUInt16BE(height, sof + 5);
  small.writeUInt16BE(width, sof + 7);
  return small;
}

/**
 * Signature images built to hurt a decoder, with the message (after `<field>: `) each must get.
 * Each is under 1 MiB and starts with its type's magic bytes: every one passed the old check.
 */
export const HOSTILE_IMAGES: [title: string, value: string, message: RegExp][] = [
  // 73 bytes: an alpha channel whose data is not zlib (a PDF library's PNG decoder threw from a zlib callback).
  [
    'a 73-byte PNG with alpha and non-zlib data',
    url('image/png', craftedPng({ width: 4, height: 4 }, Buffer.from('not zlib data'))),
    /^is not a readable PNG image/,
  ],
  [
    'an interlaced PNG with non-zlib data',
    url('image/png', craftedPng({ width: 4, height: 4, interlace: 1 }, Buffer.from('not zlib data'))),
    /^is not a readable PNG image/,
  ],
  [
    'a valid 3000 × 3000 PNG (a decompression bomb)',
    url('image/png', blankPng(3000, 3000)),
    /^is 3000 × 3000 pixels; at most 4000 on a side and 2,000,000 in all/,
  ],
  [
    'a 10 × 10 PNG whose data inflates to 50 MB',
    url('image/png', craftedPng({ width: 10, height: 10 }, deflateSync(Buffer.alloc(50_000_000), { level: 9 }))),
    /^is not a readable PNG image \(its data expands past what its size needs\)$/,
  ],
  [
    'an interlaced 10 × 10 PNG whose data inflates to 50 MB',
    url(
      'image/png',
      craftedPng({ width: 10, height: 10, interlace: 1 }, deflateSync(Buffer.alloc(50_000_000), { level: 9 })),
    ),
    /expands past/,
  ],
  [
    'a PNG claiming 65535 × 65535 pixels',
    url('image/png', craftedPng({ width: 65_535, height: 65_535 }, deflateSync(Buffer.alloc(100)))),
    /^is 65535 × 65535 pixels/,
  ],
  [
    'a PNG of 0 × 0 pixels',
    url('image/png', craftedPng({ width: 0, height: 0 }, deflateSync(Buffer.alloc(0)))),
    /^is an image without pixels$/,
  ],
  [
    'a JPEG claiming 60000 × 60000 pixels',
    url('image/jpeg', jpegClaiming(60_000, 60_000)),
    /^is not a readable JPEG image \(maxResolutionInMP limit exceeded/,
  ],
  [
    'a JPEG cut after its header',
    url('image/jpeg', Buffer.from([0xff, 0xd8, 0xff, 0xe0, 0, 16, 0x4a, 0x46, 0x49, 0x46, 0])),
    /^is not a readable JPEG image/,
  ],
];
