import type { BrokerKind, BrokerRun, Consumed, Consumer } from './brokers.js';
import { OwnServer, freePort, hasCommand, hasPackage } from './brokers.js';

/** What the tests ask of a client. */
interface Client {
  destroy(): void;
  xGroupCreate(key: string, group: string, id: string, options: { MKSTREAM: true }): Promise<unknown>;
  xRead(stream: { key: string; id: string }, options: { BLOCK: number; COUNT: number }): Promise<unknown>;
}

/** An entry of a stream as the destination writes it: `body`, one field per header, `ordering-key`. */
function consumedOf(fields: Record<string, string>): Consumed {
  const { body, 'ordering-key': orderingKey, ...headers } = fields;
  return { body: body ?? '', headers, orderingKey };
}

/** Redis: a server of the tests' own (append-only file, fsync always), so a restart keeps every entry. */
export const redisBroker: BrokerKind = {
  name: 'redis',
  async absent() {
    if (!hasCommand('redis-server')) return 'redis-server is not installed';
    if (!(await hasPackage('@redis/client'))) return 'the package @redis/client is not installed';
    return null;
  },
  async destinations() {
    const { redisDestination } = await import('../../adapters/redis/index.js');
    return { redis: redisDestination() };
  },
  async start(): Promise<BrokerRun> {
    const { createClient } = await import('@redis/client');
    const server = new OwnServer(await freePort(), 'redis-server', (dir, port) => [
      '--port',
      String(port),
      '--bind',
      '127.0.0.1',
      '--save',
      '',
      '--appendonly',
      'yes',
      '--appendfsync',
      'always',
      '--dir',
      dir,
      '--requirepass',
      'p@ss:w/rd',
    ]);
    await server.start();
    const client = async (): Promise<Client> => {
      const made = createClient({
        RESP: 2,
        socket: { host: '127.0.0.1', port: server.port, reconnectStrategy: false },
        password: 'p@ss:w/rd',
      });
      made.on('error', () => {});
      await made.connect();
      return made;
    };
    return {
      host: '127.0.0.1',
      port: server.port,
      url: (target, credentials = { user: 'default', password: 'p@ss:w/rd' }) =>
        `redis://${encodeURIComponent(credentials.user)}:${encodeURIComponent(credentials.password)}@127.0.0.1:${server.port}/${encodeURIComponent(target)}`,
      async prepare(target) {
        const admin = await client();
        await admin.xGroupCreate(target, 'tests', '$', { MKSTREAM: true });
        admin.destroy();
      },
      async consume(target): Promise<Consumer> {
        const messages: Consumed[] = [];
        let last = '0-0';
        let stopped = false;
        let reader: Client | undefined;
        const loop = (async () => {
          while (!stopped) {
            try {
              reader ??= await client();
              const answer = await reader.xRead({ key: target, id: last }, { BLOCK: 100, COUNT: 1000 });
              for (const stream of (answer ?? []) as { messages: { id: string; message: Record<string, string> }[] }[])
                for (const { id, message } of stream.messages) {
                  messages.push(consumedOf(message));
                  last = id;
                }
            } catch {
              reader?.destroy();
              reader = undefined;
              await new Promise((resolve) => setTimeout(resolve, 50));
            }
          }
        })();
        return {
          messages,
          async stop() {
            stopped = true;
            await loop;
            reader?.destroy();
          },
        };
      },
      restart: () => server.restart(),
      stop: () => server.stop(),
    };
  },
};
