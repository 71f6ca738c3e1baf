import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createPortal, type Portal, type PortalOptions } from '../../src/index.js';

export interface Running {
  url: string;
  server: http.Server;
  close(): Promise<void>;
}

/** Serves `handler` on a real server bound to 127.0.0.1, port 0. */
export async function listen(handler: http.RequestListener): Promise<Running> {
  const server = http.createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    server,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

export const KEY_A = 'key-of-account-a';
export const KEY_B = 'key-of-account-b';

export interface TestPortal extends Running {
  portal: Portal;
  /** `fetch` against the API root with account A's key unless `headers` say otherwise. */
  api(path: string, init?: RequestInit): Promise<Response>;
}

/** A portal on memory adapters with two accounts (`acct_a`, `acct_b`), served on port 0. */
export async function startPortal(options: PortalOptions = {}): Promise<TestPortal> {
  const portal = await createPortal({ auth: { apiKeys: { [KEY_A]: 'acct_a', [KEY_B]: 'acct_b' } }, ...options });
  const running = await listen(portal.handler);
  return {
    ...running,
    portal,
    api(path, init = {}) {
      const headers = new Headers(init.headers);
      if (!headers.has('authorization')) headers.set('authorization', `Bearer ${KEY_A}`);
      return fetch(`${running.url}/v1${path}`, { ...init, headers });
    },
    async close() {
      await running.close();
      await portal.close();
    },
  };
}

/**
 * Runs `body` against a portal started as `startPortal` starts one, and closes it (server and
 * portal) whatever `body` does: the one try/finally every HTTP test needs.
 */
export function withPortal(body: (app: TestPortal) => Promise<void>): Promise<void>;
export function withPortal(options: PortalOptions, body: (app: TestPortal) => Promise<void>): Promise<void>;
export async function withPortal(
  first: PortalOptions | ((app: TestPortal) => Promise<void>),
  second?: (app: TestPortal) => Promise<void>,
): Promise<void> {
  const [options, body] = typeof first === 'function' ? [{}, first] : [first, second!];
  const app = await startPortal(options);
  try {
    await body(app);
  } finally {
    await app.close();
  }
}

/** A raw request, for what `fetch` will not send (odd methods, missing Host, broken encodings). */
export function rawRequest(
  url: string,
  options: http.RequestOptions & { body?: string | Buffer },
): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request(url, options, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () =>
        resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks).toString() }),
      );
    });
    req.on('error', reject);
    req.end(options.body);
  });
}

/** Asserts that `run` rejects with an error whose message matches `pattern`; resolves that error. */
export async function rejects(run: () => Promise<unknown>, pattern: RegExp): Promise<Error & { status?: number }> {
  try {
    await run();
  } catch (error) {
    if (!(error instanceof Error) || !pattern.test(error.message)) {
      throw new Error(`expected a rejection matching ${pattern}, got ${String(error)}`);
    }
    return error as Error & { status?: number };
  }
  throw new Error(`expected a rejection matching ${pattern}, but it resolved`);
}

/** The JSON body of a response, typed loosely for assertions. */
export async function json(res: Response): Promise<any> {
  return res.json();
}
