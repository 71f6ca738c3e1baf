/**
 * Three portals in three processes on one PostgreSQL database, webhook workers on, calling a
 * receiver in this process. Needs the server; skipped with the reason when it cannot be reached.
 */
import { fork, type ChildProcess } from 'node:child_process';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { connectPostgres, dropSchema, freshSchema } from '../helpers/sql.js';

const INSTANCE = fileURLToPath(new URL('../helpers/sql-instance.js', import.meta.url));

interface Call {
  instance: string;
  eventId: string;
  /** Answered 200: the delivery arrived. A call the receiver holds open never is. */
  answered: boolean;
}

/** A receiver that answers 200, except to the instance named in `hangFor`, whose calls it holds open. */
async function startReceiver() {
  const calls: Call[] = [];
  const held = new Set<http.ServerResponse>();
  const state = { hangFor: null as string | null };
  const server = http.createServer(async (req, res) => {
    for await (const _ of req);
    const call: Call = {
      instance: String(req.headers['x-instance']),
      eventId: String(req.headers['webhook-id']),
      answered: false,
    };
    calls.push(call);
    if (call.instance === state.hangFor) {
      held.add(res);
      return;
    }
    res.writeHead(200).end();
    call.answered = true;
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`,
    calls,
    state,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

interface Instance {
  name: string;
  child: ChildProcess;
  owner: string;
  request<T>(message: Record<string, unknown>): Promise<T>;
}

async function startInstance(schema: string, name: string): Promise<Instance> {
  const child = fork(INSTANCE, [schema, name], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  let nextId = 0;
  const pending = new Map<number, { resolve: (value: any) => void; reject: (error: Error) => void }>();
  const ready = new Promise<string>((resolve, reject) => {
    child.on(
      'message',
      (message: { ready?: boolean; owner?: string; id?: number; result?: unknown; error?: string }) => {
        if (message.ready) return resolve(message.owner!);
        const waiter = pending.get(message.id!);
        pending.delete(message.id!);
        if (message.error !== undefined) waiter?.reject(new Error(`${name}: ${message.error}`));
        else waiter?.resolve(message.result);
      },
    );
    child.once('exit', (code) => reject(new Error(`instance ${name} exited with ${code} before it was ready`)));
  });
  const owner = await ready;
  return {
    name,
    child,
    owner,
    request: (message) =>
      new Promise((resolve, reject) => {
        const id = ++nextId;
        pending.set(id, { resolve, reject });
        child.send({ ...message, id });
      }),
  };
}

/** Polls `done` until it holds; a timeout fails with `what` and the state `describe` gives. */
async function waitUntil(what: string, done: () => boolean, describe: () => string, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!done()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}: ${describe()}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Events published on instance c while its calls hang: enough that the other two cannot drain them
 * all before c, busy publishing them, claims its share (a claim is three round trips, its planning
 * set in a transaction). With 120, a and b once delivered all of them first.
 */
const LATE = 240;

const postgres = await connectPostgres();
if (!postgres.pool) {
  console.log(`SKIP sql multi-instance test: ${postgres.reason}`);
} else {
  const pool = postgres.pool;

  test("three instances share 300 deliveries, none twice; a killed worker's claims arrive through another after the lease", async () => {
    const schema = freshSchema();
    const receiver = await startReceiver();
    const instances: Instance[] = [];
    const deliveries = async () =>
      (
        await pool.query(
          `SELECT event_id, status, jsonb_array_length(attempts) AS attempts, lease_owner FROM "${schema}".portal_queue
            UNION ALL SELECT event_id, status, jsonb_array_length(attempts), lease_owner FROM "${schema}".portal_deliveries`,
        )
      ).rows as {
        event_id: string;
        status: string;
        attempts: number;
        lease_owner: string | null;
      }[];
    const answeredCount = (eventId: string) =>
      receiver.calls.filter((call) => call.eventId === eventId && call.answered).length;
    try {
      // Started together: three processes migrate the new schema at once.
      instances.push(...(await Promise.all(['a', 'b', 'c'].map((name) => startInstance(schema, name)))));
      const [a, b, c] = instances as [Instance, Instance, Instance];
      await a.request({ op: 'createWebhook', url: receiver.url });

      // 1. 300 events, 100 published on each instance, all delivered exactly once.
      const published = (
        await Promise.all(instances.map((instance) => instance.request<string[]>({ op: 'publish', count: 100 })))
      ).flat();
      assert.is(new Set(published).size, 300);
      await waitUntil(
        'every event is delivered',
        () => published.every((id) => answeredCount(id) >= 1),
        () => `${receiver.calls.length} calls`,
      );
      await pause(2_000); // two more ticks on every instance: time for a duplicate to show up
      assert.is(receiver.calls.length, 300, 'one call per event, no more');
      assert.ok(published.every((id) => answeredCount(id) === 1));
      const byInstance: Record<string, number> = {};
      for (const call of receiver.calls) byInstance[call.instance] = (byInstance[call.instance] ?? 0) + 1;
      const shares = Object.entries(byInstance)
        .map(([name, count]) => `${name} ${count}`)
        .join(', ');
      assert.ok(Object.keys(byInstance).length >= 2, `the work was shared: ${shares}`);
      const rows = await deliveries();
      assert.is(rows.length, 300);
      assert.ok(
        rows.every((row) => row.status === 'succeeded' && Number(row.attempts) === 1 && row.lease_owner === null),
        JSON.stringify(
          rows
            .filter((row) => !(row.status === 'succeeded' && Number(row.attempts) === 1 && row.lease_owner === null))
            .slice(0, 3),
        ),
      );

      // 2. Instance c's calls are held open; it is killed while they are in flight.
      receiver.state.hangFor = 'c';
      // Enough that the other two cannot drain them all before c's own worker, poked by its
      // publish, claims its share: on a loaded host 30 went to a and b before c claimed once.
      const late = await c.request<string[]>({ op: 'publish', count: LATE });
      const inFlightAtC = () =>
        new Set(
          receiver.calls
            .filter((call) => call.instance === 'c' && late.includes(call.eventId))
            .map((call) => call.eventId),
        );
      await waitUntil(
        'each late event is answered elsewhere or held at c',
        () => late.every((id) => answeredCount(id) === 1 || inFlightAtC().has(id)),
        () => `${inFlightAtC().size} held at c`,
      );
      const stranded = [...inFlightAtC()];
      assert.ok(stranded.length > 0, 'c was mid-call');
      const leased = (await deliveries()).filter((row) => stranded.includes(row.event_id));
      assert.ok(
        leased.every((row) => row.status === 'pending' && row.lease_owner === c.owner),
        'c holds the leases of its calls',
      );
      c.child.kill('SIGKILL');
      await new Promise((resolve) =>
        c.child.exitCode !== null || c.child.signalCode !== null ? resolve(null) : c.child.once('exit', resolve),
      );

      // While the lease runs (timeoutMs 30 s + 60 s), the others leave those deliveries alone.
      await pause(3_000);
      assert.ok(
        stranded.every((id) => answeredCount(id) === 0),
        'no one took a leased delivery early',
      );
      // Move the survivors' clocks past the lease instead of sleeping through it.
      await Promise.all([a, b].map((instance) => instance.request({ op: 'advanceClock', ms: 120_000 })));
      await waitUntil(
        'every stranded delivery arrives through a surviving instance',
        () => stranded.every((id) => answeredCount(id) === 1),
        () => `${stranded.filter((id) => answeredCount(id) === 1).length} of ${stranded.length}`,
      );
      await pause(2_000);
      assert.ok(
        late.every((id) => answeredCount(id) === 1),
        'every late event arrived exactly once',
      );
      for (const id of stranded) {
        const answeredBy = receiver.calls
          .filter((call) => call.eventId === id && call.answered)
          .map((call) => call.instance);
        assert.ok(answeredBy[0] === 'a' || answeredBy[0] === 'b', `${id} arrived through ${answeredBy[0]}`);
      }
      const final = await deliveries();
      assert.is(final.length, 300 + LATE);
      assert.ok(final.every((row) => row.status === 'succeeded' && row.lease_owner === null));
      // The killed worker never recorded its attempt: the one recorded is the survivor's.
      assert.ok(final.filter((row) => stranded.includes(row.event_id)).every((row) => Number(row.attempts) === 1));
      console.log(
        `  multi-instance: 300 delivered once (${shares}); ` +
          `${stranded.length} stranded by SIGKILL delivered by survivors after the lease`,
      );
    } finally {
      for (const instance of instances) if (instance.child.connected) instance.child.disconnect();
      await Promise.all(
        instances.map((instance) =>
          instance.child.exitCode !== null || instance.child.signalCode !== null
            ? null
            : new Promise((resolve) => instance.child.once('exit', resolve)),
        ),
      );
      await receiver.close();
      await dropSchema(pool, schema);
      await pool.end();
    }
  });

  test.run();
}
