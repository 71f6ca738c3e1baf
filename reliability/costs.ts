/**
 * Costs a tenant or a signer can make the process pay: hostile signature images (decoder crashes,
 * decompression bombs) and filters within every limit that are costly to evaluate. Each request is
 * timed end to end on the in-process portal: its event loop serves the request, so a stall shows
 * as a slow answer. A request over `STALL_MS`, a 5xx, or a process that died is counted.
 */
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { SIGNER, validFormData } from '../test/helpers/agreements.js';
import { HOSTILE_IMAGES } from '../test/helpers/hostile-images.js';
import { KEY_A } from '../test/helpers/server.js';
import { healthy, type Target } from './target.js';
import { check, count, row, type Row } from './tally.js';

const SECTION = 'costs';
/** The longest the event loop may be held by one hostile request. */
const STALL_MS = 250;
const AUTH = { authorization: `Bearer ${KEY_A}` };

/** Runs `request`, measuring the event loop's longest stall meanwhile and the RSS it added. */
async function measured(
  request: () => Promise<Response>,
): Promise<{ status: number; body: string; stallMs: number; rssMiB: number }> {
  const delay = monitorEventLoopDelay({ resolution: 10 });
  const rss = process.memoryUsage().rss;
  delay.enable();
  const res = await request();
  const body = await res.text();
  delay.disable();
  return { status: res.status, body, stallMs: delay.max / 1e6, rssMiB: (process.memoryUsage().rss - rss) / 2 ** 20 };
}

function judge(
  into: Row,
  what: string,
  answer: { status: number; body: string; stallMs: number; rssMiB: number },
  status: number,
): void {
  const detail = `${what}: ${answer.status} in a stall of ${answer.stallMs.toFixed(0)} ms, RSS +${answer.rssMiB.toFixed(0)} MiB: ${answer.body.slice(0, 120)}`;
  if (answer.status >= 500) count(into, '5xx', detail);
  else check(into, answer.status === status && answer.stallMs < STALL_MS && answer.rssMiB < 100, detail);
}

export async function signatureImages(target: Target): Promise<void> {
  const into = row(SECTION, 'hostile signature images: at creation, through a link, then the certificate');
  const { app } = target;
  for (const [title, value] of HOSTILE_IMAGES) {
    const form = validFormData();
    form.set('signerSignatureData', value);
    judge(
      into,
      `created with ${title}`,
      await measured(() => fetch(`${app.url}/v1/agreements`, { method: 'POST', headers: AUTH, body: form })),
      400,
    );
  }
  const agreement = (await (
    await fetch(`${app.url}/v1/agreements`, {
      method: 'POST',
      headers: AUTH,
      body: validFormData({ signers: [SIGNER] }),
    })
  ).json()) as {
    id: string;
    signers: { id: string }[];
  };
  const made = await fetch(
    `${app.url}/v1/agreements/${agreement.id}/signers/${agreement.signers[0]!.id}/signing-link`,
    { method: 'POST', headers: AUTH },
  );
  const token = new URL(((await made.json()) as { link: string }).link).hash.slice(1);
  const sign = (signature: string) => () =>
    fetch(`${app.url}/v1/signing/sign`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ signature }),
    });
  for (const [title, value] of HOSTILE_IMAGES) judge(into, `signed with ${title}`, await measured(sign(value)), 400);
  judge(
    into,
    'the certificate of the still open agreement',
    await measured(() => fetch(`${app.url}/v1/agreements/${agreement.id}/certificate`, { headers: AUTH })),
    409,
  );
  check(into, await healthy(app.url), 'the server answers afterwards');
}

/** Objects with four keys that differ only in the last: the most work a deep comparison can be made to do per pair. */
const item = (last: string) => ({ a: 0, b: 0, c: 0, d: last });

export async function filterCosts(target: Target): Promise<void> {
  const into = row(SECTION, 'filters within every limit against events with 1,000-item arrays');
  const { app, portal } = { app: target.app, portal: target.app.portal };
  const data = { items: Array.from({ length: 1000 }, () => item('x')) };
  for (let i = 0; i < 20; i++) await portal.events.publish('acct_a', 'customer-created', data);
  // Under 8,192 characters and 50 clauses: lists of 100 objects (the most a list takes), none found.
  const lists = Array.from({ length: 4 }, (_, list) => ({
    items: { $in: Array.from({ length: 100 }, (_, i) => item(`${list}${i}`)) },
  }));
  const filter = { $or: lists.map((one) => one) };
  while (JSON.stringify(filter).length > 8192) filter.$or.pop();
  const body = JSON.stringify({ type: 'customer-created', filter, limit: 20 });
  judge(
    into,
    `a dry run of a ${JSON.stringify(filter).length}-character filter over 20 events`,
    await measured(() =>
      fetch(`${app.url}/v1/webhooks/dry-run`, {
        method: 'POST',
        headers: { ...AUTH, 'content-type': 'application/json' },
        body,
      }),
    ),
    200,
  );
  const hooks = [];
  // 49 beside the one the target made: the most an account may have.
  for (let i = 0; i < 49; i++)
    hooks.push(
      await portal.webhooks.create('acct_a', {
        type: 'customer-created',
        url: `https://hooks.example.com/f${i}`,
        filter,
      }),
    );
  const started = process.hrtime.bigint();
  const delay = monitorEventLoopDelay({ resolution: 10 });
  delay.enable();
  await portal.events.publish('acct_a', 'customer-created', data);
  delay.disable();
  const ms = Number(process.hrtime.bigint() - started) / 1e6;
  check(
    into,
    delay.max / 1e6 < STALL_MS && ms < STALL_MS,
    `one event to 49 such webhooks: ${ms.toFixed(0)} ms, longest stall ${(delay.max / 1e6).toFixed(0)} ms`,
  );
  for (const hook of hooks) await portal.webhooks.delete('acct_a', hook.id);
  check(into, await healthy(app.url), 'the server answers afterwards');
}
