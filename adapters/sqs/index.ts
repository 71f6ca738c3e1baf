import type { MessageAttributeValue, SQSClient } from '@aws-sdk/client-sqs';
import type { DestinationContext, WebhookCall, WebhookDestination, WebhookTransport } from '../../src/ports.js';
import { type UrlProblem, acknowledged, failed, fittedKey, peer, withDeadline } from '../shared/broker.js';

const load = peer('the package @aws-sdk/client-sqs is', () => import('@aws-sdk/client-sqs'));

export interface SqsDestinationOptions {
  /**
   * The client every message is sent with, its credentials the host's: a tenant's queue lets the
   * host's AWS principal `sqs:SendMessage` in its policy. Made with `useQueueUrlAsEndpoint` (the
   * SDK's default) the request goes to the queue URL's host.
   */
  client: SQSClient;
  /**
   * The AWS accounts whose queues no webhook may name: the host's own. The client sends with the
   * host's credentials, which its own queues accept without any queue policy, so a tenant naming
   * one would write into the host's queue. Strongly advised; default none.
   */
  hostAccounts?: readonly string[];
}

/** SQS's own hosts: `sqs.<region>.amazonaws.com` (`.com.cn` in China), and the legacy `<region>.queue.amazonaws.com`. */
const AWS_HOST = /^(sqs\.[a-z0-9-]+\.amazonaws\.com(\.cn)?|([a-z0-9-]+\.)?queue\.amazonaws\.com(\.cn)?)$/;
/** SQS's own bound on a queue name; `.fifo` included. */
const QUEUE_NAME = /^[A-Za-z0-9_-]{1,75}(\.fifo)?$/;

/** The `https://` queue URL an `sqs://` URL stands for, or what is wrong with it. */
function queueUrlOf(url: URL): string | UrlProblem {
  if (url.host === '')
    return {
      problem: 'must name the queue URL without its scheme: sqs://sqs.eu-west-1.amazonaws.com/123456789012/orders',
    };
  const parts = url.pathname.split('/').filter((part) => part !== '');
  if (parts.length !== 2 || !/^\d{12}$/.test(parts[0]!) || !QUEUE_NAME.test(parts[1]!))
    return { problem: 'must name an account id and a queue name as its path: sqs://host/123456789012/orders' };
  if (url.username !== '' || url.password !== '')
    return { problem: 'must not carry credentials: the client holds them' };
  if (url.search !== '' || url.hash !== '') return { problem: 'must not carry a query or a fragment' };
  return `https://${url.host}/${parts[0]}/${parts[1]}`;
}

/** The call's headers as message attributes (at most 10 a message: a call has 6). */
function attributesOf(call: WebhookCall): Record<string, MessageAttributeValue> {
  const attributes: Record<string, MessageAttributeValue> = {};
  for (const [name, value] of Object.entries(call.headers))
    attributes[name] = { DataType: 'String', StringValue: value };
  return attributes;
}

/**
 * A destination that sends each call to an Amazon SQS queue, for webhook URLs
 * `sqs://sqs.<region>.amazonaws.com/<account>/<queue>` (`sqs://` standing for `https://`). The
 * message body is the HTTP body; the call's headers are string message attributes. A FIFO queue
 * (`….fifo`) gets the ordering key as `MessageGroupId` (the webhook id when there is none) and a
 * deduplication id of the webhook and the event, so a retry after a lost answer is dropped by SQS.
 * `SendMessage`'s answer is the acknowledgement. Unless `allowPrivateNetworks`, only SQS's own hosts
 * are called. Needs the optional peer `@aws-sdk/client-sqs`.
 */
export function sqsDestination(options: SqsDestinationOptions): WebhookDestination {
  const { client } = options;
  const hostAccounts = new Set(options.hostAccounts ?? []);
  /** The queue URL, or why it may not be sent to: malformed, or a queue of the host's own. */
  const allowed = (url: URL): string | UrlProblem => {
    const queueUrl = queueUrlOf(url);
    if (typeof queueUrl === 'string' && hostAccounts.has(url.pathname.split('/')[1]!))
      return { problem: "must not name a queue of the portal's own AWS account" };
    return queueUrl;
  };
  return {
    schemes: ['sqs'],
    check(url) {
      const queueUrl = allowed(url);
      return typeof queueUrl === 'string' ? null : queueUrl.problem;
    },
    open(context: DestinationContext): WebhookTransport {
      return {
        async send(call, { timeoutMs, signal }) {
          const url = new URL(call.url);
          const queueUrl = allowed(url);
          if (typeof queueUrl !== 'string') return failed('sqs', new Error(`the URL ${queueUrl.problem}`), url);
          // The SDK resolves and connects by itself: the guard cannot pin an address, so only AWS's hosts are called.
          if (!context.allowPrivateNetworks && !AWS_HOST.test(url.hostname))
            return failed(
              'sqs',
              new Error(
                `refused to call ${url.hostname}: only SQS's own hosts are called (allowPrivateNetworks is off)`,
              ),
              url,
            );
          const fifo = queueUrl.endsWith('.fifo');
          const abort = new AbortController();
          try {
            const { SendMessageCommand } = await load();
            const command = new SendMessageCommand({
              QueueUrl: queueUrl,
              MessageBody: call.body,
              MessageAttributes: attributesOf(call),
              ...(fifo
                ? {
                    // SQS takes 1-128 printable ASCII characters: a key beyond that goes as its hash.
                    MessageGroupId: fittedKey(call.orderingKey ?? call.webhookId, 128, /^[\x21-\x7e]+$/),
                    MessageDeduplicationId: `${call.webhookId}-${call.headers['webhook-id']}`,
                  }
                : {}),
            });
            const answer = await withDeadline(
              client.send(command, { abortSignal: abort.signal }),
              timeoutMs,
              'for SQS to take the message',
              signal,
            );
            if (answer.MessageId === undefined) throw new Error('SQS answered without a message id');
            return acknowledged();
          } catch (error) {
            abort.abort();
            const name = (error as Error).name;
            if (name === 'QueueDoesNotExist' || name === 'AWS.SimpleQueueService.NonExistentQueue')
              return failed('sqs', new Error(`the queue ${queueUrl} does not exist`), url);
            // AWS's own answers name the caller (the host's account and role): the tenant reads only their code.
            if (typeof error === 'object' && error !== null && '$fault' in error)
              return failed('sqs', new Error(`SQS refused the message (${name})`), url);
            return failed('sqs', error, url);
          }
        },
      };
    },
  };
}
