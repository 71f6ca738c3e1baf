import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { Webhook } from 'standardwebhooks';

interface Received {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  body: string;
  /** The client socket's port: equal ports on two requests mean one kept-alive connection. */
  remotePort: number;
  /** What the Standard Webhooks library made of the call, when the receiver was given a secret. */
  verified: 'ok' | string | null;
}

/** How the receiver answers one request; `hang` never answers (the connection stays open until close). */
interface Answer {
  status?: number;
  headers?: Record<string, string>;
  body?: string | Buffer;
  hang?: boolean;
}

export interface Receiver {
  url: string;
  port: number;
  received: Received[];
  /** Answers from this list in order, then `otherwise` (default 200). */
  script(answers: Answer[], otherwise?: Answer): void;
  close(): Promise<void>;
}

/**
 * A real webhook receiver on 127.0.0.1, port 0. With `secret`, every call is verified with the
 * `standardwebhooks` package, an independent implementation of the scheme; a call that fails it is
 * answered 400, so a bad signature shows up as a failed delivery as well as in `received`.
 */
export async function startReceiver(options: { secret?: () => string | undefined } = {}): Promise<Receiver> {
  const received: Received[] = [];
  let queue: Answer[] = [];
  let otherwise: Answer = { status: 200 };
  const sockets = new Set<Socket>();
  const server = http.createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const body = Buffer.concat(chunks).toString('utf8');
    let verified: string | null = null;
    const secret = options.secret?.();
    if (secret !== undefined) {
      try {
        new Webhook(secret).verify(body, req.headers as Record<string, string>);
        verified = 'ok';
      } catch (error) {
        verified = error instanceof Error ? error.message : String(error);
      }
    }
    received.push({
      method: req.method!,
      url: req.url!,
      headers: req.headers,
      body,
      remotePort: req.socket.remotePort!,
      verified,
    });
    const answer = queue.shift() ?? otherwise;
    if (answer.hang) return;
    if (verified !== null && verified !== 'ok') {
      res.writeHead(400).end(verified);
      return;
    }
    res.writeHead(answer.status ?? 200, answer.headers);
    res.end(answer.body);
  });
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    received,
    script(answers, fallback = { status: 200 }) {
      queue = [...answers];
      otherwise = fallback;
    },
    close: () =>
      new Promise((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}
