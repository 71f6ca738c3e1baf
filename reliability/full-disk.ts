/**
 * A full disk under the fs adapters, as in issue 19: the reliability child server (fs adapters, two
 * accounts) on an 8 MiB tmpfs. Account A fills the disk with uploads; whatever room is left is then
 * taken by a file of ours; both accounts write webhooks, one by one and eight at once. Every answer
 * must be 201 or 507 `{message}`; what is listed must be exactly what was acknowledged; once the file
 * is removed, writes of both accounts and uploads succeed again without a restart; and after
 * `kill -9` and a restart the store holds exactly what was acknowledged.
 * Needs root to mount the tmpfs; elsewhere the row says why it did not run.
 */
import path from 'node:path';
import { documentBytes, validFormData } from '../test/helpers/agreements.js';
import { KEY_A, KEY_B } from '../test/helpers/server.js';
import { fillDisk, freeDisk, mountTmpfs } from '../test/helpers/tmpfs.js';
import { killChild, startChild, type Child } from './faults.js';
import { check, count, row, within, type Row } from './tally.js';

const SECTION = 'disk';

interface Answer {
  status: number;
  body: { id?: string; url?: string; message?: string; data?: { url: string }[] };
}

async function call(child: Child, route: string, init: RequestInit, key: string): Promise<Answer | 'hung' | 'failed'> {
  const answer = await within(15_000, async () => {
    try {
      const res = await fetch(`${child.url}/v1${route}`, {
        ...init,
        headers: { ...(init.headers as object), authorization: `Bearer ${key}` },
      });
      return { status: res.status, body: (await res.json()) as Answer['body'] };
    } catch {
      return 'failed' as const;
    }
  });
  return answer;
}

/** Counts one write's answer: 201, or 507 with `{message}` alone. Resolves what it was. */
function judge(into: Row, answer: Answer | 'hung' | 'failed', what: string): 'stored' | 'full' | 'other' {
  if (answer === 'hung') return (count(into, 'hung', what), 'other');
  if (answer === 'failed') return (count(into, 'wrong', `${what}: no answer (connection failed)`), 'other');
  if (answer.status === 201) return (count(into, 'correct'), 'stored');
  const fullAnswer =
    answer.status === 507 &&
    Object.keys(answer.body).join() === 'message' &&
    /storage is full/.test(answer.body.message ?? '');
  count(
    into,
    fullAnswer ? 'correct' : answer.status >= 500 ? '5xx' : 'wrong',
    `${what}: ${answer.status} ${JSON.stringify(answer.body)}`,
  );
  return fullAnswer ? 'full' : 'other';
}

const postWebhook = (child: Child, n: number, key: string) =>
  call(
    child,
    '/webhooks',
    {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ type: 'customer-created', url: `https://hooks.example.com/full-${n}` }),
    },
    key,
  );

async function listed(child: Child, key: string): Promise<string[] | null> {
  const answer = await call(child, '/webhooks', {}, key);
  return typeof answer === 'object' && answer.status === 200
    ? answer.body.data!.map((webhook) => webhook.url).sort()
    : null;
}

/** Whether the listing is exactly what was acknowledged: a missing one is lost, an extra one wrong. */
async function expectListed(into: Row, child: Child, key: string, acknowledged: string[], when: string): Promise<void> {
  const shown = await listed(child, key);
  if (shown === null) return void count(into, '5xx', `${when}: listing webhooks failed`);
  const missing = acknowledged.filter((url) => !shown.includes(url));
  const extra = shown.filter((url) => !acknowledged.includes(url));
  if (missing.length > 0) count(into, 'lost', `${when}: ${missing.length} acknowledged webhooks missing`);
  else check(into, extra.length === 0, `${when}: ${extra.length} webhooks listed that answered 507`);
}

export async function fullDisk(): Promise<void> {
  const into = row(SECTION, 'full disk: fs adapters on an 8 MiB tmpfs');
  const mounted = mountTmpfs('8m');
  if (mounted.dir === undefined) {
    into.skipped = mounted.reason;
    return;
  }
  const dataDir = path.join(mounted.dir, 'data');
  let child: Child | undefined;
  let filler: string | undefined;
  try {
    child = await startChild(dataDir);
    // Account A fills the disk with uploads (1 MiB documents) until one answers 507.
    let uploads = 0;
    for (let i = 0; i < 20; i++) {
      const body = validFormData({ documents: [{ name: `fill${i}.pdf`, bytes: documentBytes(1 << 20, i) }] });
      const outcome = judge(into, await call(child, '/agreements', { method: 'POST', body }, KEY_A), `upload ${i}`);
      if (outcome === 'stored') uploads++;
      if (outcome !== 'stored') break;
    }
    filler = fillDisk(mounted.dir);
    // Both accounts write until the record log is full too, then eight writes at once.
    const acknowledged: Record<string, string[]> = { [KEY_A]: [], [KEY_B]: [] };
    let full = 0;
    for (let n = 0; n < 400 && full < 3; n++) {
      const key = n % 2 === 0 ? KEY_A : KEY_B;
      const answer = await postWebhook(child, n, key);
      const outcome = judge(into, answer, `webhook ${n}`);
      if (outcome === 'stored') acknowledged[key]!.push((answer as Answer).body.url!);
      if (outcome === 'full') full++;
    }
    check(into, full === 3, 'the record log never filled up');
    const together = await Promise.all(
      Array.from({ length: 8 }, (_, i) => postWebhook(child!, 1000 + i, i % 2 ? KEY_B : KEY_A)),
    );
    together.forEach((answer, i) => {
      const outcome = judge(into, answer, `concurrent webhook ${i}`);
      if (outcome === 'stored') acknowledged[i % 2 ? KEY_B : KEY_A]!.push((answer as Answer).body.url!);
    });
    await expectListed(into, child, KEY_A, acknowledged[KEY_A]!, 'disk full, account A');
    await expectListed(into, child, KEY_B, acknowledged[KEY_B]!, 'disk full, account B');

    // Space is back: both accounts write again, and uploads too, without a restart.
    freeDisk(filler);
    filler = undefined;
    for (const key of [KEY_A, KEY_B]) {
      const answer = await postWebhook(child, 2000, key);
      if (judge(into, answer, 'a webhook once space is back') === 'stored')
        acknowledged[key]!.push((answer as Answer).body.url!);
      else count(into, 'wrong', 'a webhook write still refused once space was back');
    }
    const upload = await call(child, '/agreements', { method: 'POST', body: validFormData() }, KEY_A);
    if (judge(into, upload, 'an upload once space is back') !== 'stored')
      count(into, 'wrong', 'an upload still refused once space was back');

    // kill -9 and a restart: exactly what was acknowledged.
    await killChild(child);
    child = await startChild(dataDir);
    await expectListed(into, child, KEY_A, acknowledged[KEY_A]!, 'after kill -9, account A');
    await expectListed(into, child, KEY_B, acknowledged[KEY_B]!, 'after kill -9, account B');
    into.notes.push(
      `${uploads} uploads filled the disk; ${acknowledged[KEY_A]!.length + acknowledged[KEY_B]!.length} webhooks acknowledged, every other write answered 507`,
    );
  } finally {
    if (filler !== undefined) freeDisk(filler);
    if (child !== undefined) await killChild(child).catch(() => {});
    mounted.unmount();
  }
}
