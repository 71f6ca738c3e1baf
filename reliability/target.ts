import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fsBlobs, fsStorage } from '../adapters/fs/index.js';
import { memoryTransport } from '../adapters/memory/index.js';
import type { Attachment, Logger, Webhook } from '../src/index.js';
import { SIGNING_KEY_1 } from '../test/helpers/download.js';
import { KEY_A, KEY_B, startPortal, type TestPortal } from '../test/helpers/server.js';
import { NEVER } from '../test/helpers/webhooks.js';
import { exchange } from './raw-http.js';

/** Every log line any portal of the suite wrote, for the scan for secrets. */
export const capturedLogs: string[] = [];
/** Every secret the suite used or was given: none may appear in a log line. */
export const secretsUsed = new Set<string>([KEY_A, KEY_B, SIGNING_KEY_1]);

/** A logger that keeps each line as the JSON-line logger would print it. */
export function capturingLogger(): Logger {
  const line = (level: string) => (object: object, msg?: string) => {
    capturedLogs.push(JSON.stringify({ level, ...object, msg }));
  };
  return { debug: line('debug'), info: line('info'), warn: line('warn'), error: line('error') };
}

export interface Target {
  app: TestPortal;
  dir: string;
  /** Moves the portal's clock (for expiry) without touching the machine's. */
  skew(seconds: number): void;
  /** Records of account A that the other account must never see. */
  a: { webhook: Webhook; attachment: Attachment; directoryId: string; agreementId: string; deliveryId: string };
  /** One record of account B, so that B is a real account with data of its own. */
  b: { webhook: Webhook };
  close(): Promise<void>;
}

const AUTH_A: [string, string] = ['Authorization', `Bearer ${KEY_A}`];

/** Whether the server still answers an ordinary authenticated read with 200. */
export async function healthy(url: string): Promise<boolean> {
  const answer = await exchange(url, { path: '/v1/files', headers: [AUTH_A] }, 5000);
  return answer.status === 200;
}

/**
 * An in-process portal on the filesystem adapters in a temp directory, served on 127.0.0.1 port 0,
 * with two accounts holding one of every record. Webhook calls go to a memory transport: nothing
 * leaves the machine, and the worker's own ticks are off.
 */
export async function startTarget(): Promise<Target> {
  const dir = mkdtempSync(path.join(tmpdir(), 'portal-reliability-'));
  let offset = 0;
  const app = await startPortal({
    storage: fsStorage({ dir }),
    blobs: fsBlobs({ dir: path.join(dir, 'blobs') }),
    signingKeys: [SIGNING_KEY_1],
    logger: capturingLogger(),
    transport: memoryTransport(),
    webhooks: { tick: NEVER },
    clock: () => new Date(Date.now() + offset * 1000),
  });
  const { portal } = app;
  const webhook = await portal.webhooks.create('acct_a', {
    type: 'customer-created',
    url: 'https://hooks.example.com/a',
  });
  const webhookB = await portal.webhooks.create('acct_b', {
    type: 'customer-created',
    url: 'https://hooks.example.com/b',
  });
  secretsUsed.add(webhook.secret!);
  secretsUsed.add(webhookB.secret!);
  await portal.events.publish('acct_a', 'customer-created', { name: 'Secret Customer A' });
  const deliveries = await portal.webhooks.deliveries('acct_a', webhook.id);
  const attachment = await portal.tickets.putAttachment('acct_a', {
    name: 'contract-a.pdf',
    mime: 'application/pdf',
    body: Buffer.from('private bytes of account A'),
  });
  const directory = await portal.files.createDirectory('acct_a', { name: 'private-dir-a' });
  await portal.files.put('acct_a', {
    name: 'file-a.txt',
    mime: 'text/plain',
    directoryId: directory.id,
    body: Buffer.from('a'),
  });
  const { validFormData } = await import('../test/helpers/agreements.js');
  const created = await app.api('/agreements', { method: 'POST', body: validFormData() });
  if (created.status !== 201) throw new Error(`target: seeding an agreement answered ${created.status}`);
  const agreement = (await created.json()) as { id: string };
  return {
    app,
    dir,
    skew: (seconds) => (offset = seconds),
    a: { webhook, attachment, directoryId: directory.id, agreementId: agreement.id, deliveryId: deliveries![0]!.id },
    b: { webhook: webhookB },
    async close() {
      await app.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
