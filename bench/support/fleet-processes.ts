/**
 * The processes of a webhook fleet on one PostgreSQL (the fleet and horizon benches): a child
 * process taking IPC commands, and a fleet of one contender (the portal or pg-boss): a publisher
 * and its workers, each in its own process, on their own schema.
 */
import type { ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { spawnNode } from './cores.js';
import type { Command } from './fleet.js';

const START_TIMEOUT_MS = 30_000;
const STOP_TIMEOUT_MS = 10_000;

export const script = (name: string) => fileURLToPath(new URL(`../${name}`, import.meta.url));

/** A child process and the messages it sent, taken in order. */
export class Child {
  readonly child: ChildProcess;
  private readonly inbox: unknown[] = [];
  private waiter: { resolve: (message: unknown) => void; reject: (error: Error) => void } | undefined;
  private exited: string | undefined;

  constructor(
    readonly name: string,
    file: string,
    args: string[],
    core: number,
    /** The application_name of its PostgreSQL connections, by which its backends are found. */
    applicationName = name,
  ) {
    this.child = spawnNode(core, [file, ...args], {
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
      env: { ...process.env, PGAPPNAME: applicationName },
    });
    this.child.on('message', (message) => {
      if (this.waiter) {
        const { resolve } = this.waiter;
        this.waiter = undefined;
        resolve(message);
      } else this.inbox.push(message);
    });
    this.child.on('exit', (code, signal) => {
      this.exited = `${name} exited (${signal ?? code})`;
      this.waiter?.reject(new Error(this.exited));
      this.waiter = undefined;
    });
    this.child.on('error', (error) => {
      this.exited = `${name} could not start: ${error.message}`;
      this.waiter?.reject(new Error(this.exited));
      this.waiter = undefined;
    });
  }

  /** The next message, or an error after `ms` or when the process is gone. */
  next<T>(ms: number, what: string): Promise<T> {
    if (this.inbox.length > 0) return Promise.resolve(this.inbox.shift() as T);
    if (this.exited !== undefined) return Promise.reject(new Error(this.exited));
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiter = undefined;
        reject(new Error(`${this.name}: no answer to ${what} within ${Math.round(ms / 1000)} s`));
      }, ms);
      this.waiter = {
        resolve: (message) => (clearTimeout(timer), resolve(message as T)),
        reject: (error) => (clearTimeout(timer), reject(error)),
      };
    });
  }

  send(message: Command | { cmd: 'reset' | 'stats' | 'window' | 'claims' }): void {
    if (this.exited !== undefined) throw new Error(this.exited);
    this.child.send(message);
  }

  async request<T>(message: Command | { cmd: 'reset' | 'stats' | 'window' | 'claims' }, ms: number): Promise<T> {
    this.send(message);
    const answer = await this.next<T & { failed?: string }>(ms, message.cmd);
    if (answer.failed !== undefined) throw new Error(`${this.name}: ${answer.failed}`);
    return answer;
  }

  /** Asks it to stop; kills it when it has not within `STOP_TIMEOUT_MS`. */
  async stop(): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    const gone = new Promise((resolve) => this.child.once('exit', resolve));
    try {
      this.child.send({ cmd: 'stop' });
    } catch {
      this.child.kill('SIGKILL');
    }
    const timer = setTimeout(() => this.child.kill('SIGKILL'), STOP_TIMEOUT_MS);
    await gone;
    clearTimeout(timer);
  }
}

export interface Stats {
  distinct: number;
  calls: number;
  duplicates: number;
  refused: number;
  first: number | null;
  last: number;
  p50: number | null;
  p99: number | null;
  max: number | null;
}

export interface Fleet {
  contender: 'portal' | 'pg-boss';
  schema: string;
  publisher: Child;
  workers: Child[];
}

let fleets = 0;

/** A fleet of `contender`: its publisher (core 1) with `accounts` webhooks, then `workerCount` workers (core 0) fetching `batch` at once. */
export async function startFleet(
  contender: Fleet['contender'],
  workerCount: number,
  url: string,
  { accounts, batch }: { accounts: number; batch: number },
): Promise<Fleet> {
  const schema = `${contender === 'portal' ? 'portal' : 'pgboss'}_fleet_${process.pid}_${++fleets}`;
  const file = script(contender === 'portal' ? 'fleet-portal.js' : 'fleet-pgboss.js');
  // The publisher first: it makes the schema (tables, the queue) the workers then find.
  const publisherArgs = contender === 'portal' ? ['publisher', schema, url, String(accounts)] : ['publisher', schema, url];
  const fleet: Fleet = { contender, schema, publisher: new Child(`${contender} publisher`, file, publisherArgs, 1, schema), workers: [] };
  try {
    await fleet.publisher.next(START_TIMEOUT_MS, 'start');
    for (let i = 0; i < workerCount; i++) {
      const args = contender === 'portal' ? ['worker', schema] : ['worker', schema, url, String(batch)];
      fleet.workers.push(new Child(`${contender} worker ${i + 1}`, file, args, 0, schema));
    }
    for (const worker of fleet.workers) await worker.next(START_TIMEOUT_MS, 'start');
  } catch (error) {
    await stopFleet(fleet);
    throw error;
  }
  return fleet;
}

export async function stopFleet(fleet: Fleet): Promise<void> {
  await Promise.all([...fleet.workers, fleet.publisher].map((child) => child.stop()));
}
