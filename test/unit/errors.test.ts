import { readFileSync } from 'node:fs';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { ERRORS, HttpError, PortalError, type ErrorCode } from '../../src/index.js';
import { refusal, renderError } from '../../src/http/render-error.js';
import { silentLogger } from '../../src/shared/logger.js';

const codes = Object.keys(ERRORS) as ErrorCode[];
const doc = readFileSync(new URL('../../../docs/http-api.md', import.meta.url), 'utf8');
/** The rows of the "Error codes" table: code → status as documented. */
const documented = new Map(
  [...doc.matchAll(/^\| `([A-Z_]+)` \| (\d{3}) \|/gm)].map((match) => [match[1]!, Number(match[2])] as const),
);

test('every code of the catalogue is documented in docs/http-api.md, with its status', () => {
  for (const code of codes) {
    assert.ok(documented.has(code), `${code} is not in the error codes table of docs/http-api.md`);
    assert.is(documented.get(code), ERRORS[code].status, `${code}: the documented status differs from the catalogue's`);
  }
});

test('the documentation lists no code the catalogue does not have', () => {
  for (const code of documented.keys())
    assert.ok(code in ERRORS, `docs/http-api.md lists ${code}, which the catalogue lacks`);
});

test('PortalError takes status, message and headers from the catalogue; HttpError is the same class', () => {
  const error = new PortalError('METHOD_NOT_ALLOWED', 'PUT', ['GET', 'DELETE']);
  assert.instance(error, HttpError);
  assert.instance(error, Error);
  assert.is(error.code, 'METHOD_NOT_ALLOWED');
  assert.is(error.status, 405);
  assert.is(error.message, 'Method PUT is not allowed here; allowed: GET, DELETE.');
  assert.equal(error.headers, { allow: 'GET, DELETE' });
});

test('every message is one sentence of its own, for any arguments', () => {
  for (const code of codes) {
    const template = ERRORS[code].message as (...args: unknown[]) => string;
    const message = template('x', ['y'], 3);
    assert.type(message, 'string');
    assert.ok(message.length > 0 && message.length < 300, `${code}: "${message}"`);
  }
});

test('the renderer: catalogue errors as themselves, faults of ours and strangers as a plain 500', () => {
  const logged: string[] = [];
  const logger = {
    ...silentLogger,
    warn: (_: object, message?: string) => logged.push(`warn ${message}`),
    error: (_: object, message?: string) => logged.push(`error ${message}`),
  };
  assert.equal(renderError(new PortalError('WEBHOOK_NOT_FOUND', 'wbh_1'), logger, 'r1'), {
    status: 404,
    body: '{"message":"No webhook wbh_1 in this account."}',
    headers: {},
  });
  const unavailable = renderError(new PortalError('STORAGE_UNAVAILABLE', 'The database is away', 3), logger, 'r2');
  assert.equal(unavailable, {
    status: 503,
    body: '{"message":"The database is away"}',
    headers: { 'retry-after': '3' },
  });
  const internal = { status: 500, body: '{"message":"Internal error"}', headers: {} };
  assert.equal(renderError(new PortalError('RECORD_EXISTS', 'wbh_1'), logger, 'r3'), internal);
  assert.equal(renderError(new TypeError('secret detail'), logger, 'r4'), internal);
  assert.equal(logged, ['warn The database is away', 'error unexpected error', 'error unexpected error']);
});

test('a refusal answers exactly what the renderer makes of the same PortalError, for every exposed code', () => {
  for (const code of codes) {
    const args = ['wbh_1', ['GET'], 3] as never[];
    const error = new (PortalError as new (code: ErrorCode, ...args: never[]) => PortalError)(code, ...args);
    if (!error.expose) continue;
    const rendered = renderError(error, silentLogger, 'r');
    const reply = (refusal as (code: ErrorCode, ...args: never[]) => ReturnType<typeof refusal>)(code, ...args);
    assert.equal({ status: reply.status, body: reply.json, headers: reply.headers }, rendered, code);
  }
});

test.run();
