import { createHash } from 'node:crypto';
import type { SqlClient } from './client.js';

/** The pieces of a `pg.Pool` and its clients that listening needs. */
export interface ListeningPool extends SqlClient {
  connect(): Promise<ListeningClient>;
}
interface ListeningClient extends SqlClient {
  release(error?: Error | boolean): void;
  on(event: 'notification', listener: (message: { channel: string }) => void): unknown;
  on(event: 'error' | 'end', listener: (error?: Error) => void): unknown;
  off(event: string, listener: (...args: never[]) => void): unknown;
}

/** Waits before listening again after the connection was lost: doubling, from the first to the last. */
const RECONNECT_FIRST_MS = 250;
const RECONNECT_LAST_MS = 10_000;

/**
 * The channel the publishes of one schema are announced on. Channel names are identifiers (at most
 * 63 bytes): a long schema name is replaced by its hash.
 */
export function workChannel(schema: string): string {
  const channel = `customer_portal_work_${schema}`;
  return channel.length <= 63
    ? channel
    : `customer_portal_work_${createHash('sha256').update(schema).digest('hex').slice(0, 40)}`;
}

/**
 * Calls `onWork` on every notification on `channel`, through one connection checked out of `pool`
 * for as long as it listens. When that connection is lost it takes another, after a pause that
 * doubles up to 10 s, and calls `onWork` once it listens again (work may have been announced
 * meanwhile); the caller's poll covers the gap. Resolves nothing: the returned function stops it
 * and gives the connection back.
 */
export function listenForWork(
  pool: ListeningPool,
  channel: string,
  onWork: () => void,
  onError: (error: unknown) => void,
): () => void {
  let stopped = false;
  let current: { client: ListeningClient; detach(): void } | undefined;
  let timer: NodeJS.Timeout | undefined;
  let pause = RECONNECT_FIRST_MS;
  const notified = (message: { channel: string }) => {
    if (message.channel === channel) onWork();
  };

  function retryLater() {
    if (stopped) return;
    timer = setTimeout(() => void listen(), pause);
    timer.unref();
    pause = Math.min(pause * 2, RECONNECT_LAST_MS);
  }

  async function listen() {
    let client: ListeningClient;
    try {
      client = await pool.connect();
    } catch (error) {
      onError(error);
      retryLater();
      return;
    }
    if (stopped) {
      client.release();
      return;
    }
    const detach = () => {
      client.off('notification', notified);
      client.off('error', lost);
      client.off('end', lost);
    };
    // Once per client, however it ends ('error', then 'end', or either alone).
    const lost = (error?: Error) => {
      if (current?.client !== client) return;
      current = undefined;
      detach();
      client.release(error ?? true);
      if (error !== undefined) onError(error);
      retryLater();
    };
    current = { client, detach };
    client.on('notification', notified);
    client.on('error', lost);
    client.on('end', lost);
    try {
      await client.query(`LISTEN "${channel}"`);
      pause = RECONNECT_FIRST_MS;
      onWork();
    } catch (error) {
      lost(error instanceof Error ? error : new Error(String(error)));
    }
  }

  void listen();
  return () => {
    stopped = true;
    clearTimeout(timer);
    if (current === undefined) return;
    const { client, detach } = current;
    current = undefined;
    detach();
    // A pooled connection goes back without its LISTEN, or is discarded when that fails.
    client.query(`UNLISTEN "${channel}"`).then(
      () => client.release(),
      (error: Error) => client.release(error),
    );
  };
}
