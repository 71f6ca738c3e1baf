import * as uvu from 'uvu';
import * as assert from 'uvu/assert';
import { execFileSync, spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * A test PKI made with openssl: a CA, a sealing certificate it issued (as a PKCS#12 file and as
 * PEM with its key), and a timestamp authority (`openssl ts -reply` behind a small HTTP server);
 * and an NSS database trusting the CA, for `pdfsig -nssdir`. `pkiMissing` says which tool is not
 * installed, for the tests' printed skip reason.
 */
export function pkiMissing(): string | null {
  for (const [tool, args, pkg] of [
    ['openssl', ['version'], 'openssl'],
    ['pdfsig', ['-v'], 'poppler-utils'],
    ['certutil', ['-H'], 'libnss3-tools'],
    ['qpdf', ['--version'], 'qpdf'],
    ['pdftotext', ['-v'], 'poppler-utils'],
  ] as const) {
    if (spawnSync(tool, args, { stdio: 'ignore' }).error !== undefined)
      return `${tool} is not installed (Debian: apt-get install ${pkg})`;
  }
  return null;
}

export interface TestPki {
  dir: string;
  p12: Buffer;
  password: string;
  /** The sealing certificate then the CA, PEM. */
  chainPem: string;
  /** The sealing key, PEM (what an HSM would hold). */
  keyPem: string;
  nssDir: string;
  close(): void;
}

const run = (dir: string, args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' });

/**
 * A test PKI in a directory of its own. Under `npm test` the keys are made once for the run: the
 * first file to ask makes them and leaves a copy in the run's directory (`CP_TEST_RUN_DIR`), and
 * each file after it copies that (three RSA keys and an NSS database cost a second of CPU).
 */
export function makePki(): TestPki {
  const dir = mkdtempSync(join(tmpdir(), 'portal-pki-'));
  const shared = process.env.CP_TEST_RUN_DIR === undefined ? undefined : join(process.env.CP_TEST_RUN_DIR, 'pki');
  if (shared !== undefined && existsSync(shared)) {
    cpSync(shared, dir, { recursive: true });
  } else {
    generatePki(dir);
    if (shared !== undefined) {
      // Copied whole under a name of its own, then renamed into place: a file reading it sees all or nothing.
      const part = `${shared}-${process.pid}`;
      cpSync(dir, part, { recursive: true });
      try {
        renameSync(part, shared);
      } catch {
        rmSync(part, { recursive: true, force: true }); // another file's copy got there first
      }
    }
  }
  return {
    dir,
    p12: readFileSync(join(dir, 'seal.p12')),
    password: PKI_PASSWORD,
    chainPem: readFileSync(join(dir, 'seal.pem'), 'utf8') + readFileSync(join(dir, 'ca.pem'), 'utf8'),
    keyPem: readFileSync(join(dir, 'seal.key'), 'utf8'),
    nssDir: join(dir, 'nss'),
    close: () => rmSync(dir, { recursive: true, force: true }),
  };
}

const PKI_PASSWORD = 'test-seal-password';

function generatePki(dir: string): void {
  run(dir, [
    'req',
    '-x509',
    '-newkey',
    'rsa:2048',
    '-nodes',
    '-keyout',
    'ca.key',
    '-out',
    'ca.pem',
    '-days',
    '3650',
    '-subj',
    '/CN=Portal Test CA',
    '-addext',
    'basicConstraints=critical,CA:TRUE',
    '-addext',
    'keyUsage=critical,keyCertSign,cRLSign',
  ]);
  const issue = (name: string, subject: string, extensions: string) => {
    run(dir, [
      'req',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-keyout',
      `${name}.key`,
      '-out',
      `${name}.csr`,
      '-subj',
      subject,
    ]);
    writeFileSync(join(dir, `${name}.ext`), extensions);
    run(dir, [
      'x509',
      '-req',
      '-in',
      `${name}.csr`,
      '-CA',
      'ca.pem',
      '-CAkey',
      'ca.key',
      '-CAcreateserial',
      '-out',
      `${name}.pem`,
      '-days',
      '3650',
      '-extfile',
      `${name}.ext`,
    ]);
  };
  issue(
    'seal',
    '/CN=Portal Seal/O=Acme Ltd',
    'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,nonRepudiation\n',
  );
  issue(
    'tsa',
    '/CN=Portal Test TSA',
    'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=critical,timeStamping\n',
  );
  run(dir, [
    'pkcs12',
    '-export',
    '-inkey',
    'seal.key',
    '-in',
    'seal.pem',
    '-certfile',
    'ca.pem',
    '-out',
    'seal.p12',
    '-passout',
    `pass:${PKI_PASSWORD}`,
  ]);
  writeFileSync(join(dir, 'tsaserial'), '01\n');
  writeFileSync(
    join(dir, 'tsa.cnf'),
    [
      '[ tsa ]',
      'default_tsa = tsa_config',
      '[ tsa_config ]',
      'serial = ./tsaserial',
      'crypto_device = builtin',
      'signer_digest = sha256',
      'default_policy = 1.2.3.4.1',
      'digests = sha256, sha384, sha512',
      'accuracy = secs:1',
      'ordering = yes',
      'tsa_name = yes',
      'ess_cert_id_chain = no',
      'ess_cert_id_alg = sha256',
      '',
    ].join('\n'),
  );
  const nssDir = join(dir, 'nss');
  mkdirSync(nssDir);
  execFileSync('certutil', ['-N', '-d', `sql:${nssDir}`, '--empty-password'], { stdio: 'pipe' });
  execFileSync(
    'certutil',
    ['-A', '-d', `sql:${nssDir}`, '-n', 'portal-test-ca', '-t', 'CT,C,C', '-i', join(dir, 'ca.pem')],
    { stdio: 'pipe' },
  );
}

/** An RFC 3161 timestamp authority on 127.0.0.1: each query answered by `openssl ts -reply`. */
export async function startTsa(pki: TestPki): Promise<{ url: string; stamped: number; close(): Promise<void> }> {
  const state = { url: '', stamped: 0, close: async () => {} };
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const work = mkdtempSync(join(pki.dir, 'ts-'));
      try {
        writeFileSync(join(work, 'q.tsq'), Buffer.concat(chunks));
        run(pki.dir, [
          'ts',
          '-reply',
          '-config',
          'tsa.cnf',
          '-queryfile',
          join(work, 'q.tsq'),
          '-signer',
          'tsa.pem',
          '-inkey',
          'tsa.key',
          '-chain',
          'ca.pem',
          '-out',
          join(work, 'r.tsr'),
        ]);
        const reply = readFileSync(join(work, 'r.tsr'));
        state.stamped++;
        res.writeHead(200, { 'content-type': 'application/timestamp-reply', 'content-length': reply.length });
        res.end(reply);
      } catch (error) {
        res.writeHead(500);
        res.end(String((error as { stderr?: Buffer }).stderr ?? error));
      } finally {
        rmSync(work, { recursive: true, force: true });
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  state.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/tsa`;
  state.close = () => new Promise((resolve) => server.close(() => resolve()));
  return state;
}

/** `pdfsig`'s report on `pdf`, checked against the NSS database that trusts the test CA. */
export function pdfsig(pki: TestPki, pdf: Buffer): string {
  const file = join(pki.dir, `check-${process.hrtime.bigint()}.pdf`);
  writeFileSync(file, pdf);
  try {
    return spawnSync('pdfsig', ['-nssdir', `sql:${pki.nssDir}`, file], { encoding: 'utf8' }).stdout;
  } finally {
    rmSync(file, { force: true });
  }
}

/** `qpdf --check` of `pdf`: its exit status (0 clean, 3 warnings) and what it said. */
export function qpdfCheck(pki: TestPki, pdf: Buffer): { status: number | null; output: string } {
  const file = join(pki.dir, `qpdf-${process.hrtime.bigint()}.pdf`);
  writeFileSync(file, pdf);
  try {
    const result = spawnSync('qpdf', ['--check', file], { encoding: 'utf8' });
    return { status: result.status, output: result.stdout + result.stderr };
  } finally {
    rmSync(file, { force: true });
  }
}

/** The text of `pdf`, as pdftotext reads it. */
export function pdfText(pki: TestPki, pdf: Buffer): string {
  const file = join(pki.dir, `text-${process.hrtime.bigint()}.pdf`);
  writeFileSync(file, pdf);
  try {
    return execFileSync('pdftotext', ['-layout', file, '-'], { encoding: 'utf8' });
  } finally {
    rmSync(file, { force: true });
  }
}

/** The text pdftotext reads inside a box of one page, the box in percent of the page from its top-left corner (as a field's). */
export function pdfTextIn(
  pki: TestPki,
  pdf: Buffer,
  page: number,
  box: { x: number; y: number; width: number; height: number },
): string {
  const file = join(pki.dir, `box-${process.hrtime.bigint()}.pdf`);
  writeFileSync(file, pdf);
  try {
    const size = execFileSync('pdfinfo', ['-f', String(page), '-l', String(page), file], { encoding: 'utf8' });
    const [, width, height] = /Page\s+\d+ size:\s+([\d.]+) x ([\d.]+)/.exec(size) ?? [];
    // pdftotext crops the page as shown: a page turned a quarter has its sides swapped.
    const turned = /Page\s+\d+ rot:\s+(90|270)\b/.test(size);
    const w = Number(turned ? height : width);
    const h = Number(turned ? width : height);
    const crop = [box.x * w, box.y * h, box.width * w, box.height * h].map((value) => String(Math.round(value / 100)));
    const [x, y, cw, ch] = crop as [string, string, string, string];
    return execFileSync(
      'pdftotext',
      ['-f', String(page), '-l', String(page), '-r', '72', '-x', x, '-y', y, '-W', cw, '-H', ch, file, '-'],
      {
        encoding: 'utf8',
      },
    );
  } finally {
    rmSync(file, { force: true });
  }
}

/** The number of pages of `pdf`, as qpdf counts them. */
export function pageCount(pki: TestPki, pdf: Buffer): number {
  const file = join(pki.dir, `pages-${process.hrtime.bigint()}.pdf`);
  writeFileSync(file, pdf);
  try {
    return Number(execFileSync('qpdf', ['--show-npages', file], { encoding: 'utf8' }).trim());
  } finally {
    rmSync(file, { force: true });
  }
}

/** How many pixels are dark (below half grey) in a region of one page rendered at 72 dpi, the region in points from the top left. */
export function darkPixels(
  pki: TestPki,
  pdf: Buffer,
  page: number,
  region: { x: number; y: number; width: number; height: number },
): number {
  const file = join(pki.dir, `ink-${process.hrtime.bigint()}.pdf`);
  writeFileSync(file, pdf);
  try {
    const [x, y, w, h] = [region.x, region.y, region.width, region.height].map((value) => String(Math.round(value)));
    const pgm = execFileSync('pdftoppm', [
      '-gray',
      '-r',
      '72',
      '-f',
      String(page),
      '-l',
      String(page),
      '-x',
      x!,
      '-y',
      y!,
      '-W',
      w!,
      '-H',
      h!,
      file,
    ]);
    // A binary PGM: "P5\n<w> <h>\n255\n" then one byte a pixel.
    const header = /^P5\s+(\d+)\s+(\d+)\s+255\s/.exec(pgm.subarray(0, 40).toString('latin1'))!;
    return [...pgm.subarray(header[0].length)].filter((value) => value < 128).length;
  } finally {
    rmSync(file, { force: true });
  }
}

/**
 * The test PKI for a file of suites: `run` makes it in a setup suite (or prints why it cannot),
 * runs the suites, and after the last releases it and whatever `close` holds.
 */
export function testPkiFor(what: string) {
  const missing = pkiMissing();
  let made: TestPki | undefined;
  return {
    missing,
    get pki(): TestPki {
      return made!;
    },
    run(suites: ReturnType<typeof uvu.suite>[], close: () => Promise<void>): void {
      const setup = uvu.suite(`${what}: setup`);
      setup.before(() => {
        if (missing === null) made = makePki();
        else console.log(`SKIP ${what}: ${missing}`);
      });
      setup('the test PKI is made', () => {
        if (missing === null) assert.ok(made!.p12.length > 0);
      });
      suites[suites.length - 1]!.after(async () => {
        made?.close();
        await close();
      });
      setup.run();
      for (const one of suites) one.run();
    },
  };
}
