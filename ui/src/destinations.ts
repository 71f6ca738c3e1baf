import { urlSchemes } from './api.js';

/** A kind of place a webhook's calls go: an HTTP receiver, or a broker of one of the destinations. */
interface DestinationKind {
  /** The URL schemes it takes. */
  schemes: readonly string[];
  label: string;
  /** What a URL of it looks like. */
  example: string;
}

const KINDS: readonly DestinationKind[] = [
  { schemes: ['https', 'http'], label: 'HTTPS receiver', example: 'https://example.com/hooks' },
  {
    schemes: ['amqp', 'amqps'],
    label: 'RabbitMQ (AMQP)',
    example: 'amqps://user:password@broker.example.com/vhost?exchange=events&routingKey=portal',
  },
  { schemes: ['nats'], label: 'NATS JetStream', example: 'nats://user:password@nats.example.com:4222/portal.events' },
  { schemes: ['mqtt', 'mqtts'], label: 'MQTT', example: 'mqtts://user:password@mqtt.example.com:8883/portal/events' },
  {
    schemes: ['redis', 'rediss'],
    label: 'Redis stream',
    example: 'rediss://user:password@redis.example.com:6380/portal-events',
  },
  { schemes: ['sqs'], label: 'Amazon SQS', example: 'sqs://sqs.eu-west-1.amazonaws.com/123456789012/portal-events' },
];

/** The kinds this portal takes: HTTP always, each broker when the host configured its destination. */
export function destinationKinds(): DestinationKind[] {
  const taken = new Set(urlSchemes());
  return KINDS.filter((kind) => kind.schemes.some((scheme) => taken.has(scheme)));
}

/** What a webhook URL publishes to, for its screen and its card: `HTTPS receiver`, `RabbitMQ (AMQP)`, … */
export function destinationLabel(url: string): string {
  const scheme = url.slice(0, Math.max(0, url.indexOf(':'))).toLowerCase();
  return KINDS.find((kind) => kind.schemes.includes(scheme))?.label ?? scheme;
}
