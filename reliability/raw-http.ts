import net from 'node:net';

/** What came back for one raw request: `status` 0 when the connection closed without a status line. */
export interface Exchange {
  status: number;
  headers: Record<string, string>;
  body: string;
  /** No answer within the time allowed. */
  hung: boolean;
  ms: number;
}

export interface RawRequest {
  method?: string;
  path: string;
  /** Header lines as given: names, casing and repeats kept. `Host` and `Connection: close` are added unless present. */
  headers?: [string, string][];
  body?: Buffer | string;
  /** Leave out `Content-Length` (the body, if any, is sent as is: chunked framing, or garbage). */
  noLength?: boolean;
  /** A complete request head, sent instead of the one built from the fields above. */
  head?: string;
}

/**
 * Sends one request on its own socket, as bytes, and reads the answer until the server closes.
 * This reaches what `fetch` refuses to send: bad encodings, repeated headers, odd methods.
 */
export function exchange(base: string, request: RawRequest, timeoutMs = 5000): Promise<Exchange> {
  const { hostname, port } = new URL(base);
  const body = request.body === undefined ? Buffer.alloc(0) : Buffer.from(request.body);
  let head = request.head;
  if (head === undefined) {
    const lines = [`${request.method ?? 'GET'} ${request.path} HTTP/1.1`];
    const given = request.headers ?? [];
    const has = (name: string) => given.some(([n]) => n.toLowerCase() === name);
    if (!has('host')) lines.push(`Host: ${hostname}:${port}`);
    if (!has('connection')) lines.push('Connection: close');
    for (const [name, value] of given) lines.push(`${name}: ${value}`);
    if (!request.noLength && !has('content-length') && (body.length > 0 || request.method === 'POST'))
      lines.push(`Content-Length: ${body.length}`);
    head = lines.join('\r\n') + '\r\n\r\n';
  }
  const started = performance.now();
  return new Promise((resolve) => {
    const socket = net.connect(Number(port), hostname);
    let received = Buffer.alloc(0);
    let done = false;
    const finish = (hung: boolean) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      socket.destroy();
      resolve({ ...parse(received), hung, ms: performance.now() - started });
    };
    const timer = setTimeout(() => finish(true), timeoutMs);
    socket.on('data', (chunk: Buffer) => {
      received = Buffer.concat([received, chunk]);
      // A complete answer is enough even if the socket stays open (a keep-alive the server chose).
      const parsed = parse(received);
      const length = Number(parsed.headers['content-length'] ?? NaN);
      if (parsed.status !== 0 && Buffer.byteLength(parsed.body) >= length) finish(false);
    });
    // The server may answer and close while the body is still going out: the answer is what counts.
    socket.on('error', () => finish(false));
    socket.on('close', () => finish(false));
    socket.write(head);
    if (body.length > 0) socket.write(body, () => {});
  });
}

function parse(all: Buffer): Pick<Exchange, 'status' | 'headers' | 'body'> {
  let received = all;
  // An interim answer (100 Continue) comes before the real one: skip it.
  while (/^HTTP\/1\.[01] 1\d\d /.test(received.subarray(0, 13).toString('latin1'))) {
    const interim = received.indexOf('\r\n\r\n');
    if (interim < 0) return { status: 0, headers: {}, body: '' };
    received = received.subarray(interim + 4);
  }
  const end = received.indexOf('\r\n\r\n');
  if (end < 0) return { status: 0, headers: {}, body: '' };
  const [statusLine, ...lines] = received.subarray(0, end).toString('latin1').split('\r\n');
  const headers: Record<string, string> = {};
  for (const line of lines) {
    const colon = line.indexOf(':');
    if (colon > 0) headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(statusLine ?? '')?.[1] ?? 0);
  return { status, headers, body: received.subarray(end + 4).toString('utf8') };
}

/** Whether an answer is a 4xx whose body is JSON `{message: string}`. */
export function isJsonError(answer: Exchange): boolean {
  if (answer.status < 400 || answer.status > 499) return false;
  if (!/^application\/json/.test(answer.headers['content-type'] ?? '')) return false;
  try {
    const body = JSON.parse(answer.body) as { message?: unknown };
    return typeof body.message === 'string' && body.message.length > 0;
  } catch {
    return false;
  }
}

/**
 * A 4xx that `node:http`'s parser sends before any handler runs (431 headers too large, 400 a request
 * line it cannot read): no body, `Connection: close`. The host's server, not the library, answers it.
 */
export function isParserRefusal(answer: Exchange): boolean {
  return (
    (answer.status === 400 || answer.status === 431 || answer.status === 413 || answer.status === 505) &&
    answer.body === ''
  );
}

/** A classification for the tally: what any 4xx-expected request should count as. */
export function judge4xx(
  answer: Exchange,
  allowParser = false,
): { outcome: 'correct' | '5xx' | 'hung' | 'wrong'; detail: string } {
  const detail = `${answer.status} ${answer.body.slice(0, 200)}`;
  if (answer.hung) return { outcome: 'hung', detail: 'no answer' };
  if (answer.status >= 500) return { outcome: '5xx', detail };
  if (isJsonError(answer)) return { outcome: 'correct', detail };
  if (allowParser && isParserRefusal(answer)) return { outcome: 'correct', detail };
  return { outcome: 'wrong', detail };
}
