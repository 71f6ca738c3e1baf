import { randomBytes } from 'node:crypto';

/**
 * The keys an example app serves with: `PORTAL_API_KEYS` (comma-separated), or else one key made
 * now and printed as `API key: <key>`, as the standalone server does, so that the example runs
 * with no setup. The app keeps records in memory, so a new key each start loses nothing.
 */
export function exampleApiKeys(): string[] {
  const keys = (process.env.PORTAL_API_KEYS ?? '')
    .split(',')
    .map((key) => key.trim())
    .filter(Boolean);
  if (keys.length > 0) return keys;
  const key = randomBytes(32).toString('base64url');
  process.stdout.write(`API key: ${key}\n`);
  return [key];
}
