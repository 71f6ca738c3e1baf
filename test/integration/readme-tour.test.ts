import { spawn } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import net, { type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { logLine, startNode } from '../helpers/process.js';

const root = path.resolve(fileURLToPath(import.meta.url), '../../../..');
const standalone = path.join(root, 'dist/examples/standalone.js');

/** The `sh` blocks of the README's curl tour, in order. */
async function tourBlocks(): Promise<string[]> {
  const readme = await readFile(path.join(root, 'README.md'), 'utf8');
  const start = readme.indexOf('## A tour with curl');
  const section = readme.slice(start, readme.indexOf('\n## ', start + 1));
  return [...section.matchAll(/```sh\n([\s\S]*?)```/g)].map((match) => match[1]!);
}

async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** curl prints each JSON answer without a line break after it: the answers one by one, then the rest. */
function answers(output: string): string[] {
  const found: string[] = [];
  let depth = 0;
  let start = 0;
  let inString = false;
  for (let i = 0; i < output.length; i++) {
    const char = output[i];
    if (inString) {
      if (char === '\\') i++;
      else if (char === '"') inString = false;
    } else if (char === '"') inString = true;
    else if (char === '{' && depth++ === 0) start = i;
    else if (char === '}' && --depth === 0) {
      found.push(output.slice(start, i + 1));
      start = i + 1;
    }
  }
  return [...found, output.slice(start).trim()];
}

/** Runs `script` in bash in `cwd`; resolves its stdout, or rejects with its stderr. */
function bash(script: string, cwd: string): { stdout: () => string; done: Promise<string>; kill: () => void } {
  const child = spawn('bash', ['-c', script], {
    cwd,
    env: { ...process.env, PATH: `${path.dirname(process.execPath)}:${process.env.PATH}` },
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk) => (stdout += chunk));
  child.stderr.on('data', (chunk) => (stderr += chunk));
  const done = new Promise<string>((resolve, reject) =>
    child.once('close', (code) =>
      code === 0 ? resolve(stdout) : reject(new Error(`exit ${code}\n${stdout}\n${stderr}`)),
    ),
  );
  return { stdout: () => stdout, done, kill: () => child.kill() };
}

test("the README's curl tour runs as written against the standalone server", async () => {
  const [receiverBlock, startBlock, ...steps] = await tourBlocks();
  assert.ok(receiverBlock?.includes('.listen(4000)'), 'the first block starts the receiver');
  assert.match(startBlock!, /^PORTAL_ALLOW_PRIVATE_NETWORKS=1 npm start/, 'the second starts the server');
  assert.is(steps.length, 6);

  const work = await mkdtemp(path.join(tmpdir(), 'portal-tour-'));
  const [receiverPort, serverPort] = [await freePort(), await freePort()];
  const ports = (text: string) =>
    text.replaceAll('4000', String(receiverPort)).replaceAll('localhost:3000', `localhost:${serverPort}`);
  const receiver = bash(ports(receiverBlock!), work);
  receiver.done.catch(() => {}); // it runs until killed
  // `npm start` builds, then runs this script: the test suite has built it already.
  const server = startNode(standalone, {
    PORTAL_ALLOW_PRIVATE_NETWORKS: '1',
    PORT: String(serverPort),
    DATA_DIR: path.join(work, 'data'),
    PORTAL_API_KEYS: '',
  });
  try {
    await server.waitFor((line) => logLine(line)?.msg === 'listening');
    const out = answers(await bash(`set -e\n${ports(steps.join('\n'))}`, work).done);

    const [webhook, testCall, file, listing, agreement, downloaded] = out;
    assert.match(
      webhook!,
      /^\{"id":"wbh_\w+","type":"agreement-created","url":"http:\/\/localhost:\d+\/hooks","secret":"whsec_/,
    );
    assert.is(JSON.parse(testCall!).webhookId, JSON.parse(webhook!).id);
    assert.match(
      file!,
      /^\{"id":"fsf_\w+","type":"file","name":"terms.txt","size":19,"mime":"text\/plain","fileShareId":null,/,
    );
    assert.ok(listing!.includes(JSON.parse(file!).id), 'the directory lists the file');
    assert.is(JSON.parse(agreement!).status, 'sent');
    assert.is(downloaded, 'Terms of the lease');

    const printed = () =>
      ['"type":"webhook.test"', '"type":"agreement-created"'].every((type) => receiver.stdout().includes(type));
    for (let i = 0; !printed(); i++) {
      if (i === 400)
        throw new Error(`the receiver printed no webhook.test and agreement-created calls:\n${receiver.stdout()}`);
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
    assert.ok(receiver.stdout().includes(JSON.parse(agreement!).id), 'the call carries the agreement');
  } finally {
    receiver.kill();
    server.child.kill('SIGTERM');
    await server.exited;
    await rm(work, { recursive: true, force: true });
  }
});

test.run();
