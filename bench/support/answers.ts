/** The check that every contender of a comparison gives the portal's answer, byte for byte. */

/** Header names every answer carries that no server chooses: node:http's own. */
const TRANSPORT_HEADERS = new Set(['date', 'connection', 'keep-alive']);

/**
 * Fetches one answer from every contender's url (the first: the portal's, the reference) and fails
 * loudly unless each has the portal's status, header names and body bytes, and each echoes a request id it was sent and makes one when
 * it was sent none: a baseline that did less work would make every ratio flattering.
 */
export async function checkSameAnswers(
  label: string,
  urls: Map<string, string>,
  headers: Record<string, string>,
): Promise<void> {
  type Answer = { status: number; names: string; body: string; echoed: boolean; made: boolean };
  const answers = new Map<string, Answer>();
  for (const [name, url] of urls) {
    const sent = await fetch(url, { headers: { ...headers, 'x-request-id': 'bench.check-1' } });
    const body = Buffer.from(await sent.arrayBuffer()).toString('base64');
    const bare = await fetch(url, { headers });
    await bare.arrayBuffer();
    const names = [...sent.headers.keys()]
      .filter((header) => !TRANSPORT_HEADERS.has(header))
      .sort()
      .join(', ');
    const made = /^[0-9a-f-]{36}$/.test(bare.headers.get('x-request-id') ?? '');
    answers.set(name, {
      status: sent.status,
      names,
      body,
      echoed: sent.headers.get('x-request-id') === 'bench.check-1',
      made,
    });
  }
  const [[reference, expected], ...others] = [...answers] as [[string, Answer], ...[string, Answer][]];
  const problems: string[] = [];
  for (const [name, answer] of answers) {
    if (!answer.echoed) problems.push(`${name} does not echo X-Request-Id`);
    if (!answer.made) problems.push(`${name} makes no X-Request-Id (a UUID) when the request has none`);
  }
  for (const [name, answer] of others) {
    if (answer.status !== expected.status)
      problems.push(`${name} answers ${answer.status}, ${reference} ${expected.status}`);
    if (answer.names !== expected.names)
      problems.push(`${name} sends headers [${answer.names}], ${reference} [${expected.names}]`);
    if (answer.body !== expected.body) {
      const text = (base64: string) => Buffer.from(base64, 'base64').toString().slice(0, 300);
      problems.push(
        `${name} sends other body bytes than ${reference}:\n    ${text(answer.body)}\n    ${text(expected.body)}`,
      );
    }
  }
  if (problems.length > 0) throw new Error(`${label}: the contenders do not answer alike:\n  ${problems.join('\n  ')}`);
}
