import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import type { SQSClient } from '@aws-sdk/client-sqs';
import type { BrokerKind, BrokerRun, Consumed, Consumer } from './brokers.js';
import { freePort, hasCommand, hasPackage } from './brokers.js';

const ACCOUNT = '123456789012';

/**
 * SQS: a `moto_server` of the tests' own. Every target is a FIFO queue (`<target>.fifo`), so the
 * ordering key travels as `MessageGroupId`. The client sends to moto whatever host a queue URL
 * names (`useQueueUrlAsEndpoint: false`).
 */
export const sqsBroker: BrokerKind = {
  name: 'sqs',
  // moto, SQS's stand-in, takes its time over each message and each receive.
  longRunEvents: 300,
  inapplicable: {
    credentials: 'an SQS URL carries no credentials: the client holds them',
    restart: 'moto keeps nothing across a restart',
    flood: "only SQS's own hosts are called, through the AWS SDK: no broker of a tenant's to flood it",
  },
  async absent() {
    if (!hasCommand('moto_server')) return "moto_server is not installed (pip install 'moto[server]')";
    if (!(await hasPackage('@aws-sdk/client-sqs'))) return 'the package @aws-sdk/client-sqs is not installed';
    return null;
  },
  async destinations(run, silentPort) {
    const { sqsDestination } = await import('../../adapters/sqs/index.js');
    return { sqs: sqsDestination({ client: await clientOf(silentPort ?? run.port) }) };
  },
  async start(): Promise<BrokerRun> {
    const { CreateQueueCommand, ReceiveMessageCommand, DeleteMessageBatchCommand } = await import(
      '@aws-sdk/client-sqs'
    );
    const port = await freePort();
    const child: ChildProcess = spawn('moto_server', ['-H', '127.0.0.1', '-p', String(port)], { stdio: 'ignore' });
    const until = Date.now() + 20_000;
    while (
      !(await fetch(`http://127.0.0.1:${port}/moto-api/`).then(
        () => true,
        () => false,
      ))
    ) {
      if (Date.now() > until || child.exitCode !== null) throw new Error('moto_server did not answer');
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const client = await clientOf(port);
    const queueUrl = (target: string) => `http://127.0.0.1:${port}/${ACCOUNT}/${target}.fifo`;
    return {
      host: '127.0.0.1',
      port,
      url: (target) => `sqs://127.0.0.1:${port}/${ACCOUNT}/${target}.fifo`,
      async prepare(target) {
        await client.send(new CreateQueueCommand({ QueueName: `${target}.fifo`, Attributes: { FifoQueue: 'true' } }));
      },
      async consume(target): Promise<Consumer> {
        const messages: Consumed[] = [];
        let stopped = false;
        const loop = (async () => {
          while (!stopped) {
            const answer = await client
              .send(
                new ReceiveMessageCommand({
                  QueueUrl: queueUrl(target),
                  MaxNumberOfMessages: 10,
                  WaitTimeSeconds: 0,
                  MessageAttributeNames: ['All'],
                  MessageSystemAttributeNames: ['MessageGroupId'],
                }),
              )
              .catch(() => ({ Messages: undefined }));
            const received = answer.Messages ?? [];
            for (const message of received) {
              const headers: Record<string, string> = {};
              for (const [name, value] of Object.entries(message.MessageAttributes ?? {}))
                headers[name] = value.StringValue ?? '';
              const group = message.Attributes?.MessageGroupId;
              messages.push({
                body: message.Body ?? '',
                headers,
                orderingKey: group === undefined || group.startsWith('wbh_') ? undefined : group,
              });
            }
            if (received.length > 0)
              await client.send(
                new DeleteMessageBatchCommand({
                  QueueUrl: queueUrl(target),
                  Entries: received.map((message, i) => ({ Id: String(i), ReceiptHandle: message.ReceiptHandle! })),
                }),
              );
            else await new Promise((resolve) => setTimeout(resolve, 50));
          }
        })();
        return {
          messages,
          async stop() {
            stopped = true;
            await loop;
          },
        };
      },
      async restart() {},
      async stop() {
        client.destroy();
        const exited = once(child, 'exit');
        child.kill();
        await exited;
      },
    };
  },
};

/** A client of moto (or of the silent server a test stands in its place). */
async function clientOf(port: number): Promise<SQSClient> {
  const { SQSClient } = await import('@aws-sdk/client-sqs');
  return new SQSClient({
    endpoint: `http://127.0.0.1:${port}`,
    region: 'us-east-1',
    credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
    useQueueUrlAsEndpoint: false,
    maxAttempts: 1,
  });
}
