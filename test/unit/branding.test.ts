import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { createBranding } from '../../src/domain/branding.js';
import type { Logger } from '../../src/shared/logger.js';

/** The branding option: a static one checked at start, a function's answers each time, a host's bug never in a signer's way. */

function recordingLogger(): Logger & { warnings: unknown[] } {
  const warnings: unknown[] = [];
  const ignore = () => {};
  return {
    warnings,
    warn: (fields: unknown) => warnings.push(fields),
    info: ignore,
    error: ignore,
    debug: ignore,
  } as never;
}

test('a static branding is checked at start: each malformed field is a TypeError naming it', () => {
  for (const [branding, message] of [
    [{ name: '' }, /branding\.name must be a non-empty string/],
    [{ name: 'A', logoUrl: 'http://cdn.example/logo.png' }, /branding\.logoUrl must be an https: URL/],
    [{ name: 'A', logoUrl: 'data:text/html;base64,PHNjcmlwdD4=' }, /branding\.logoUrl/],
    [{ name: 'A', logoUrl: `data:image/png;base64,${'A'.repeat(100_000)}` }, /branding\.logoUrl/],
    [{ name: 'A', accentColor: 'red' }, /branding\.accentColor must be a colour as #rrggbb/],
    [{ name: 'A', supportEmail: 'nobody' }, /branding\.supportEmail must be an e-mail address/],
  ] as const) {
    assert.throws(() => createBranding(branding as never, recordingLogger()), message);
  }
});

test('a static branding answers every account, its colour in lower case, absent fields null', async () => {
  const of = createBranding(
    { name: ' Acme ', logoUrl: 'https://cdn.example/logo.png', accentColor: '#AABBCC' },
    recordingLogger(),
  );
  assert.equal(await of('acct_a'), {
    name: 'Acme',
    logoUrl: 'https://cdn.example/logo.png',
    accentColor: '#aabbcc',
    supportEmail: null,
  });
  assert.is(await createBranding(undefined, recordingLogger())('acct_a'), null);
});

test("a function's malformed answer or failure is logged and read as no branding", async () => {
  const logger = recordingLogger();
  const of = createBranding(async (accountId) => {
    if (accountId === 'bad') return { name: 'X', accentColor: 'javascript:alert(1)' };
    if (accountId === 'throws') throw new Error('lookup failed');
    return { name: `Company of ${accountId}` };
  }, logger);
  assert.is((await of('acct_a'))?.name, 'Company of acct_a');
  assert.is(await of('bad'), null);
  assert.is(await of('throws'), null);
  assert.is(logger.warnings.length, 2);
  assert.match(JSON.stringify(logger.warnings), /accentColor must be a colour/);
  assert.match(JSON.stringify(logger.warnings), /lookup failed/);
});

test.run();
