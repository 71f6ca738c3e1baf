import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

/**
 * A webhook receiver for the fault and load parts: it can be closed and opened again on the same
 * port, fail a share of calls, or hold calls without answering. It keeps what it acknowledged.
 */
export interface Sink {
  port: number;
  url: string;
  /** Event ids (`webhook-id`) answered 2xx, and the `data.id` of their bodies. */
  delivered: Set<string>;
  deliveredData: Set<string>;
  /** Every call, answered or not. */
  calls: number;
  /** Signatures seen, for the scan of the logs. */
  signatures: Set<string>;
  /** What the next calls get: `fail(n)` answers 500 to call n (1-based); `hang` holds every call. */
  mode: { fail?: (n: number) => boolean; hang?: boolean };
  /** Resolves on the next call that arrives. */
  nextCall(): Promise<void>;
  stop(): Promise<void>;
  start(): Promise<void>;
}

export async function startSink(): Promise<Sink> {
  const sockets = new Set<Socket>();
  const waiters: (() => void)[] = [];
  let server: http.Server | undefined;
  const sink: Sink = {
    port: 0,
    url: '',
    delivered: new Set(),
    deliveredData: new Set(),
    calls: 0,
    signatures: new Set(),
    mode: {},
    nextCall: () => new Promise((resolve) => waiters.push(resolve)),
    async stop() {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
      server = undefined;
    },
    async start() {
      server = http.createServer(async (req, res) => {
        const chunks: Buffer[] = [];
        for await (const chunk of req) chunks.push(chunk as Buffer);
        const n = ++sink.calls;
        for (const wake of waiters.splice(0)) wake();
        const signature = String(req.headers['webhook-signature'] ?? '');
        if (signature) sink.signatures.add(signature.replace(/^v1,/, ''));
        if (sink.mode.hang) return;
        if (sink.mode.fail?.(n)) return void res.writeHead(500).end('failing on purpose');
        try {
          const payload = JSON.parse(Buffer.concat(chunks).toString()) as { id: string; data?: { id?: string } };
          sink.delivered.add(String(req.headers['webhook-id'] ?? payload.id));
          if (payload.data?.id) sink.deliveredData.add(payload.data.id);
        } catch {}
        res.writeHead(204).end();
      });
      server.on('connection', (socket) => {
        sockets.add(socket);
        socket.on('close', () => sockets.delete(socket));
      });
      await new Promise<void>((resolve, reject) => {
        server!.once('error', reject);
        server!.listen(sink.port, '127.0.0.1', () => resolve());
      });
      sink.port = (server.address() as AddressInfo).port;
      sink.url = `http://127.0.0.1:${sink.port}/hook`;
    },
  };
  await sink.start();
  return sink;
}
