import type { BrokerKind, BrokerRun, Consumed, Consumer } from './brokers.js';
import { OwnServer, freePort, hasCommand, hasPackage } from './brokers.js';

const USER = 'default';
const PASSWORD = 'p@ss:w/rd';

/** NATS with JetStream: a server of the tests' own (file storage in its own directory), stopped and started again. */
export const natsBroker: BrokerKind = {
  name: 'nats',
  async absent() {
    const server = hasCommand('nats-server') ? 'nats-server' : hasCommand('/usr/sbin/nats-server') ? 'found' : null;
    if (server === null) return 'nats-server is not installed';
    if (!(await hasPackage('@nats-io/transport-node')) || !(await hasPackage('@nats-io/jetstream')))
      return 'the packages @nats-io/transport-node and @nats-io/jetstream are not installed';
    return null;
  },
  async destinations() {
    const { natsDestination } = await import('../../adapters/nats/index.js');
    return { nats: natsDestination() };
  },
  async start(): Promise<BrokerRun> {
    const nats = await import('@nats-io/transport-node');
    const { jetstream, jetstreamManager, AckPolicy } = await import('@nats-io/jetstream');
    const command = hasCommand('nats-server') ? 'nats-server' : '/usr/sbin/nats-server';
    const server = new OwnServer(await freePort(), command, (dir, port) => [
      '-a',
      '127.0.0.1',
      '-p',
      String(port),
      '-js',
      '-sd',
      dir,
      '--user',
      USER,
      '--pass',
      PASSWORD,
    ]);
    await server.start();
    const client = () =>
      nats.connect({ servers: `127.0.0.1:${server.port}`, user: USER, pass: PASSWORD, reconnect: false });
    return {
      host: '127.0.0.1',
      port: server.port,
      url: (target, credentials = { user: USER, password: PASSWORD }) =>
        `nats://${encodeURIComponent(credentials.user)}:${encodeURIComponent(credentials.password)}@127.0.0.1:${server.port}/${target}`,
      async prepare(target) {
        const connection = await client();
        const manager = await jetstreamManager(connection);
        await manager.streams.add({ name: target, subjects: [target, `${target}.>`] });
        await manager.consumers.add(target, { durable_name: 'tests', ack_policy: AckPolicy.Explicit });
        await connection.close();
      },
      async consume(target): Promise<Consumer> {
        const messages: Consumed[] = [];
        let stopped = false;
        let connection: Awaited<ReturnType<typeof client>> | undefined;
        const loop = (async () => {
          while (!stopped) {
            try {
              connection = await client();
              const consumer = await jetstream(connection).consumers.get(target, 'tests');
              const reading = await consumer.consume({ max_messages: 1000 });
              void connection.closed().then(() => reading.stop());
              for await (const message of reading) {
                const headers: Record<string, string> = {};
                for (const name of message.headers?.keys() ?? []) headers[name] = message.headers!.get(name);
                const key = message.subject === target ? undefined : message.subject.slice(target.length + 1);
                messages.push({
                  body: message.string(),
                  headers,
                  orderingKey: key === undefined ? undefined : decodeURIComponent(key),
                });
                message.ack();
              }
            } catch {
              // The server went away: read again from where the durable consumer stands.
            }
            await connection?.close().catch(() => {});
            if (!stopped) await new Promise((resolve) => setTimeout(resolve, 100));
          }
        })();
        return {
          messages,
          async stop() {
            stopped = true;
            await connection?.close().catch(() => {});
            await loop;
          },
        };
      },
      restart: () => server.restart(),
      stop: () => server.stop(),
    };
  },
};
