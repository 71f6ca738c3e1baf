import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import type { Destinations } from '../../src/index.js';

/** A message as a consumer of the broker read it: the body, the headers, and the ordering key where the broker carries it. */
export interface Consumed {
  body: string;
  headers: Record<string, string>;
  orderingKey: string | undefined;
}

/** A consumer reading one target from its start, across restarts of the broker. */
export interface Consumer {
  readonly messages: Consumed[];
  stop(): Promise<void>;
}

/** A broker of the tests' own, started for the run. */
export interface BrokerRun {
  /** A webhook URL publishing to `target` (a stream, an exchange, a subject, a topic), with `credentials` when given. */
  url(target: string, credentials?: { user: string; password: string }): string;
  /** The host and port, for URLs the tests spell themselves. */
  readonly host: string;
  readonly port: number;
  /** Makes `target` exist (the library never declares one). */
  prepare(target: string): Promise<void>;
  /** Reads everything published to `target` from now on. */
  consume(target: string): Promise<Consumer>;
  /** Stops the broker and starts it again, what it stored kept. */
  restart(): Promise<void>;
  stop(): Promise<void>;
}

/** One kind of broker the destinations are tested against. */
export interface BrokerKind {
  name: string;
  /** Tests that do not apply to this kind, each with the reason printed as it is skipped. */
  inapplicable?: {
    /** MQTT topics need no declaring. */
    missingTarget?: string;
    /** SQS URLs carry none: the client holds them. */
    credentials?: string;
    /** moto keeps nothing across a restart. */
    restart?: string;
    /** Only SQS's own hosts are called. */
    flood?: string;
  };
  /** Events of the long run, when fewer than 10,000: a server that is only a stand-in for the service (moto) and is slow. */
  longRunEvents?: number;
  /** Why it cannot be tested here (no server binary, no client package), or `null`. */
  absent(): Promise<string | null>;
  /** The destinations option; `silentPort`: a server that accepts and never answers, for a kind whose client, not the URL, says where to connect. */
  destinations(run: BrokerRun, silentPort?: number): Promise<Destinations>;
  start(): Promise<BrokerRun>;
}

/** A TCP port nothing listens on now. */
export async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** Resolves once something accepts connections on `port`, or rejects after `timeoutMs`. */
async function listening(port: number, timeoutMs = 10_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const ok = await new Promise<boolean>((resolve) => {
      const socket = net.connect(port, '127.0.0.1');
      socket.once('connect', () => {
        socket.destroy();
        resolve(true);
      });
      socket.once('error', () => resolve(false));
    });
    if (ok) return;
    if (Date.now() > until) throw new Error(`nothing listened on ${port} within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** Whether `command` is on the PATH (or an absolute path that exists). */
export function hasCommand(command: string): boolean {
  try {
    execFileSync('sh', ['-c', `command -v ${command}`], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

/** Whether a package can be imported; its absence is a printed skip. */
export async function hasPackage(name: string): Promise<boolean> {
  try {
    await import(name);
    return true;
  } catch {
    return false;
  }
}

/** A server process of the tests' own, with a data directory, stopped and started again on the same port. */
export class OwnServer {
  #child: ChildProcess | undefined;
  readonly dir = mkdtempSync(path.join(os.tmpdir(), 'portal-broker-'));

  constructor(
    readonly port: number,
    private readonly command: string,
    private readonly args: (dir: string, port: number) => string[],
  ) {}

  async start(): Promise<void> {
    const child = spawn(this.command, this.args(this.dir, this.port), { stdio: 'ignore' });
    this.#child = child;
    child.once('error', () => {});
    await listening(this.port);
  }

  /** Ends the process (`signal`, SIGTERM by default: the server saves what it keeps) and waits for it. */
  async halt(signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
    const child = this.#child;
    if (child === undefined || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    child.kill(signal);
    await exited;
    this.#child = undefined;
  }

  async restart(): Promise<void> {
    await this.halt();
    await this.start();
  }

  async stop(): Promise<void> {
    await this.halt();
    rmSync(this.dir, { recursive: true, force: true });
  }
}
