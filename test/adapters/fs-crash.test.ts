/**
 * Crash safety of the fs adapters: a writer in a child process is killed with SIGKILL at random
 * moments, again and again on the same directory; after each kill the stores must open, every
 * acknowledged write must be there as acknowledged, and an unacknowledged one either wholly there
 * or wholly absent.
 */
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readdirSync } from 'node:fs';
import path from 'node:path';
import { buffer } from 'node:stream/consumers';
import { fileURLToPath } from 'node:url';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { fsBlobs, fsStorage } from '../../adapters/fs/index.js';
import type { BlobStore, Storage } from '../../src/ports.js';
import type { DeliveryRecord } from '../../src/records.js';
import { recordsOnDisk, removeDir, tempDir } from '../helpers/fs-dirs.js';

const WRITER = fileURLToPath(new URL('../helpers/fs-crash-writer.js', import.meta.url));
const RUNS = 21;

type Subject = [subject: string, state: unknown];
type Line = { t: 'ready' } | { t: 'B' | 'A'; op: number; s: Subject[] };

/** JSON with keys sorted, so two equal records compare equal whatever their key order. */
function canonical(value: unknown): string {
  return JSON.stringify(value, (_key, item: unknown) =>
    item !== null && typeof item === 'object' && !Array.isArray(item)
      ? Object.fromEntries(Object.entries(item).sort(([a], [b]) => (a < b ? -1 : 1)))
      : item,
  );
}

interface Writer {
  /** Lets the writer open the stores, kills it at a random moment, and resolves what it printed. */
  runAndKill(): Promise<{ lines: Line[]; killedAfterReady: boolean }>;
  kill(): void;
}

/**
 * Spawns the writer for run `run` on `dir`; it loads, then waits to be told to start, so the next
 * run's process can start up while the parent checks the previous one. It is killed a random
 * moment after it is ready, or, one run in six, while it is still opening the stores.
 */
function spawnWriter(dir: string, run: number): Writer {
  const child = spawn(process.execPath, [WRITER, dir, String(run)], { stdio: ['pipe', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  const exited = new Promise<NodeJS.Signals | null>((resolve) => child.on('exit', (_code, signal) => resolve(signal)));
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  return {
    kill: () => child.kill('SIGKILL'),
    async runAndKill() {
      let killedAfterReady = false;
      const killDuringOpen = run % 6 === 5;
      child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
        const wasReady = stdout.includes('"t":"ready"');
        stdout += chunk;
        if (!wasReady && !killDuringOpen && stdout.includes('"t":"ready"')) {
          setTimeout(() => ((killedAfterReady = true), child.kill('SIGKILL')), 10 + Math.random() * 120);
        }
      });
      child.stdin.write('go\n');
      if (killDuringOpen) setTimeout(() => child.kill('SIGKILL'), Math.random() * 40);
      const signal = await exited;
      assert.is(signal, 'SIGKILL', `the writer ended by itself (run ${run}): ${stderr}`);
      // A line cut off by the kill has no newline yet: it is not counted.
      const complete = stdout.slice(0, stdout.lastIndexOf('\n') + 1);
      return {
        lines: complete
          .split('\n')
          .filter(Boolean)
          .map((line) => JSON.parse(line) as Line),
        killedAfterReady,
      };
    },
  };
}

/** Records as the log on disk holds them, read with a reader of its own, not through the reopened store. */
type OnDisk = Awaited<ReturnType<typeof recordsOnDisk>>;

async function readSubject(storage: Storage, blobs: BlobStore, disk: OnDisk, subject: string): Promise<unknown> {
  const [table, id] = subject.split(':') as [string, string];
  const account = 'acct_crash';
  switch (table) {
    case 'webhook':
      return storage.getWebhook(account, id);
    case 'file':
      return storage.getFileEntry(account, id);
    case 'agreement':
      return storage.getAgreement(account, id);
    case 'event':
      return disk.get('event')?.get(id) ?? null;
    case 'delivery':
      return storage.getDelivery(account, id);
    case 'blob': {
      const stream = await blobs.get(id);
      return stream === null
        ? null
        : createHash('sha256')
            .update(await buffer(stream))
            .digest('hex');
    }
    default:
      throw new Error(`unknown subject ${subject}`);
  }
}

test(`acknowledged writes survive SIGKILL at ${RUNS} random moments, and the stores always open`, async () => {
  const dir = tempDir('crash');
  /** What each subject is known to be: acknowledged, or found after the last crash. */
  const settled = new Map<string, string>();
  let killedWhileWriting = 0;
  let checkedSubjects = 0;
  let next: Writer | undefined = spawnWriter(dir, 0);
  try {
    for (let run = 0; run < RUNS; run++) {
      const writer: Writer = next!;
      next = run + 1 < RUNS ? spawnWriter(dir, run + 1) : undefined;
      const { lines, killedAfterReady } = await writer.runAndKill();
      const unacknowledged = new Map<number, Subject[]>();
      for (const line of lines) {
        if (line.t === 'B') unacknowledged.set(line.op, line.s);
        if (line.t === 'A') {
          unacknowledged.delete(line.op);
          for (const [subject, state] of line.s) settled.set(subject, canonical(state));
        }
      }
      if (killedAfterReady && unacknowledged.size > 0) killedWhileWriting++;
      const mayBe = new Map<string, Set<string>>();
      for (const subjects of unacknowledged.values()) {
        for (const [subject, state] of subjects) {
          if (!mayBe.has(subject)) mayBe.set(subject, new Set());
          mayBe.get(subject)!.add(canonical(state));
        }
      }

      const storage = fsStorage({ dir: path.join(dir, 'records') });
      const blobs = fsBlobs({ dir: path.join(dir, 'blobs') });
      await storage.open!(); // rejects if the kill left anything that stops the store from opening
      await blobs.open!();
      try {
        const disk = await recordsOnDisk(path.join(dir, 'records'));
        assert.equal(readdirSync(path.join(dir, 'blobs', 'tmp')), [], 'temp files of interrupted puts are gone');
        // Each run checks what it touched; every few runs, and after the last, everything ever acknowledged.
        const everything = run % 5 === 4 || run === RUNS - 1;
        const touched = lines.flatMap((line) => (line.t === 'ready' ? [] : line.s.map(([subject]) => subject)));
        for (const subject of new Set(everything ? [...settled.keys(), ...mayBe.keys()] : touched)) {
          const found = canonical(await readSubject(storage, blobs, disk, subject));
          const allowed = new Set([settled.get(subject) ?? canonical(null), ...(mayBe.get(subject) ?? [])]);
          if (!allowed.has(found)) {
            const said = lines
              .filter((line) => JSON.stringify(line).includes(subject.split(':')[1]!))
              .map((line) => JSON.stringify(line).slice(0, 500));
            assert.unreachable(
              `run ${run}: ${subject} is ${found}; allowed: ${[...allowed].join(' | ')}; the writer said:\n${said.join('\n')}`,
            );
          }
          settled.set(subject, found);
          if (subject.startsWith('delivery:') && found !== 'null') {
            const delivery = JSON.parse(found) as DeliveryRecord;
            assert.ok(disk.get('event')?.get(delivery.eventId), `run ${run}: the event of ${subject} is there`);
          }
          checkedSubjects++;
        }
        // An agreement and the event stored with it are one transaction: both or neither.
        for (const subjects of unacknowledged.values()) {
          if (!subjects.some(([subject]) => subject.startsWith('agreement:'))) continue;
          const present = subjects.map(([subject, state]) => settled.get(subject) === canonical(state));
          assert.ok(
            present.every(Boolean) || !present.some(Boolean),
            `run ${run}: an agreement transaction was applied in part`,
          );
        }
      } finally {
        await storage.close!();
        await blobs.close!();
      }
    }
    assert.ok(
      killedWhileWriting >= RUNS / 2,
      `${killedWhileWriting} of ${RUNS} kills landed while a write was in flight`,
    );
    assert.ok(checkedSubjects > RUNS * 10, `only ${checkedSubjects} checks were made`);
  } finally {
    next?.kill();
    removeDir(dir);
  }
});

test.run();
