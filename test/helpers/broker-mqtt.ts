import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import type { BrokerKind, BrokerRun, Consumed, Consumer } from './brokers.js';
import { OwnServer, freePort, hasCommand, hasPackage } from './brokers.js';

const USER = 'default';
const PASSWORD = 'p@ss:w/rd';
const MOSQUITTO = hasCommand('mosquitto') ? 'mosquitto' : '/usr/sbin/mosquitto';

/**
 * Mosquitto: a broker of the tests' own with persistence, so a consumer's persistent session (QoS 1)
 * keeps what was published while it or the broker was away.
 */
export const mqttBroker: BrokerKind = {
  name: 'mqtt',
  inapplicable: { missingTarget: 'MQTT topics need no declaring: there is no missing one to publish to' },
  async absent() {
    if (!hasCommand(MOSQUITTO)) return 'mosquitto is not installed';
    if (!hasCommand('mosquitto_passwd')) return 'mosquitto_passwd is not installed';
    if (!(await hasPackage('mqtt'))) return 'the package mqtt is not installed';
    return null;
  },
  async destinations() {
    const { mqttDestination } = await import('../../adapters/mqtt/index.js');
    return { mqtt: mqttDestination() };
  },
  async start(): Promise<BrokerRun> {
    const mqtt = await import('mqtt');
    const server = new OwnServer(await freePort(), MOSQUITTO, (dir) => ['-c', path.join(dir, 'mosquitto.conf')]);
    execFileSync('mosquitto_passwd', ['-b', '-c', path.join(server.dir, 'passwd'), USER, PASSWORD]);
    writeFileSync(
      path.join(server.dir, 'mosquitto.conf'),
      [
        `listener ${server.port} 127.0.0.1`,
        'persistence true',
        `persistence_location ${server.dir}/`,
        'allow_anonymous false',
        `password_file ${path.join(server.dir, 'passwd')}`,
        'max_queued_messages 0',
        // Run as root (a CI machine), mosquitto would become the user mosquitto, which cannot write this directory.
        ...(process.getuid?.() === 0 ? ['user root'] : []),
        '',
      ].join('\n'),
    );
    await server.start();
    return {
      host: '127.0.0.1',
      port: server.port,
      url: (target, credentials = { user: USER, password: PASSWORD }) =>
        `mqtt://${encodeURIComponent(credentials.user)}:${encodeURIComponent(credentials.password)}@127.0.0.1:${server.port}/${target}`,
      async prepare() {},
      async consume(target): Promise<Consumer> {
        const messages: Consumed[] = [];
        const client = await mqtt.connectAsync({
          host: '127.0.0.1',
          port: server.port,
          username: USER,
          password: PASSWORD,
          protocolVersion: 5,
          clientId: `tests-${target}-${process.pid}`,
          clean: false,
          properties: { sessionExpiryInterval: 3600 },
          reconnectPeriod: 100,
        });
        client.on('error', () => {});
        client.on('message', (topic, payload, packet) => {
          const headers: Record<string, string> = {};
          for (const [name, value] of Object.entries(packet.properties?.userProperties ?? {}))
            headers[name] = Array.isArray(value) ? value[0]! : value;
          const key = topic === target ? undefined : decodeURIComponent(topic.slice(target.length + 1));
          messages.push({ body: payload.toString('utf8'), headers, orderingKey: key });
        });
        // `topic/#` matches the topic itself too: one subscription, one copy of each message.
        await client.subscribeAsync(`${target}/#`, { qos: 1 });
        return {
          messages,
          async stop() {
            await client.endAsync(true).catch(() => {});
          },
        };
      },
      restart: () => server.restart(),
      stop: () => server.stop(),
    };
  },
};
