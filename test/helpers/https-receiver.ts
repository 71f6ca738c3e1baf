import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { errorMessage } from '../../src/errors.js';

export interface HttpsReceiver {
  port: number;
  /** The receiver's self-signed certificate (PEM file): trust it with NODE_EXTRA_CA_CERTS. */
  certificate: string;
  close(): Promise<void>;
}

/**
 * An https receiver on 127.0.0.1 answering every request 202, with a certificate made by openssl
 * for `localhost` and 127.0.0.1; `null`, with the reason printed, where openssl is missing.
 */
export async function startHttpsReceiver(what: string): Promise<HttpsReceiver | null> {
  const dir = mkdtempSync(join(tmpdir(), 'portal-tls-'));
  try {
    execFileSync(
      'openssl',
      [
        'req',
        '-x509',
        '-newkey',
        'ec',
        '-pkeyopt',
        'ec_paramgen_curve:prime256v1',
        '-nodes',
        '-days',
        '1',
        '-keyout',
        join(dir, 'key.pem'),
        '-out',
        join(dir, 'cert.pem'),
        '-subj',
        '/CN=localhost',
        '-addext',
        'subjectAltName=DNS:localhost,IP:127.0.0.1',
      ],
      { stdio: 'ignore' },
    );
  } catch (error) {
    rmSync(dir, { recursive: true, force: true });
    console.log(`  skipped: ${what} needs openssl to make a certificate (${errorMessage(error)})`);
    return null;
  }
  const server = https.createServer(
    { key: readFileSync(join(dir, 'key.pem')), cert: readFileSync(join(dir, 'cert.pem')) },
    (req, res) => {
      req.resume();
      req.on('end', () => res.writeHead(202).end());
    },
  );
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    certificate: join(dir, 'cert.pem'),
    close: async () => {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
