/**
 * The standalone server behind `npm start`: configuration from the environment, one JSON log line
 * per request, timeouts against slow clients, and a graceful stop on SIGINT/SIGTERM.
 */
import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { createPortal, type Destinations, jsonLineLogger, type Portal, type PortalOptions } from 'customer-portal';
import { ensureDirectory, fsBlobs, fsStorage, writeFileAtomically } from 'customer-portal/adapters/fs';
import { connectDatabase, sqlAdapters } from 'customer-portal/adapters/sql';
import { httpTransport } from 'customer-portal/adapters/http-transport';
import { smtpNotifier } from 'customer-portal/adapters/smtp';
import { createProbes } from './probes.js';
import { prometheusMetrics } from './metrics.js';

const logger = jsonLineLogger(process.env.LOG_LEVEL === 'debug' ? 'debug' : 'info');
const list = (value: string | undefined) =>
  (value ?? '')
    .split(',')
    .map((item) => item.trim())
    .filter(Boolean);

/** A secret kept in the data directory (mode 0600): read when present, otherwise made and written atomically. */
async function keptSecret(file: string): Promise<{ value: string; created: boolean }> {
  try {
    const value = (await readFile(file, 'utf8')).trim();
    if (/^[A-Za-z0-9_-]{32,}$/.test(value)) return { value, created: false };
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
  const value = randomBytes(32).toString('base64url');
  await writeFileAtomically(file, Buffer.from(value + '\n'), 0o600);
  return { value, created: true };
}

function positive(name: string, value: string): number {
  const number = Number(value);
  if (!Number.isInteger(number) || number < 1 || number > 1000)
    throw new Error(`${name} must be a whole number from 1 to 1000, got "${value}"`);
  return number;
}

function port(value: string | undefined): number {
  if (value === undefined || value === '') return 3000;
  const number = Number(value);
  if (!Number.isInteger(number) || number < 0 || number > 65535)
    throw new Error(`PORT must be a port number, got "${value}"`);
  return number;
}

/** The `destinations` option of `PORTAL_DESTINATIONS` (`amqp,nats,mqtt,redis,sqs`): `undefined` for none. */
async function destinationsOf(names: string[]): Promise<Destinations | undefined> {
  if (names.length === 0) return undefined;
  const made: Destinations = {};
  for (const name of names) {
    if (name === 'amqp') made.amqp = (await import('customer-portal/adapters/amqp')).amqpDestination();
    else if (name === 'nats') made.nats = (await import('customer-portal/adapters/nats')).natsDestination();
    else if (name === 'mqtt') made.mqtt = (await import('customer-portal/adapters/mqtt')).mqttDestination();
    else if (name === 'redis') made.redis = (await import('customer-portal/adapters/redis')).redisDestination();
    else if (name === 'sqs') {
      // The AWS SDK's own configuration: AWS_REGION, and credentials from the environment or the instance role.
      const { SQSClient } = await import('@aws-sdk/client-sqs');
      made.sqs = (await import('customer-portal/adapters/sqs')).sqsDestination({
        client: new SQSClient({}),
        hostAccounts: list(process.env.PORTAL_SQS_HOST_ACCOUNTS),
      });
    } else throw new Error(`PORTAL_DESTINATIONS: ${name} is none of amqp, nats, mqtt, redis, sqs`);
  }
  return made;
}

/** Listens, or rejects with the bind error (`EADDRINUSE`, `EACCES`) instead of throwing it as an event. */
function listen(server: http.Server, portNumber: number, host: string | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(portNumber, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
}

async function main() {
  let portal: Portal | undefined;
  // Before the portal is made: it makes its instruments from the meter provider registered then.
  // The figures are the operator's: with METRICS_TOKEN they need it as a bearer; without, they are open to whoever reaches the port.
  const metricsToken = process.env.METRICS_TOKEN || undefined;
  const metrics = process.env.METRICS === '1' ? await prometheusMetrics(metricsToken) : undefined;
  if (metrics !== undefined && metricsToken === undefined) {
    logger.warn(
      {},
      'METRICS=1 without METRICS_TOKEN: GET /metrics answers anyone who reaches this port; set METRICS_TOKEN, or keep the port private',
    );
  }
  // /healthz, /readyz and /metrics, outside the API and its keys.
  const probes = createProbes(() => portal, logger, metrics);
  let ready!: (portal: Portal) => void;
  const opened = new Promise<Portal>((resolve) => (ready = resolve));
  // A request that arrives between the bind and the portal's start waits for the portal. Node checks
  // the two timeouts below every `connectionsCheckingInterval` (default 30 s): checked each second, a
  // slow client is cut off close to the limit instead of up to half a minute after it.
  const server = http.createServer({ connectionsCheckingInterval: 1_000 }, (req, res) => {
    if (probes.serve(req, res)) return;
    if (portal !== undefined) portal.handler(req, res);
    else void opened.then((started) => started.handler(req, res));
  });
  // A slow client (slowloris, a trickled upload) is cut off instead of holding a socket forever.
  server.headersTimeout = 10_000;
  server.requestTimeout = 60_000;
  server.keepAliveTimeout = 5_000;
  // Bind first: a port in use stops the start before anything is written to disk or printed.
  await listen(server, port(process.env.PORT), process.env.HOST);

  const dataDir = path.resolve(process.env.DATA_DIR ?? './data');
  await ensureDirectory(dataDir);

  let apiKeys = list(process.env.PORTAL_API_KEYS);
  const generatedKey = apiKeys.length === 0 ? (await keptSecret(path.join(dataDir, 'api-key'))).value : undefined;
  if (generatedKey !== undefined) apiKeys = [generatedKey];
  let signingKeys = list(process.env.PORTAL_SIGNING_KEYS);
  if (signingKeys.length === 0) {
    signingKeys = [(await keptSecret(path.join(dataDir, 'signing-key'))).value];
    if (process.env.DATABASE_URL) {
      logger.warn(
        { file: path.join(dataDir, 'signing-key') },
        "PORTAL_SIGNING_KEYS is not set: links are signed with a key kept in this instance's DATA_DIR, so the other instances on this database reject them; give every instance the same PORTAL_SIGNING_KEYS",
      );
    }
  }

  // DATABASE_URL moves records and bytes to PostgreSQL (or PGlite): the way to run several instances.
  const poolMax = process.env.DATABASE_POOL_MAX
    ? positive('DATABASE_POOL_MAX', process.env.DATABASE_POOL_MAX)
    : undefined;
  const database = process.env.DATABASE_URL ? await connectDatabase(process.env.DATABASE_URL, { poolMax }) : null;
  const adapters = database
    ? sqlAdapters({ client: database.client })
    : {
        storage: fsStorage({
          dir: dataDir,
          // One open that keeps what a damaged log still holds, after its error said how.
          repair: process.env.PORTAL_FS_REPAIR === '1',
          onRepair: (report) =>
            logger.warn(
              { ...report },
              'storage: the record log was damaged; its whole frames were kept, the damaged bytes dropped',
            ),
          onDiscard: (report) =>
            logger.warn(
              { ...report },
              'storage: the last write before an unclean stop was cut from the record log; its bytes are kept beside it',
            ),
        }),
        blobs: fsBlobs({ dir: path.join(dataDir, 'blobs') }),
      };
  // For trying webhooks against a receiver on this machine or a private network; never in production.
  const allowPrivateNetworks = process.env.PORTAL_ALLOW_PRIVATE_NETWORKS === '1';
  if (allowPrivateNetworks) {
    logger.warn({}, 'PORTAL_ALLOW_PRIVATE_NETWORKS=1: webhook calls may reach loopback and private addresses');
  }
  // Mail to signers (identification codes, links sent by e-mail, reminders, completions): both or neither.
  const smtpUrl = process.env.SMTP_URL || undefined;
  const mailFrom = process.env.MAIL_FROM || undefined;
  if ((smtpUrl === undefined) !== (mailFrom === undefined))
    throw new Error('SMTP_URL and MAIL_FROM go together: set both to mail signers, or neither');
  const notifier = smtpUrl === undefined ? undefined : smtpNotifier({ url: smtpUrl, from: mailFrom! });
  const frameAncestors = list(process.env.PORTAL_FRAME_ANCESTORS);
  // The key that seals completed copies: a PKCS#12 file, its password, and a timestamp authority.
  const sealingFile = process.env.PORTAL_SEALING_P12 || undefined;
  if (sealingFile === undefined && (process.env.PORTAL_SEALING_PASSWORD || process.env.PORTAL_TIMESTAMP_URL)) {
    throw new Error(
      'PORTAL_SEALING_PASSWORD and PORTAL_TIMESTAMP_URL need PORTAL_SEALING_P12, the path of the PKCS#12 file that seals',
    );
  }
  const sealing =
    sealingFile === undefined
      ? undefined
      : {
          p12: await readFile(path.resolve(sealingFile)),
          ...(process.env.PORTAL_SEALING_PASSWORD ? { password: process.env.PORTAL_SEALING_PASSWORD } : {}),
          ...(process.env.PORTAL_TIMESTAMP_URL ? { timestampUrl: process.env.PORTAL_TIMESTAMP_URL } : {}),
        };
  // Brokers a webhook URL may name instead of an HTTP receiver; each needs its client installed.
  const destinations = await destinationsOf(list(process.env.PORTAL_DESTINATIONS));
  const options: PortalOptions = {
    ...adapters,
    ...(destinations === undefined ? {} : { destinations }),
    ...(notifier === undefined ? {} : { notifier }),
    ...(frameAncestors.length === 0 ? {} : { signing: { frameAncestors } }),
    ...(sealing === undefined ? {} : { sealing }),
    auth: { apiKeys },
    signingKeys,
    logger,
    webhooks: { allowPrivateNetworks },
    // Webhook calls through an egress proxy (static egress addresses, an SSRF-hardening proxy).
    ...(process.env.PORTAL_WEBHOOK_PROXY
      ? { transport: httpTransport({ allowPrivateNetworks, proxy: process.env.PORTAL_WEBHOOK_PROXY, logger }) }
      : {}),
    // The customer portal page: sign in there with the API key.
    ui: { path: '/portal' },
    ...(process.env.PUBLIC_URL ? { publicUrl: process.env.PUBLIC_URL } : {}),
    // Behind the TLS proxy docs/operations.md asks for: the client's address is the last of
    // X-Forwarded-For, not the proxy's own. Only where every request comes through that proxy.
    trustProxy: process.env.TRUST_PROXY === '1',
  };
  portal = await createPortal(options);
  ready(portal);
  const started = portal;
  // What a customer should be told, logged once by the instance that recorded it.
  started.on('webhook.disabled', (event) => logger.warn({ ...event }, 'webhook disabled'));
  started.on('delivery.exhausted', (event) => logger.warn({ ...event }, 'delivery exhausted: no more retries'));
  started.on('delivery.recovered', (event) => logger.info({ ...event }, 'delivery recovered after failures'));
  // Printed once the server serves with it, never before a start that then fails; the one place a
  // key is printed: the operator needs it to make a first request.
  if (generatedKey !== undefined) process.stdout.write(`API key: ${generatedKey}\n`);

  // Handlers first: whoever reads the 'listening' line may signal at once.
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) {
      logger.warn({ signal }, 'second signal: exiting at once');
      process.exit(1);
    }
    stopping = true;
    // A load balancer polling /readyz stops sending new requests while those in flight finish.
    probes.stopping();
    logger.info({ signal }, 'stopping: finishing requests in flight');
    const force = setTimeout(() => server.closeAllConnections(), 10_000).unref();
    server.close(async () => {
      clearTimeout(force);
      await started.close();
      notifier?.close();
      // The adapters never close a client they were handed; the server made this one, so it ends it.
      await database?.close();
      await metrics?.close();
      logger.info({}, 'stopped');
      process.exit(0);
    });
    server.closeIdleConnections();
  };
  process.on('SIGINT', () => stop('SIGINT'));
  process.on('SIGTERM', () => stop('SIGTERM'));

  const address = server.address() as AddressInfo;
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  logger.info(
    {
      url: `http://${host}:${address.port}/v1`,
      page: `http://${host}:${address.port}/portal/`,
      dataDir,
      storage: database ? 'sql' : 'filesystem',
      mail: notifier === undefined ? 'off (no SMTP_URL): signers identify with access codes only' : 'smtp',
      destinations: destinations === undefined ? 'http only (no PORTAL_DESTINATIONS)' : Object.keys(destinations),
      sealing:
        sealing === undefined
          ? 'off (no PORTAL_SEALING_P12): completed copies are stamped, not sealed'
          : sealing.timestampUrl === undefined
            ? 'B-B'
            : 'B-T',
    },
    'listening',
  );
}

/** The error and each cause under it, one message a line: what the operator needs to act on. */
function reasons(error: unknown): string[] {
  const messages: string[] = [];
  for (let at: unknown = error; at !== undefined && messages.length < 5; at = (at as { cause?: unknown }).cause) {
    const message = at instanceof Error ? at.message : String(at);
    if (!messages.some((seen) => seen.includes(message))) messages.push(message);
    if (!(at instanceof Error)) break;
  }
  return messages;
}

main().catch((error: unknown) => {
  const [message, ...causes] = reasons(error);
  logger.error(
    { err: { message, causes, stack: error instanceof Error ? error.stack : undefined } },
    'failed to start',
  );
  process.exit(1);
});
