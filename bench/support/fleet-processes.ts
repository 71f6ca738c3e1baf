/**
 * The processes of a webhook fleet on one PostgreSQL (the fleet and horizon benches): a child
 * process taking IPC commands, and a fleet of one contender (the portal, pg-boss or
 * graphile-worker): a publisher and its workers, each in its own process, on their own schema.
 */
import type { ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { homedir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { spawnNode } from './cores.js';
import type { Command } from './fleet.js';

const START_TIMEOUT_MS = 30_000;
const STOP_TIMEOUT_MS = 10_000;

export const script = (name: string) => fileURLToPath(new URL(`../${name}`, import.meta.url));

/** The Node that runs the current releases of the peers: pg-boss 12 and graphile-worker 0.18 declare 22.12 and 22.18. */
const PEERS_NEED = [22, 18] as const;

/**
 * The Node every process of a fleet runs on, the same for all contenders: `BENCH_FLEET_NODE`; else
 * this one when it is new enough for the peers; else the Node 24 `.ci/run` keeps in its cache.
 * A string saying what is missing when there is none.
 */
export function fleetNode(): { path: string; version: string } | string {
  const [major, minor] = process.versions.node.split('.').map(Number) as [number, number];
  const recent = major > PEERS_NEED[0] || (major === PEERS_NEED[0] && minor >= PEERS_NEED[1]);
  const cached = path.join(
    process.env.XDG_CACHE_HOME ?? path.join(homedir(), '.cache'),
    'customer-portal-ci',
    'node-24',
    'bin',
    'node',
  );
  const chosen = process.env.BENCH_FLEET_NODE ?? (recent ? process.execPath : existsSync(cached) ? cached : undefined);
  if (chosen === undefined) {
    return `the peers (pg-boss 12, graphile-worker 0.18) need Node ${PEERS_NEED.join('.')} or later, this is ${process.version}: set BENCH_FLEET_NODE, or run .ci/run once (it fetches Node 24 into ${path.dirname(path.dirname(cached))})`;
  }
  return { path: chosen, version: chosen === process.execPath ? process.version : `the Node at ${chosen}` };
}

let node = process.execPath;
/** Runs every process started from now on `path` (`fleetNode`). */
export function useNode(path: string): void {
  node = path;
}
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
    this.child = spawnNode(
      core,
      [file, ...args],
      {
        stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
        // NO_LOG_SUCCESS: graphile-worker's documented switch off its log line for every job done.
        env: { ...process.env, PGAPPNAME: applicationName, NO_LOG_SUCCESS: '1' },
      },
      node,
    );
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
  contender: 'portal' | 'pg-boss' | 'graphile-worker';
  schema: string;
  publisher: Child;
  workers: Child[];
}

let fleets = 0;
/** The start of each contender's schema names: every schema a run made is found by it and dropped. */
export const SCHEMA_PREFIX: Record<Fleet['contender'], string> = {
  portal: 'portal',
  'pg-boss': 'pgboss',
  'graphile-worker': 'graphile',
};
const SCRIPT: Record<Fleet['contender'], string> = {
  portal: 'fleet-portal.js',
  'pg-boss': 'fleet-pgboss.js',
  'graphile-worker': 'fleet-graphile.js',
};

/** A fleet of `contender`: its publisher (core 1) with `accounts` webhooks, then `workerCount` workers (core 0) fetching `batch` at once. */
export async function startFleet(
  contender: Fleet['contender'],
  workerCount: number,
  url: string,
  { accounts, batch }: { accounts: number; batch: number },
): Promise<Fleet> {
  const fleet = await startPublisher(contender, url, accounts);
  await startWorkers(fleet, workerCount, url, batch);
  return fleet;
}

/** A fleet's publisher alone (core 1), which makes the schema: the tables, the queue, `accounts` webhooks. */
async function startPublisher(contender: Fleet['contender'], url: string, accounts: number): Promise<Fleet> {
  const schema = `${SCHEMA_PREFIX[contender]}_fleet_${process.pid}_${++fleets}`;
  const publisherArgs =
    contender === 'portal' ? ['publisher', schema, url, String(accounts)] : ['publisher', schema, url];
  const fleet: Fleet = {
    contender,
    schema,
    publisher: new Child(`${contender} publisher`, script(SCRIPT[contender]), publisherArgs, 1, schema),
    workers: [],
  };
  try {
    await fleet.publisher.next(START_TIMEOUT_MS, 'start');
  } catch (error) {
    await stopFleet(fleet);
    throw error;
  }
  return fleet;
}

/** `workerCount` more workers (core 0) on the fleet's schema, each `batch` calls at once; resolves once each has started. */
export async function startWorkers(fleet: Fleet, workerCount: number, url: string, batch: number): Promise<void> {
  const { contender, schema } = fleet;
  try {
    const added: Child[] = [];
    for (let i = 0; i < workerCount; i++) {
      const args = contender === 'portal' ? ['worker', schema] : ['worker', schema, url, String(batch)];
      added.push(
        new Child(`${contender} worker ${fleet.workers.length + 1}`, script(SCRIPT[contender]), args, 0, schema),
      );
      fleet.workers.push(added.at(-1)!);
    }
    for (const worker of added) await worker.next(START_TIMEOUT_MS, 'start');
  } catch (error) {
    await stopFleet(fleet);
    throw error;
  }
}

/** Stops the fleet's workers, leaving its publisher and schema (what they did not deliver stays queued). */
export async function stopWorkers(fleet: Fleet): Promise<void> {
  await Promise.all(fleet.workers.map((child) => child.stop()));
  fleet.workers = [];
}

export async function stopFleet(fleet: Fleet): Promise<void> {
  await Promise.all([...fleet.workers, fleet.publisher].map((child) => child.stop()));
}
