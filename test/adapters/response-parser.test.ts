import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { MAX_HEAD_BYTES, ResponseParser, type Progress } from '../../adapters/http-transport/response-parser.js';

/** Feeds `text` in pieces of `size` bytes; the last progress and the parser. */
function feed(text: string | Buffer, size = Infinity): { progress: Progress; parser: ResponseParser } {
  const bytes = Buffer.isBuffer(text) ? text : Buffer.from(text, 'latin1');
  const parser = new ResponseParser();
  let progress: Progress = { state: 'more' };
  for (let at = 0; at < bytes.length && progress.state === 'more'; at += Math.min(size, bytes.length)) {
    progress = parser.push(bytes.subarray(at, Math.min(bytes.length, at + size)));
  }
  return { progress, parser };
}

/** Every way to cut `text` in two, and byte by byte: each must read the same. */
function everySplit(text: string): { progress: Progress; parser: ResponseParser }[] {
  const bytes = Buffer.from(text, 'latin1');
  const results = [feed(bytes, 1)];
  for (let cut = 1; cut < bytes.length; cut++) {
    const parser = new ResponseParser();
    let progress = parser.push(bytes.subarray(0, cut));
    if (progress.state === 'more') progress = parser.push(bytes.subarray(cut));
    results.push({ progress, parser });
  }
  return results;
}

test('a Content-Length answer: status, lower-case headers, body counted, reusable, however the bytes are cut', () => {
  const answer = 'HTTP/1.1 202 Accepted\r\nRetry-After: 7\r\nX-Thing: yes\r\nContent-Length: 5\r\n\r\nhello';
  for (const { progress, parser } of everySplit(answer)) {
    assert.equal(progress, { state: 'done', reusable: true });
    assert.equal([parser.statusCode, parser.headers['retry-after'], parser.headers['x-thing'], parser.bodyBytes], [202, '7', 'yes', 5]);
  }
});

test('a chunked answer with extensions and trailers ends at its last chunk, however the bytes are cut', () => {
  const answer = 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\nA\r\n0123456789\r\n0\r\nX-Trailer: t\r\n\r\n';
  for (const { progress, parser } of everySplit(answer)) {
    assert.equal(progress, { state: 'done', reusable: true });
    assert.is(parser.bodyBytes, 15);
  }
  const bare = feed('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n', 1);
  assert.equal(bare.progress, { state: 'done', reusable: true });
});

test('interim answers are dropped: the final status counts', () => {
  const { progress, parser } = feed('HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n');
  assert.equal([progress, parser.statusCode, parser.headers.link], [{ state: 'done', reusable: true }, 204, undefined]);
});

test('whether the connection carries another request: Connection, the HTTP version, framing', () => {
  const reusable = (text: string) => {
    const { progress } = feed(text);
    return progress.state === 'done' ? progress.reusable : progress.state;
  };
  assert.is(reusable('HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n'), true);
  assert.is(reusable('HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n'), false);
  assert.is(reusable('HTTP/1.1 200 OK\r\nConnection: Upgrade, Close\r\nContent-Length: 0\r\n\r\n'), false);
  assert.is(reusable('HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n'), false);
  assert.is(reusable('HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n'), true);
  assert.is(reusable('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n0\r\n\r\n'), false);
  assert.is(reusable('HTTP/1.1 204 No Content\r\n\r\n'), true);
  // Bytes nobody asked for after the answer: not trusted again.
  assert.is(reusable('HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 200 OK\r\n'), false);
  assert.is(reusable('HTTP/1.1 204 No Content\r\n\r\nx'), false);
});

test('an answer without a length runs to the close, and is then complete', () => {
  const { progress, parser } = feed('HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nsome body');
  assert.equal(progress, { state: 'more' });
  assert.is(parser.bodyBytes, 9);
  assert.equal(parser.end(), { state: 'done', reusable: false });
  const encoded = feed('HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\nxyz');
  assert.equal([encoded.progress, encoded.parser.end()], [{ state: 'more' }, { state: 'done', reusable: false }]);
});

test('repeated headers are joined, Set-Cookie kept as a list', () => {
  const { parser } = feed('HTTP/1.1 200 OK\r\nVia: a\r\nvia: b\r\nSet-Cookie: x=1\r\nSet-Cookie: y=2\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc');
  assert.equal([parser.headers.via, parser.headers['set-cookie'], parser.bodyBytes], ['a, b', ['x=1', 'y=2'], 3]);
});

test('a close before the answer is complete is an error that says where it stopped', () => {
  const before = new ResponseParser();
  assert.is(before.started, false);
  assert.equal(before.end(), { state: 'error', message: 'the connection closed before a response' });
  const { parser } = feed('HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc');
  assert.is(parser.started, true);
  assert.equal(parser.end(), { state: 'error', message: 'the connection closed in the middle of the response body' });
  const halfHead = feed('HTTP/1.1 2');
  assert.is(halfHead.parser.started, true);
});

test('malformed answers are errors that name what was wrong', () => {
  const message = (text: string) => {
    const { progress } = feed(text);
    return progress.state === 'error' ? progress.message : progress.state;
  };
  assert.match(message('SSH-2.0-OpenSSH\r\n\r\n'), /status line/);
  assert.match(message('HTTP/2 200\r\n\r\n'), /status line/);
  assert.match(message('HTTP/1.1 200 OK\r\nno colon here\r\n\r\n'), /header line is malformed/);
  assert.match(message('HTTP/1.1 200 OK\r\n folded: value\r\n\r\n'), /header line is malformed/);
  assert.match(message('HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n'), /two different Content-Length/);
  assert.match(message('HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n'), /Content-Length is not a number/);
  assert.match(message('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n'), /not a hexadecimal number/);
  assert.match(message('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcXY'), /does not end in CRLF/);
  assert.match(message('HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n'), /switched protocols/);
  assert.match(message(`HTTP/1.1 200 OK\r\nX-Big: ${'a'.repeat(MAX_HEAD_BYTES)}\r\n\r\n`), /over 16 KiB/);
  assert.match(message(`HTTP/1.1 200 OK\r\nX-Big: ${'a'.repeat(MAX_HEAD_BYTES)}`), /over 16 KiB/);
});

test.run();
