import { randomBytes } from 'node:crypto';
import type { MqttClient } from 'mqtt';
import type { WebhookDestination } from '../../src/ports.js';
import {
  type BrokerConnection,
  type UrlProblem,
  pathNameOf,
  peer,
  pooledDestination,
  subjectToken,
  withDeadline,
} from '../shared/broker.js';

const load = peer('the package mqtt is', () => import('mqtt'));

export interface MqttDestinationOptions {
  /** A connection no call used for this long is closed (default 60000). */
  idleMs?: number;
}

/** The largest packet the broker may send this client: it only ever answers with small acknowledgements. */
const MAX_PACKET = 65_536;
const MAX_TOPIC = 1024;

/** The topic a `mqtt://host:port/topic` URL publishes to, or what is wrong with it. */
function topicOf(url: URL): string | UrlProblem {
  const topic = pathNameOf(url, 'topic', MAX_TOPIC, 'mqtt://host:1883/orders/events');
  if (typeof topic !== 'string') return topic;
  if (/[+#\0]/.test(topic)) return { problem: 'must name a topic without the wildcards + and #' };
  if (url.search !== '' || url.hash !== '') return { problem: 'must not carry a query or a fragment' };
  return topic;
}

class MqttConnection implements BrokerConnection {
  constructor(readonly client: MqttClient) {
    client.on('error', () => {});
  }
  get usable(): boolean {
    return this.client.connected && !this.client.disconnecting;
  }
  async close(): Promise<void> {
    await this.client.endAsync(true).catch(() => {});
  }
}

/**
 * A destination that publishes each call to an MQTT 5 broker at QoS 1, for webhook URLs
 * `mqtt://user:pass@host:1883/topic` and `mqtts://` (TLS). The message is the HTTP body with the
 * call's headers as MQTT 5 user properties; an ordering key is a last topic level (`topic/key`,
 * percent-encoded where MQTT would read a separator or wildcard). The broker's `PUBACK` is the
 * acknowledgement; a refusal in it (not authorized, quota exceeded) is a failed attempt naming why.
 * MQTT topics need no declaring: a message no subscriber takes is the broker's to drop. Needs the
 * optional peer `mqtt`.
 */
export function mqttDestination(options: MqttDestinationOptions = {}): WebhookDestination {
  return pooledDestination<string, MqttConnection>({
    kind: 'mqtt',
    schemes: ['mqtt', 'mqtts'],
    targetOf: topicOf,
    connectionKey: (url) => `${url.protocol}//${url.username}:${url.password}@${url.host}`,
    defaultPort: (url) => (url.protocol === 'mqtts:' ? 8883 : 1883),
    async connect(url, _topic, address, connectMs) {
      const tls = url.protocol === 'mqtts:';
      const mqtt = await load();
      const client = mqtt.connect({
        host: address.host,
        port: address.port,
        protocol: tls ? 'mqtts' : 'mqtt',
        ...(tls ? { servername: address.servername } : {}),
        ...(url.username === '' ? {} : { username: decodeURIComponent(url.username) }),
        ...(url.password === '' ? {} : { password: decodeURIComponent(url.password) }),
        protocolVersion: 5,
        clientId: `customer-portal-${randomBytes(8).toString('hex')}`,
        clean: true,
        connectTimeout: connectMs,
        // No redial in the background: the next call opens another connection.
        reconnectPeriod: 0,
        properties: { maximumPacketSize: MAX_PACKET },
      });
      client.on('error', () => {});
      const connected = new Promise<void>((resolve, reject) => {
        client.once('connect', () => resolve());
        client.once('error', reject);
        client.once('close', () => reject(new Error('the broker closed the connection')));
      });
      try {
        await withDeadline(connected, connectMs, 'for the MQTT broker to accept the connection');
      } catch (error) {
        client.end(true);
        throw error;
      }
      return new MqttConnection(client);
    },
    async publish(connection, topic, call) {
      const target = call.orderingKey === undefined ? topic : `${topic}/${subjectToken(call.orderingKey)}`;
      await connection.client.publishAsync(target, call.body, {
        qos: 1,
        properties: { userProperties: { ...call.headers }, contentType: 'application/json' },
      });
    },
    waitingFor: 'for the MQTT broker to acknowledge the message',
    ...(options.idleMs === undefined ? {} : { idleMs: options.idleMs }),
  });
}
