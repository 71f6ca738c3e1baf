import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * A SoftHSM2 token (Debian `softhsm2`) holding one RSA key, used through PKCS#11 (`pkcs11js`): a
 * sealing key the portal never sees, as an HSM keeps it. The key is imported from PEM here only
 * because the test must also issue its certificate; the portal gets the certificate and a `sign`
 * that asks the token.
 */

const LIBRARY = ['/usr/lib/softhsm/libsofthsm2.so', '/usr/lib/x86_64-linux-gnu/softhsm/libsofthsm2.so'].find((path) =>
  existsSync(path),
);
const PIN = '1234';
/** The DER prefix of a SHA-256 DigestInfo (RFC 8017 §9.2): CKM_RSA_PKCS signs it with the digest after it. */
const DIGEST_INFO_SHA256 = Buffer.from('3031300d060960864801650304020105000420', 'hex');

type Pkcs11Module = typeof import('pkcs11js');

export function softHsmMissing(): string | null {
  if (LIBRARY === undefined) return 'SoftHSM2 is not installed (Debian: apt-get install softhsm2)';
  if (spawnSync('softhsm2-util', ['--version'], { stdio: 'ignore' }).error !== undefined)
    return 'softhsm2-util is not installed (Debian: apt-get install softhsm2)';
  try {
    createRequire(import.meta.url)('pkcs11js');
  } catch (error) {
    return `the PKCS#11 binding pkcs11js is not built (${(error as Error).message.split('\n')[0]}); npm ci builds it`;
  }
  return null;
}

export interface SoftHsmKey {
  /** Signs `digest` (SHA-256, 32 bytes) on the token with CKM_RSA_PKCS over its DigestInfo: the `sealing.sign` contract. */
  sign(digest: Buffer, algorithm: string): Promise<Buffer>;
  /** How many signatures the token made. */
  readonly signatures: number;
  close(): void;
}

/** A fresh token with `keyPem` (PKCS#8) imported as its private key `seal`, opened and logged in. */
export function softHsmKey(keyPem: string): SoftHsmKey {
  const dir = mkdtempSync(join(tmpdir(), 'portal-softhsm-'));
  const tokens = join(dir, 'tokens');
  mkdirSync(tokens, { recursive: true });
  const conf = join(dir, 'softhsm2.conf');
  writeFileSync(conf, `directories.tokendir = ${tokens}\nobjectstore.backend = file\nlog.level = ERROR\n`);
  // The library reads its configuration from the environment when it is initialised.
  process.env.SOFTHSM2_CONF = conf;
  const env = { ...process.env, SOFTHSM2_CONF: conf };
  execFileSync('softhsm2-util', ['--init-token', '--free', '--label', 'portal', '--pin', PIN, '--so-pin', '5678'], {
    env,
    stdio: 'pipe',
  });
  const keyFile = join(dir, 'seal.key');
  writeFileSync(keyFile, keyPem);
  execFileSync(
    'softhsm2-util',
    ['--import', keyFile, '--token', 'portal', '--label', 'seal', '--id', '01', '--pin', PIN],
    { env, stdio: 'pipe' },
  );
  rmSync(keyFile);

  const pkcs11js = createRequire(import.meta.url)('pkcs11js') as Pkcs11Module;
  const module = new pkcs11js.PKCS11();
  module.load(LIBRARY!);
  module.C_Initialize();
  const slot = module.C_GetSlotList(true).find((one) => module.C_GetTokenInfo(one).label.trim() === 'portal');
  if (slot === undefined) throw new Error('the SoftHSM token "portal" was not found');
  const session = module.C_OpenSession(slot, pkcs11js.CKF_SERIAL_SESSION | pkcs11js.CKF_RW_SESSION);
  module.C_Login(session, pkcs11js.CKU_USER, PIN);
  module.C_FindObjectsInit(session, [
    { type: pkcs11js.CKA_CLASS, value: pkcs11js.CKO_PRIVATE_KEY },
    { type: pkcs11js.CKA_LABEL, value: 'seal' },
  ]);
  const [key] = module.C_FindObjects(session, 1);
  module.C_FindObjectsFinal(session);
  if (key === undefined) throw new Error('the key "seal" was not found on the token');
  let signatures = 0;
  return {
    async sign(digest, algorithm) {
      if (algorithm !== 'RSA-SHA256') throw new Error(`the token holds an RSA key, not one for ${algorithm}`);
      module.C_SignInit(session, { mechanism: pkcs11js.CKM_RSA_PKCS }, key);
      const signature = module.C_Sign(session, Buffer.concat([DIGEST_INFO_SHA256, digest]), Buffer.alloc(512));
      signatures++;
      return Buffer.from(signature);
    },
    get signatures() {
      return signatures;
    },
    close() {
      try {
        module.C_Logout(session);
        module.C_CloseSession(session);
        module.C_Finalize();
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
  };
}
