import { request as httpRequest } from 'node:http';
import { routeTable } from '../../src/http/route-table.js';
import { readFile } from 'node:fs/promises';
import { Validator } from '@seriousme/openapi-schema-validator';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { memoryBlobs, memoryStorage, memoryTransport } from '../../adapters/memory/index.js';
import { openapi } from '../../src/index.js';
import { MAX_DOCUMENT_BYTES } from '../../src/domain/inputs.js';
import { atom } from '../../src/shared/time.js';
import { PNG_SIGNATURE, simplePdf, SIGNER, documentBytes, signer, validFormData } from '../helpers/agreements.js';
import { SIGNING_KEY_1, linkPath, withParam } from '../helpers/download.js';
import { createResponseChecker } from '../helpers/openapi.js';
import { KEY_A, KEY_B, type TestPortal, startPortal, withPortal } from '../helpers/server.js';
import { NEVER, manualClock } from '../helpers/webhooks.js';
import { recordingNotifier, until } from '../helpers/notifier.js';

const document = openapi as Record<string, any>;

test("the document is valid OpenAPI 3.1 by the specification's own schema", async () => {
  const validator = new Validator();
  const result = await validator.validate(structuredClone(document) as never);
  assert.ok(result.valid, JSON.stringify(result.errors));
  assert.is(validator.version, '3.1');
});

test('dist/openapi.json, the file the package ships, is the exported document', async () => {
  const text = await readFile(new URL('../../openapi.json', import.meta.url), 'utf8').catch(
    (error: NodeJS.ErrnoException) => {
      throw new Error(`dist/openapi.json is written by \`npm run build\`, not by tsc alone (${error.code})`);
    },
  );
  const file = JSON.parse(text);
  assert.equal(file, JSON.parse(JSON.stringify(document)));
});

test('the exported document is frozen: no importer can change it for the others', () => {
  assert.ok(Object.isFrozen(document) && Object.isFrozen(document.paths['/files'].get.responses));
  assert.throws(() => {
    (document.info as { version: string }).version = 'x';
  });
});

/** The route table the handler is built from; its routes only keep their services for their handlers, so stand-ins do. */
const table = routeTable({} as never, { extensions: true });
const apiRoutes = table.filter((route) => route.doc !== null);
const template = (path: string) => path.replace(/:(\w+)/g, '{$1}');

test('every route the handler registers is in the document, with each of its methods', () => {
  const undocumented: string[] = [];
  for (const route of apiRoutes) {
    for (const method of [route.method].flat()) {
      if (document.paths[template(route.path)]?.[method.toLowerCase()] === undefined)
        undocumented.push(`${method} ${route.path}`);
    }
  }
  assert.equal(undocumented, []);
  assert.is(apiRoutes.length, 48);
  // Outside the document: the signing page, HTML for a browser.
  assert.equal(
    table.filter((route) => route.doc === null).map((route) => route.path),
    ['/sign', '/sign/assets/:file'],
  );
});

test('each route refuses a query parameter its operation does not list, naming the ones it lists', async () => {
  await withPortal(async (app) => {
    for (const route of apiRoutes) {
      const method = [route.method].flat()[0]!;
      const parameters: any[] = document.paths[template(route.path)][method.toLowerCase()].parameters ?? [];
      const documented = parameters.filter((parameter) => parameter.in === 'query').map((parameter) => parameter.name);
      const path = route.path.replace(/:(\w+)/g, 'x');
      const res = await app.api(`${path}?unlisted=1`, { method, headers: { authorization: `Bearer ${KEY_A}` } });
      const known = documented.length === 0 ? 'this route takes none' : `this route takes ${documented.join(', ')}`;
      assert.equal(
        [res.status, ((await res.json()) as { message: string }).message],
        [400, `Unknown query parameter "unlisted": ${known}.`],
        `${method} ${route.path}`,
      );
    }
  });
});

test('every path with a GET lists its HEAD: the same statuses and headers, and no body', () => {
  const heads: string[] = [];
  for (const [template, item] of Object.entries<any>(document.paths)) {
    if (item.get === undefined) continue;
    assert.ok(item.head, `HEAD ${template}`);
    heads.push(template);
    // The signed download route writes its own HEAD (a GET may redirect, a HEAD never does).
    if (template !== '/downloads/{id}')
      assert.equal(Object.keys(item.head.responses), Object.keys(item.get.responses), template);
    for (const [status, answer] of Object.entries<any>(item.head.responses)) {
      const resolved = answer.$ref === undefined ? answer : document.components.responses[answer.$ref.split('/').pop()];
      assert.ok(resolved, `HEAD ${template} ${status}`);
      assert.is(resolved.content, undefined, `HEAD ${template} ${status} has no body`);
    }
  }
  assert.is(heads.length, 20);
});

test('the webhooks section describes the call of each event type: its body, and the signature headers', () => {
  assert.equal(Object.keys(document.webhooks), [
    'customer-created',
    'agreement-created',
    'agreement-signed',
    'agreement-viewed',
    'agreement-signer-signed',
    'agreement-declined',
    'agreement-expired',
    'agreement-reminder-due',
    'agreement-voided',
    'webhook.test',
  ]);
  for (const [type, item] of Object.entries<any>(document.webhooks)) {
    const call = item.post;
    assert.equal(call.security, [], 'a call carries no Authorization');
    const schema =
      document.components.schemas[call.requestBody.content['application/json'].schema.$ref.split('/').pop()];
    assert.equal(schema.required, ['id', 'type', 'createdAt', 'data']);
    assert.equal(schema.properties.type, { const: type });
    const headers = call.parameters.map(
      (parameter: any) => document.components.parameters[parameter.$ref.split('/').pop()],
    );
    assert.equal(
      headers.map((header: any) => [header.name, header.in, header.required]),
      [
        ['webhook-id', 'header', true],
        ['webhook-timestamp', 'header', true],
        ['webhook-signature', 'header', true],
        ['X-Webhook-Signature', 'header', true],
        ['User-Agent', 'header', true],
      ],
    );
    assert.ok(call.responses['2XX'] && call.responses['410'] && call.responses.default);
  }
});

test('the document: bearer auth everywhere but the signed download route, servers /v1, extensions marked', () => {
  assert.equal(document.servers, [{ url: '/v1', description: document.servers[0].description }]);
  assert.equal(document.components.securitySchemes.bearerAuth, {
    ...document.components.securitySchemes.bearerAuth,
    type: 'http',
    scheme: 'bearer',
  });
  assert.equal(document.security, [{ bearerAuth: [] }]);
  assert.equal(document.paths['/downloads/{id}'].get.security, []);
  const extensions: string[] = [];
  for (const [path, item] of Object.entries<any>(document.paths)) {
    for (const [method, operation] of Object.entries<any>(item)) {
      if (operation['x-extension'] === true) extensions.push(`${method.toUpperCase()} ${path}`);
    }
  }
  assert.equal(extensions.sort(), [
    'DELETE /agreements/{agreementId}',
    'DELETE /files/{entryId}',
    'DELETE /portal-sessions/{sessionId}',
    'DELETE /tickets/{ticketId}/message/{messageId}/attachment/{attachmentId}',
    'GET /agreements',
    'GET /agreements/{agreementId}',
    'GET /agreements/{agreementId}/audit',
    'GET /agreements/{agreementId}/certificate',
    'GET /agreements/{agreementId}/documents/{documentId}/download',
    'GET /agreements/{agreementId}/documents/{documentId}/signed',
    'GET /branding',
    'GET /event-types',
    'GET /files/{fileId}/download',
    'GET /signing',
    'GET /webhook-keys/{webhookId}',
    'GET /webhooks',
    'GET /webhooks/{webhookId}/deliveries',
    'GET /webhooks/{webhookId}/health',
    'GET /webhooks/{webhookId}/public-keys',
    'GET /webhooks/{webhookId}/stats',
    'HEAD /agreements',
    'HEAD /agreements/{agreementId}',
    'HEAD /agreements/{agreementId}/audit',
    'HEAD /agreements/{agreementId}/certificate',
    'HEAD /agreements/{agreementId}/documents/{documentId}/download',
    'HEAD /agreements/{agreementId}/documents/{documentId}/signed',
    'HEAD /branding',
    'HEAD /event-types',
    'HEAD /files/{fileId}/download',
    'HEAD /signing',
    'HEAD /webhook-keys/{webhookId}',
    'HEAD /webhooks',
    'HEAD /webhooks/{webhookId}/deliveries',
    'HEAD /webhooks/{webhookId}/health',
    'HEAD /webhooks/{webhookId}/public-keys',
    'HEAD /webhooks/{webhookId}/stats',
    'PATCH /agreements/{agreementId}/signers/{signerId}',
    'PATCH /webhooks/{webhookId}',
    'POST /agreements/{agreementId}/erase-personal-data',
    'POST /agreements/{agreementId}/signers/{signerId}/signing-link',
    'POST /agreements/{agreementId}/void',
    'POST /directories',
    'POST /files',
    'POST /portal-sessions',
    'POST /signing/decline',
    'POST /signing/identify',
    'POST /signing/identify/email-code',
    'POST /signing/sign',
    'POST /tickets/{ticketId}/message/{messageId}/attachment',
    'POST /verify',
    'POST /webhooks',
    'POST /webhooks/dry-run',
    'POST /webhooks/{webhookId}/deliveries/{deliveryId}/redeliver',
    'POST /webhooks/{webhookId}/disable',
    'POST /webhooks/{webhookId}/enable',
    'POST /webhooks/{webhookId}/recover',
    'POST /webhooks/{webhookId}/rotate-secret',
    'POST /webhooks/{webhookId}/test',
  ]);
});

test('the checker refuses a body that drifted from the document, and a status it does not list', () => {
  const checker = createResponseChecker(document);
  const headers = new Headers({ 'content-type': 'application/json', 'x-request-id': 'r1' });
  const webhook = {
    id: 'wbh_1',
    type: 'customer-created',
    url: 'https://r.example/',
    secret: `whsec_${Buffer.alloc(32).toString('base64')}`,
    createdAt: '2026-11-21T09:05:07+00:00',
  };
  checker.check('GET', '/webhooks/{webhookId}', { status: 200, headers }, JSON.stringify(webhook));
  assert.throws(
    () =>
      checker.check('GET', '/webhooks/{webhookId}', { status: 200, headers }, JSON.stringify({ ...webhook, extra: 1 })),
    /additional/,
  );
  assert.throws(
    () =>
      checker.check(
        'GET',
        '/webhooks/{webhookId}',
        { status: 200, headers },
        JSON.stringify({ ...webhook, createdAt: '2026-11-21T09:05:07Z' }),
      ),
    /pattern/,
  );
  assert.throws(
    () => checker.check('GET', '/webhooks/{webhookId}', { status: 201, headers }, JSON.stringify(webhook)),
    /status not in the document/,
  );
  assert.throws(
    () => checker.check('DELETE', '/webhooks/{webhookId}', { status: 401, headers }, '{"message":"x"}'),
    /WWW-Authenticate missing/,
  );
});

test('every route answers as the document says: each success and each error it documents', async () => {
  const checker = createResponseChecker(document);
  const time = manualClock();
  const transport = memoryTransport();
  let failLists = false;
  const notifier = recordingNotifier();
  const base = memoryStorage();
  const app: TestPortal = await startPortal({
    clock: time.clock,
    transport,
    signingKeys: [SIGNING_KEY_1],
    webhooks: { tick: NEVER },
    agreements: { reminderIntervalMs: 3_600_000 },
    notifier,
    storage: {
      ...base,
      listWebhooks: (accountId) =>
        failLists ? Promise.reject(new Error('storage down')) : base.listWebhooks(accountId),
    },
  });
  const portal = app.portal;

  /** Requests `path` and checks the answer against the operation `method template`; resolves the parsed body. */
  async function call(method: string, template: string, path: string, init: RequestInit = {}, status?: number) {
    const res = path.startsWith('http')
      ? await fetch(path, { method, ...init })
      : await app.api(path, { method, ...init });
    const text = await res.text();
    if (status !== undefined) assert.is(res.status, status, `${method} ${path}: ${text.slice(0, 200)}`);
    checker.check(method, template, res, text);
    // Every GET answers HEAD too, as the document lists: the same status and headers, no body.
    if (method === 'GET' && template !== '/downloads/{id}') {
      const head = path.startsWith('http')
        ? await fetch(path, { ...init, method: 'HEAD' })
        : await app.api(path, { ...init, method: 'HEAD' });
      const headText = await head.text();
      assert.is(head.status, res.status, `HEAD ${path}`);
      checker.check('HEAD', template, head, headText);
    }
    return {
      res,
      body:
        text !== '' && (res.headers.get('content-type') ?? '').startsWith('application/json') ? JSON.parse(text) : text,
    };
  }
  const jsonBody = (value: unknown): RequestInit => ({
    body: JSON.stringify(value),
    headers: { 'content-type': 'application/json' },
  });

  try {
    // Webhooks, and their deliveries
    const { body: hook } = await call(
      'POST',
      '/webhooks',
      '/webhooks',
      jsonBody({ type: 'customer-created', url: 'https://r.example/hook' }),
      201,
    );
    await call('POST', '/webhooks', '/webhooks', jsonBody({ type: 'nope', url: 'https://r.example/' }), 400);
    await call('POST', '/webhooks', '/webhooks', { body: 'type=x' }, 415);
    await call(
      'POST',
      '/webhooks',
      '/webhooks',
      jsonBody({ type: 'customer-created', url: 'https://r.example/', pad: 'x'.repeat(70_000) }),
      413,
    );
    for (let i = 0; i < 50; i++)
      await portal.webhooks.create('acct_b', { type: 'customer-created', url: 'https://b.example/' });
    const asB = jsonBody({ type: 'customer-created', url: 'https://b.example/' });
    await call(
      'POST',
      '/webhooks',
      '/webhooks',
      { ...asB, headers: { ...(asB.headers as Record<string, string>), authorization: `Bearer ${KEY_B}` } },
      409,
    );
    await call('GET', '/webhooks', '/webhooks', {}, 200);
    // Idempotency-Key: a first answer, its replay, and the same key for other fields
    const keyed = (key: string, url: string): RequestInit => {
      const init = jsonBody({ type: 'customer-created', url });
      return { ...init, headers: { ...(init.headers as Record<string, string>), 'idempotency-key': key } };
    };
    await call('POST', '/webhooks', '/webhooks', keyed('doc-key', 'https://r.example/keyed'), 201);
    const { res: replayed } = await call(
      'POST',
      '/webhooks',
      '/webhooks',
      keyed('doc-key', 'https://r.example/keyed'),
      201,
    );
    assert.is(replayed.headers.get('idempotent-replayed'), 'true');
    await call('POST', '/webhooks', '/webhooks', keyed('doc-key', 'https://r.example/other'), 422);
    await call('GET', '/webhooks/{webhookId}', `/webhooks/${hook.id}`, {}, 200);
    await call('GET', '/webhooks/{webhookId}', '/webhooks/wbh_missing', {}, 404);

    transport.calls.length = 0;
    await portal.events.publish('acct_a', 'customer-created', { customer: { id: 'cus_1' } });
    await portal.worker!.tick();
    const { body: log } = await call(
      'GET',
      '/webhooks/{webhookId}/deliveries',
      `/webhooks/${hook.id}/deliveries`,
      {},
      200,
    );
    assert.is(log.data.length, 1);
    assert.is(log.data[0].attempts.length, 1, 'an attempt is in the log, so its shape is checked too');
    await call('GET', '/webhooks/{webhookId}/deliveries', '/webhooks/wbh_missing/deliveries', {}, 404);
    await call('GET', '/webhooks/{webhookId}/deliveries', `/webhooks/${hook.id}/deliveries?status=lost`, {}, 400);
    const redeliver = '/webhooks/{webhookId}/deliveries/{deliveryId}/redeliver';
    await call('POST', redeliver, `/webhooks/${hook.id}/deliveries/${log.data[0].id}/redeliver`, {}, 202);
    await call('POST', redeliver, `/webhooks/${hook.id}/deliveries/whd_missing/redeliver`, {}, 404);
    await call('POST', '/webhooks/{webhookId}/test', `/webhooks/${hook.id}/test`, {}, 202);
    await call('POST', '/webhooks/{webhookId}/test', '/webhooks/wbh_missing/test', {}, 404);
    const patch = '/webhooks/{webhookId}';
    const { body: filtered } = await call(
      'PATCH',
      patch,
      `/webhooks/${hook.id}`,
      jsonBody({ filter: { 'customer.id': { $startsWith: 'cus_' } } }),
      200,
    );
    assert.equal(filtered.filter, { 'customer.id': { $startsWith: 'cus_' } });
    await call('PATCH', patch, `/webhooks/${hook.id}`, jsonBody({ filter: { amount: { $gtx: 1 } } }), 400);
    await call('PATCH', patch, '/webhooks/wbh_missing', jsonBody({ filter: null }), 404);
    await call('PATCH', patch, `/webhooks/${hook.id}`, jsonBody({ filter: null, pad: 'x'.repeat(70_000) }), 413);
    await call('PATCH', patch, `/webhooks/${hook.id}`, { body: 'filter=null' }, 415);
    const { body: unfiltered } = await call('PATCH', patch, `/webhooks/${hook.id}`, jsonBody({ filter: null }), 200);
    assert.is(unfiltered.filter, undefined);
    const { body: limited } = await call('PATCH', patch, `/webhooks/${hook.id}`, jsonBody({ rateLimit: 12 }), 200);
    assert.is(limited.rateLimit, 12);
    await call('PATCH', patch, `/webhooks/${hook.id}`, jsonBody({}), 400);
    await call('PATCH', patch, `/webhooks/${hook.id}`, jsonBody({ rateLimit: 0 }), 400);
    const { body: limitedHealth } = await call(
      'GET',
      '/webhooks/{webhookId}/health',
      `/webhooks/${hook.id}/health`,
      {},
      200,
    );
    assert.is(limitedHealth.rateLimit, 12);
    await call('PATCH', patch, `/webhooks/${hook.id}`, jsonBody({ rateLimit: null }), 200);
    const dryRun = '/webhooks/dry-run';
    const { body: tried } = await call(
      'POST',
      dryRun,
      dryRun,
      jsonBody({ type: 'customer-created', filter: { 'customer.id': 'cus_1' } }),
      200,
    );
    assert.equal([tried.data.length, tried.matched, tried.data[0].matches], [1, 1, true]);
    await call('POST', dryRun, dryRun, jsonBody({ type: 'customer-created', filter: { $eq: 1 } }), 400);
    await call(
      'POST',
      dryRun,
      dryRun,
      jsonBody({ type: 'customer-created', filter: null, pad: 'x'.repeat(70_000) }),
      413,
    );
    await call('POST', dryRun, dryRun, { body: 'type=customer-created' }, 415);
    assert.equal((await call('GET', '/branding', '/branding', {}, 200)).body, { branding: null });
    const { body: catalogue } = await call('GET', '/event-types', '/event-types', {}, 200);
    assert.equal(
      catalogue.data.map((type: { name: string }) => type.name),
      portal.eventTypes.list().map((type) => type.name),
    );
    const ed25519 = await portal.webhooks.create('acct_a', {
      type: 'customer-created',
      url: 'https://r.example/ed',
      signatureScheme: 'ed25519',
    });
    const keysOf = '/webhooks/{webhookId}/public-keys';
    const { body: published } = await call('GET', keysOf, `/webhooks/${ed25519.id}/public-keys`, {}, 200);
    await call('GET', keysOf, `/webhooks/${hook.id}/public-keys`, {}, 409);
    await call('GET', keysOf, '/webhooks/wbh_missing/public-keys', {}, 404);
    const keysLink = '/webhook-keys/{webhookId}';
    const { body: fetched } = await call('GET', keysLink, published.url, {}, 200);
    assert.equal(fetched, { keys: published.keys });
    await call('GET', keysLink, published.url.replace(/signature=[^&]+/, 'signature=AAAA'), {}, 404);
    await call('GET', keysLink, `${published.url}&extra=1`, {}, 400);
    const rotate = '/webhooks/{webhookId}/rotate-secret';
    const { body: rotated } = await call('POST', rotate, `/webhooks/${hook.id}/rotate-secret`, {}, 200);
    assert.is.not(rotated.secret, hook.secret);
    await call('POST', rotate, `/webhooks/${hook.id}/rotate-secret`, jsonBody({ graceMs: 60_000 }), 200);
    await call('POST', rotate, `/webhooks/${hook.id}/rotate-secret`, jsonBody({ graceMs: -1 }), 400);
    await call('POST', rotate, '/webhooks/wbh_missing/rotate-secret', {}, 404);
    await call(
      'POST',
      rotate,
      `/webhooks/${hook.id}/rotate-secret`,
      jsonBody({ graceMs: 1, pad: 'x'.repeat(70_000) }),
      413,
    );
    await call('POST', rotate, `/webhooks/${hook.id}/rotate-secret`, { body: 'graceMs=1' }, 415);
    // The calls made so far (a customer-created one, during a rotation's grace, and a test call) are as the webhooks section says.
    await portal.events.publish('acct_a', 'customer-created', { customer: { id: 'cus_2' } });
    await portal.worker!.tick();
    for (const made of transport.calls) checker.checkCall(made);
    const rotatedCall = transport.calls.findLast((made) => made.url === hook.url);
    assert.is(
      rotatedCall!.headers['webhook-signature']!.split(' ').length,
      2,
      'a call signed with both secrets is checked too',
    );

    // Health, disable, enable, recovery
    await call('GET', '/webhooks/{webhookId}/health', `/webhooks/${hook.id}/health`, {}, 200);
    await call('GET', '/webhooks/{webhookId}/health', '/webhooks/wbh_missing/health', {}, 404);
    await call('GET', '/webhooks/{webhookId}/stats', `/webhooks/${hook.id}/stats?window=7d`, {}, 200);
    await call('GET', '/webhooks/{webhookId}/stats', `/webhooks/${hook.id}/stats?window=1y`, {}, 400);
    await call('GET', '/webhooks/{webhookId}/stats', '/webhooks/wbh_missing/stats', {}, 404);
    const recover = '/webhooks/{webhookId}/recover';
    const since = jsonBody({ since: '2026-01-01T00:00:00+00:00' });
    await call('POST', '/webhooks/{webhookId}/disable', `/webhooks/${hook.id}/disable`, {}, 204);
    await call('POST', '/webhooks/{webhookId}/disable', '/webhooks/wbh_missing/disable', {}, 404);
    const { body: disabled } = await call(
      'GET',
      '/webhooks/{webhookId}/health',
      `/webhooks/${hook.id}/health`,
      {},
      200,
    );
    assert.is(disabled.disabledReason, 'manual', 'a disabled health is checked too');
    await call('POST', '/webhooks/{webhookId}/test', `/webhooks/${hook.id}/test`, {}, 409);
    await call('POST', recover, `/webhooks/${hook.id}/recover`, since, 409);
    await call('POST', '/webhooks/{webhookId}/enable', `/webhooks/${hook.id}/enable`, {}, 204);
    await call('POST', '/webhooks/{webhookId}/enable', '/webhooks/wbh_missing/enable', {}, 404);
    await call('POST', recover, `/webhooks/${hook.id}/recover`, since, 202);
    await call('POST', recover, `/webhooks/${hook.id}/recover`, jsonBody({ since: 'yesterday' }), 400);
    await call('POST', recover, '/webhooks/wbh_missing/recover', since, 404);
    await call('POST', recover, `/webhooks/${hook.id}/recover`, { body: 'since=x' }, 415);
    await call('POST', recover, `/webhooks/${hook.id}/recover`, jsonBody({ since: 'x'.repeat(70_000) }), 413);
    await call('DELETE', '/webhooks/{webhookId}', `/webhooks/${hook.id}`, {}, 204);
    await call('DELETE', '/webhooks/{webhookId}', `/webhooks/${hook.id}`, {}, 404);
    await call('POST', redeliver, `/webhooks/${hook.id}/deliveries/${log.data[0].id}/redeliver`, {}, 409);

    // Agreements: a fresh one (no signer has signed) and one whose signers all signed; their calls go out too
    for (const type of ['agreement-created', 'agreement-signed'])
      await portal.webhooks.create('acct_a', { type, url: 'https://r.example/agreements' });
    transport.calls.length = 0;
    const { body: agreement } = await call('POST', '/agreements', '/agreements', { body: validFormData() }, 201);
    const form = validFormData();
    form.delete('signerName');
    await call('POST', '/agreements', '/agreements', { body: form }, 400);
    const big = validFormData({ documents: [{ name: 'big.bin', bytes: documentBytes(MAX_DOCUMENT_BYTES + 1) }] });
    await call('POST', '/agreements', '/agreements', { body: big }, 413);
    await call('POST', '/agreements', '/agreements', jsonBody({ name: 'x' }), 415);
    const withKey = (key: string, body: FormData): RequestInit => ({ body, headers: { 'idempotency-key': key } });
    await call('POST', '/agreements', '/agreements', withKey('agreement-key', validFormData()), 201);
    await call(
      'POST',
      '/agreements',
      '/agreements',
      withKey('agreement-key', validFormData({ documents: [{ name: 'other.pdf', bytes: documentBytes(10) }] })),
      422,
    );
    const at = time.clock();
    await base.claimIdempotencyKey({
      accountId: 'acct_a',
      key: 'running-key',
      token: 'elsewhere',
      fingerprint: null,
      now: atom(at),
      leaseUntil: atom(new Date(at.getTime() + 60_000)),
    });
    await call('POST', '/agreements', '/agreements', withKey('running-key', validFormData()), 409);
    await call('GET', '/agreements/{agreementId}', `/agreements/${agreement.id}`, {}, 200);
    await portal.agreements.sign('acct_a', agreement.id, agreement.signers[0].id, { signature: PNG_SIGNATURE });
    const { body: signed } = await call('GET', '/agreements/{agreementId}', `/agreements/${agreement.id}`, {}, 200);
    assert.is(signed.status, 'signed');
    await call('GET', '/agreements/{agreementId}', '/agreements/agr_missing', {}, 404);
    await call('GET', '/agreements/{agreementId}', '/agreements/nope', {}, 404);
    const { body: page } = await call('GET', '/agreements', '/agreements?limit=1', {}, 200);
    assert.is(page.data.length, 1, 'a listed agreement is checked too');
    assert.is.not(page.nextCursor, null, 'and a cursor');
    await call('GET', '/agreements', `/agreements?cursor=${page.nextCursor}`, {}, 200);
    await call('GET', '/agreements', '/agreements?limit=0', {}, 400);
    const documentLink = '/agreements/{agreementId}/documents/{documentId}/download';
    const { body: documentLinked } = await call(
      'GET',
      documentLink,
      `/agreements/${agreement.id}/documents/${agreement.documents[0].id}/download`,
      {},
      200,
    );
    await call('GET', documentLink, `/agreements/${agreement.id}/documents/nope/download`, {}, 404);
    await call('GET', documentLink, `/agreements/${agreement.id}/documents/agd_missing/download`, {}, 404);
    // A document's completed copy: made once the agreement is signed, for a PDF only.
    const signedLink = '/agreements/{agreementId}/documents/{documentId}/signed';
    const pdfForm = validFormData({ documents: [{ name: 'lease.pdf', bytes: await simplePdf('A lease') }] });
    const { body: withPdf } = await call('POST', '/agreements', '/agreements', { body: pdfForm }, 201);
    await call('GET', signedLink, `/agreements/${withPdf.id}/documents/${withPdf.documents[0].id}/signed`, {}, 409);
    await portal.agreements.sign('acct_a', withPdf.id, withPdf.signers[0].id, { signature: PNG_SIGNATURE });
    await until(
      async () => (await portal.agreements.get('acct_a', withPdf.id))!.documents[0]!.signedFileHash !== null,
      'the completed copy',
    );
    const { body: copyLink } = await call(
      'GET',
      signedLink,
      `/agreements/${withPdf.id}/documents/${withPdf.documents[0].id}/signed`,
      {},
      200,
    );
    await call('GET', '/downloads/{id}', copyLink.link, {}, 200);
    // The copy, verified: a PDF, at most 25 MiB.
    const copyBytes = Buffer.from(await (await fetch(copyLink.link)).arrayBuffer());
    const asPdf = { 'content-type': 'application/pdf' };
    const { body: verified } = await call('POST', '/verify', '/verify', { body: copyBytes, headers: asPdf }, 200);
    assert.equal([verified.intact, verified.agreementId], [true, withPdf.id]);
    await call('POST', '/verify', '/verify', { body: Buffer.from('not a PDF'), headers: asPdf }, 400);
    await call('POST', '/verify', '/verify', { body: copyBytes, headers: { 'content-type': 'text/plain' } }, 415);
    await call('POST', '/verify', '/verify', { body: Buffer.alloc(26_214_401, 0x25), headers: asPdf }, 413);
    // Four PDFs still arriving: a fifth is refused until one is read.
    const arriving = Array.from({ length: 4 }, () => {
      const request = httpRequest(`${app.url}/v1/verify`, {
        method: 'POST',
        headers: { authorization: `Bearer ${KEY_A}`, 'content-type': 'application/pdf', 'content-length': '100000' },
      });
      request.on('error', () => {});
      request.write('%PDF-1.7\n');
      return request;
    });
    await new Promise((resolve) => setTimeout(resolve, 200));
    const { res: busy } = await call('POST', '/verify', '/verify', { body: copyBytes, headers: asPdf }, 429);
    assert.is(busy.headers.get('retry-after'), '1');
    for (const request of arriving) request.destroy();
    await until(
      async () => (await app.api('/verify', { method: 'POST', body: copyBytes, headers: asPdf })).status === 200,
      'a verification after the four',
    );
    await call('GET', signedLink, `/agreements/${withPdf.id}/documents/nope/signed`, {}, 404);
    await call('GET', signedLink, `/agreements/${withPdf.id}/documents/agd_missing/signed`, {}, 404);
    await portal.worker!.tick();
    for (const made of transport.calls) checker.checkCall(made);
    const ofAgreement = transport.calls
      .map((made) => JSON.parse(made.body))
      .filter((event) => event.data.id === agreement.id);
    assert.equal(ofAgreement.map((event) => event.type).sort(), ['agreement-created', 'agreement-signed']);

    // Signing: links, the signer's API, the trail, and a call of each signing event
    for (const type of [
      'agreement-viewed',
      'agreement-signer-signed',
      'agreement-declined',
      'agreement-expired',
      'agreement-reminder-due',
      'agreement-voided',
    ]) {
      await portal.webhooks.create('acct_a', { type, url: 'https://r.example/signing' });
    }
    const { body: toSign } = await call(
      'POST',
      '/agreements',
      '/agreements',
      { body: validFormData({ signers: [SIGNER, signer(2)] }) },
      201,
    );
    const signingLink = '/agreements/{agreementId}/signers/{signerId}/signing-link';
    const linkOf = (agreementId: string, signerId: string) =>
      `/agreements/${agreementId}/signers/${signerId}/signing-link`;
    const { body: firstLink } = await call('POST', signingLink, linkOf(toSign.id, toSign.signers[0].id), {}, 201);
    const { body: secondLink } = await call(
      'POST',
      signingLink,
      linkOf(toSign.id, toSign.signers[1].id),
      jsonBody({ expiresInSeconds: 600 }),
      201,
    );
    await call('POST', signingLink, linkOf(toSign.id, 'nope'), {}, 404);
    await call('POST', signingLink, linkOf(toSign.id, toSign.signers[0].id), jsonBody({ expiresInSeconds: 59 }), 400);
    await call('POST', signingLink, linkOf(toSign.id, 'ags_missing'), {}, 404);
    await call('POST', signingLink, linkOf(agreement.id, agreement.signers[0].id), {}, 409);
    await call(
      'POST',
      signingLink,
      linkOf(toSign.id, toSign.signers[0].id),
      { body: 'x', headers: { 'content-type': 'text/plain' } },
      415,
    );
    await call(
      'POST',
      signingLink,
      linkOf(toSign.id, toSign.signers[0].id),
      jsonBody({ pad: 'x'.repeat(70_000) }),
      413,
    );
    // The sender's changes: correct a signer, void an agreement.
    const { body: toChange } = await call(
      'POST',
      '/agreements',
      '/agreements',
      { body: validFormData({ signers: [SIGNER, signer(2)] }) },
      201,
    );
    const correct = '/agreements/{agreementId}/signers/{signerId}';
    const signerPath = (agreementId: string, signerId: string) => `/agreements/${agreementId}/signers/${signerId}`;
    await call(
      'PATCH',
      correct,
      signerPath(toChange.id, toChange.signers[0].id),
      jsonBody({ email: 'bo.lee@example.org' }),
      200,
    );
    await call('PATCH', correct, signerPath(toChange.id, toChange.signers[0].id), jsonBody({}), 400);
    await call('PATCH', correct, signerPath(toChange.id, 'ags_missing'), jsonBody({ email: 'a@example.com' }), 404);
    await call(
      'PATCH',
      correct,
      signerPath(agreement.id, agreement.signers[0].id),
      jsonBody({ email: 'a@example.com' }),
      409,
    );
    await call(
      'PATCH',
      correct,
      signerPath(toChange.id, toChange.signers[0].id),
      { body: 'x', headers: { 'content-type': 'text/plain' } },
      415,
    );
    await call(
      'PATCH',
      correct,
      signerPath(toChange.id, toChange.signers[0].id),
      jsonBody({ pad: 'x'.repeat(70_000) }),
      413,
    );
    const erasing = '/agreements/{agreementId}/erase-personal-data';
    await call('POST', erasing, `/agreements/${toChange.id}/erase-personal-data`, {}, 409);
    await call('POST', erasing, '/agreements/agr_missing/erase-personal-data', {}, 404);
    const voiding = '/agreements/{agreementId}/void';
    await call('POST', voiding, `/agreements/${toChange.id}/void`, jsonBody({}), 400);
    await call('POST', voiding, '/agreements/agr_missing/void', jsonBody({ reason: 'x' }), 404);
    await call(
      'POST',
      voiding,
      `/agreements/${toChange.id}/void`,
      { body: 'x', headers: { 'content-type': 'text/plain' } },
      415,
    );
    await call('POST', voiding, `/agreements/${toChange.id}/void`, jsonBody({ reason: 'x'.repeat(70_000) }), 413);
    await call('POST', voiding, `/agreements/${toChange.id}/void`, jsonBody({ reason: 'Sent by mistake' }), 200);
    await call('POST', voiding, `/agreements/${toChange.id}/void`, jsonBody({ reason: 'Twice' }), 409);
    await call('POST', erasing, `/agreements/${toChange.id}/erase-personal-data`, {}, 200);
    await call('DELETE', '/agreements/{agreementId}', `/agreements/${toChange.id}`, {}, 204);
    await call('DELETE', '/agreements/{agreementId}', `/agreements/${toChange.id}`, {}, 404);
    await call('DELETE', '/agreements/{agreementId}', '/agreements/nope', {}, 404);
    // Portal sessions, and what a session's token is answered
    const { body: session } = await call(
      'POST',
      '/portal-sessions',
      '/portal-sessions',
      jsonBody({ scopes: ['files'], readOnly: true }),
      201,
    );
    await call('POST', '/portal-sessions', '/portal-sessions', jsonBody({ ttlSeconds: 1 }), 400);
    for (let i = 0; i < 1_000; i++) await portal.sessions.create('acct_b');
    const sessionAsB = jsonBody({});
    await call(
      'POST',
      '/portal-sessions',
      '/portal-sessions',
      {
        ...sessionAsB,
        headers: { ...(sessionAsB.headers as Record<string, string>), authorization: `Bearer ${KEY_B}` },
      },
      409,
    );
    const asSession: RequestInit = { headers: { authorization: `Bearer ${session.token}` } };
    await call('GET', '/files', '/files', asSession, 200);
    await call('GET', '/webhooks', '/webhooks', asSession, 403);
    await call('DELETE', '/portal-sessions/{sessionId}', `/portal-sessions/${session.id}`, {}, 204);
    await call('DELETE', '/portal-sessions/{sessionId}', '/portal-sessions/pts_missing', {}, 404);
    await call('GET', '/files', '/files', asSession, 401);
    const tokenOf = (link: { link: string }) => new URL(link.link).hash.slice(1);
    const bearer = (token: string, init: RequestInit = {}): RequestInit => ({
      ...init,
      headers: { ...(init.headers as Record<string, string>), authorization: `Bearer ${token}` },
    });
    const [one, two] = [tokenOf(firstLink), tokenOf(secondLink)];
    await call('GET', '/signing', '/signing', bearer(one), 200);
    await call('GET', '/signing', '/signing', bearer('not-a-token'), 401);
    await call(
      'POST',
      '/signing/sign',
      '/signing/sign',
      bearer(one, jsonBody({ signature: 'data:text/plain;base64,aGk=' })),
      400,
    );
    await call(
      'POST',
      '/signing/sign',
      '/signing/sign',
      bearer(one, { body: 'x', headers: { 'content-type': 'text/plain' } }),
      415,
    );
    await call(
      'POST',
      '/signing/sign',
      '/signing/sign',
      bearer(one, jsonBody({ signature: 'x'.repeat(2 * 1024 * 1024) })),
      413,
    );
    await call(
      'POST',
      '/signing/sign',
      '/signing/sign',
      bearer('not-a-token', jsonBody({ signature: PNG_SIGNATURE })),
      401,
    );
    await call('POST', '/signing/sign', '/signing/sign', bearer(one, jsonBody({ signature: PNG_SIGNATURE })), 200);
    await call('POST', '/signing/sign', '/signing/sign', bearer(one, jsonBody({ signature: PNG_SIGNATURE })), 409);
    await call(
      'POST',
      '/signing/decline',
      '/signing/decline',
      bearer(two, jsonBody({ reason: 'x'.repeat(1001) })),
      400,
    );
    await call(
      'POST',
      '/signing/decline',
      '/signing/decline',
      bearer(two, { body: 'x', headers: { 'content-type': 'text/plain' } }),
      415,
    );
    await call(
      'POST',
      '/signing/decline',
      '/signing/decline',
      bearer(two, jsonBody({ reason: 'x'.repeat(70_000) })),
      413,
    );
    await call('POST', '/signing/decline', '/signing/decline', bearer('not-a-token'), 401);
    // Identification: a signer who must identify, by a mailed code
    const { body: toIdentify } = await call(
      'POST',
      '/agreements',
      '/agreements',
      { body: validFormData({ signers: [{ ...signer(3), shouldIdentify: true }] }) },
      201,
    );
    const { body: idLink } = await call(
      'POST',
      signingLink,
      linkOf(toIdentify.id, toIdentify.signers[0].id),
      jsonBody({ send: true }),
      201,
    );
    const three = tokenOf(idLink);
    const identifyCode = (token: string, code: unknown, status: number) =>
      call('POST', '/signing/identify', '/signing/identify', bearer(token, jsonBody({ code })), status);
    const { body: unidentified } = await call('GET', '/signing', '/signing', bearer(three), 200);
    assert.equal(unidentified.documents, []);
    await call('POST', '/signing/sign', '/signing/sign', bearer(three, jsonBody({ signature: PNG_SIGNATURE })), 403);
    await call('POST', '/signing/decline', '/signing/decline', bearer(three), 403);
    await identifyCode(three, '123456', 403);
    await call('POST', '/signing/identify/email-code', '/signing/identify/email-code', bearer(three), 202);
    await until(() => notifier.sent.some((mail) => mail.kind === 'identification-code'), 'the code mail');
    await identifyCode(three, 7, 400);
    await call(
      'POST',
      '/signing/identify',
      '/signing/identify',
      bearer(three, { body: 'x', headers: { 'content-type': 'text/plain' } }),
      415,
    );
    await call(
      'POST',
      '/signing/identify',
      '/signing/identify',
      bearer(three, jsonBody({ code: 'x'.repeat(70_000) })),
      413,
    );
    await call('POST', '/signing/identify', '/signing/identify', bearer('not-a-token', jsonBody({ code: '1' })), 401);
    await identifyCode(two, '123456', 409);
    await call('POST', '/signing/identify/email-code', '/signing/identify/email-code', bearer(two), 409);
    for (let send = 2; send <= 5; send++)
      await call('POST', '/signing/identify/email-code', '/signing/identify/email-code', bearer(three), 202);
    await call('POST', '/signing/identify/email-code', '/signing/identify/email-code', bearer(three), 429);
    await until(
      () => notifier.sent.filter((mail) => mail.kind === 'identification-code').length === 5,
      'five code mails',
    );
    const { body: identified } = await identifyCode(three, notifier.codeFor('s3@example.com'), 200);
    assert.is(identified.documents.length, 1);
    await call(
      'POST',
      '/signing/decline',
      '/signing/decline',
      bearer(two, jsonBody({ reason: 'Not this year.' })),
      200,
    );
    await call('POST', '/signing/decline', '/signing/decline', bearer(two), 409);
    time.advance(601);
    await call('GET', '/signing', '/signing', bearer(two), 410);
    await call('POST', '/signing/sign', '/signing/sign', bearer(two, jsonBody({ signature: PNG_SIGNATURE })), 410);
    await call('POST', '/signing/decline', '/signing/decline', bearer(two), 410);
    await call('POST', '/signing/identify/email-code', '/signing/identify/email-code', bearer(two), 410);
    await call('POST', '/signing/identify', '/signing/identify', bearer(two, jsonBody({ code: '123456' })), 410);
    time.advance(-601);
    await call('GET', '/agreements/{agreementId}/audit', `/agreements/${toSign.id}/audit`, {}, 200);
    await call('GET', '/agreements/{agreementId}/audit', '/agreements/nope/audit', {}, 404);
    await call('GET', '/agreements/{agreementId}/audit', '/agreements/agr_missing/audit', {}, 404);
    const certificate = '/agreements/{agreementId}/certificate';
    await call('GET', certificate, `/agreements/${toSign.id}/certificate`, {}, 200);
    const { body: stillOpen } = await call('POST', '/agreements', '/agreements', { body: validFormData() }, 201);
    await call('GET', certificate, `/agreements/${stillOpen.id}/certificate`, {}, 409);
    await call('GET', certificate, '/agreements/nope/certificate', {}, 404);
    await call('GET', certificate, '/agreements/agr_missing/certificate', {}, 404);
    // An agreement past its expiresAt closes at the first request that reaches it.
    const expiring = validFormData();
    expiring.set('expiresAt', new Date(time.clock().getTime() + 120_000).toISOString());
    const { body: soon } = await call('POST', '/agreements', '/agreements', { body: expiring }, 201);
    const { body: soonLink } = await call('POST', signingLink, linkOf(soon.id, soon.signers[0].id), {}, 201);
    time.advance(121);
    await call('GET', '/signing', '/signing', bearer(tokenOf(soonLink)), 200);
    time.advance(-121);
    // A reminder round, an hour (agreements.reminderIntervalMs) after an agreement was made.
    const { body: waiting } = await call('POST', '/agreements', '/agreements', { body: validFormData() }, 201);
    time.advance(3601);
    await portal.worker!.tick();
    time.advance(-3601);
    assert.ok(
      transport.calls.some(
        (made) =>
          JSON.parse(made.body).type === 'agreement-reminder-due' && JSON.parse(made.body).data.id === waiting.id,
      ),
    );
    await portal.worker!.tick();
    for (const made of transport.calls) checker.checkCall(made);

    // Files: the root and a directory, with a shared file among the entries
    const dir = await portal.files.createDirectory('acct_a', { name: 'Contracts' });
    await portal.files.put('acct_a', {
      name: 'a.txt',
      mime: 'text/plain; charset=utf-8',
      body: 'a',
      directoryId: dir.id,
      fileShareId: 'fss_1',
    });
    await portal.files.put('acct_a', { name: 'b.pdf', mime: 'application/pdf', body: 'b' });
    const { body: root } = await call('GET', '/files', '/files', {}, 200);
    assert.is(root.data.length, 2);
    await call('GET', '/files', `/files?directoryId=${dir.id}`, {}, 200);
    await call('GET', '/files', '/files?directoryId=nope', {}, 400);
    await call('GET', '/files', '/files?directoryId=fsd_missing', {}, 404);

    // Uploads and deletions (extension routes)
    const upload = (parts: [string, string | Blob, string?][]) => {
      const body = new FormData();
      for (const [name, value, filename] of parts) {
        if (typeof value === 'string') body.append(name, value);
        else body.append(name, value, filename);
      }
      return { body };
    };
    const small = new Blob(['bytes'], { type: 'text/plain' });
    const { body: box } = await call('POST', '/directories', '/directories', jsonBody({ name: 'Box' }), 201);
    await call('POST', '/directories', '/directories', jsonBody({ name: '' }), 400);
    await call('POST', '/directories', '/directories', jsonBody({ name: 'x', directoryId: 'fsd_missing' }), 404);
    await call('POST', '/directories', '/directories', { body: 'name=x' }, 415);
    const { body: uploaded } = await call(
      'POST',
      '/files',
      '/files',
      upload([
        ['directoryId', box.id],
        ['file', small, 'u.txt'],
      ]),
      201,
    );
    await call('POST', '/files', '/files', upload([['other', 'x']]), 400);
    await call(
      'POST',
      '/files',
      '/files',
      upload([
        ['directoryId', 'fsd_missing'],
        ['file', small, 'u.txt'],
      ]),
      404,
    );
    await call(
      'POST',
      '/files',
      '/files',
      upload([['file', new Blob([documentBytes(MAX_DOCUMENT_BYTES + 1)]), 'big.bin']]),
      413,
    );
    await call('POST', '/files', '/files', jsonBody({ name: 'x' }), 415);
    await call('DELETE', '/files/{entryId}', `/files/${box.id}`, {}, 409);
    await call('DELETE', '/files/{entryId}', `/files/${uploaded.id}`, {}, 204);
    await call('DELETE', '/files/{entryId}', `/files/${uploaded.id}`, {}, 404);
    const attach = '/tickets/{ticketId}/message/{messageId}/attachment';
    const ticketPath = '/tickets/tck_0123456789abcdefABCD/message/tcm_0123456789abcdefABCD/attachment';
    const { body: attached } = await call('POST', attach, ticketPath, upload([['file', small, 'a.txt']]), 201);
    await call('POST', attach, ticketPath, upload([['other', 'x']]), 400);
    await call(
      'POST',
      attach,
      ticketPath,
      upload([['file', new Blob([documentBytes(MAX_DOCUMENT_BYTES + 1)]), 'big.bin']]),
      413,
    );
    await call('POST', attach, ticketPath, jsonBody({ name: 'x' }), 415);
    const attachmentAt = `${attach}/{attachmentId}`;
    await call('DELETE', attachmentAt, `${ticketPath}/nope`, {}, 400);
    await call('DELETE', attachmentAt, `${ticketPath}/${attached.id}`, {}, 204);
    await call('DELETE', attachmentAt, `${ticketPath}/${attached.id}`, {}, 404);

    // Download links, and the signed route they point to
    const attachment = await portal.tickets.putAttachment('acct_a', {
      name: 'Résumé.pdf',
      mime: 'application/pdf',
      body: Buffer.from('0123456789'),
    });
    const linkTemplate = '/tickets/{ticketId}/message/{messageId}/attachment/{attachmentId}/download';
    const { body: link } = await call('GET', linkTemplate, linkPath(attachment), {}, 200);
    await call('GET', linkTemplate, linkPath({ ...attachment, id: 'nope' }), {}, 400);
    await call('GET', linkTemplate, linkPath({ ...attachment, id: 'tca_missing' }), {}, 404);
    const downloads = '/downloads/{id}';
    const { body: bytes } = await call('GET', downloads, link.link, {}, 200);
    assert.is(bytes, '0123456789');
    /** The same request as GET and as HEAD: each is its own operation in the document. */
    const both = async (url: string, init: RequestInit, status: number) => {
      await call('GET', downloads, url, init, status);
      await call('HEAD', downloads, url, init, status);
    };
    await call('HEAD', downloads, link.link, {}, 200);
    await both(link.link, { headers: { range: 'bytes=2-4' } }, 206);
    await both(link.link, { headers: { range: 'bytes=50-' } }, 416);
    await both(withParam(link.link, 'ticket', 'tck_other'), {}, 403);
    time.advance(301);
    await both(link.link, {}, 410);
    time.advance(-301);
    await portal.tickets.deleteAttachment('acct_a', attachment.id);
    await both(link.link, {}, 404);
    await both(withParam(link.link, 'verbose', '1'), {}, 400);
    // A file's link, and an agreement document's, are served by the same route
    const file = await portal.files.put('acct_a', { name: 'notes.txt', mime: 'text/plain', body: 'file bytes' });
    const fileLink = '/files/{fileId}/download';
    const { body: fileLinked } = await call('GET', fileLink, `/files/${file.id}/download`, {}, 200);
    await call('GET', fileLink, '/files/nope/download', {}, 400);
    await call('GET', fileLink, '/files/fsf_missing/download', {}, 404);
    assert.is((await call('GET', downloads, fileLinked.link, {}, 200)).body, 'file bytes');
    assert.is(
      (await call('GET', downloads, documentLinked.link, {}, 200)).body.length,
      agreement.documents[0].fileSize,
    );

    // A blob store that serves the bytes itself: the link redirects there
    const direct = await startPortal({
      signingKeys: [SIGNING_KEY_1],
      blobs: { ...memoryBlobs(), presign: async (key) => `https://bucket.example/${key}?signed` },
    });
    try {
      const stored = await direct.portal.tickets.putAttachment('acct_a', {
        name: 'a.pdf',
        mime: 'application/pdf',
        body: Buffer.from('x'),
      });
      const ref = { ticketId: stored.ticketId, messageId: stored.messageId, attachmentId: stored.id };
      const { link: directLink } = await direct.portal.tickets.downloadLink('acct_a', ref, `${direct.url}/v1`);
      await call('GET', downloads, directLink, { redirect: 'manual' }, 302);
      await call('HEAD', downloads, directLink, { redirect: 'manual' }, 200);
    } finally {
      await direct.close();
    }

    // What every authenticated route answers: no key, an unknown key, a wrong method, no route, a fault
    await call('GET', '/webhooks/{webhookId}', '/webhooks/wbh_x', { headers: { authorization: '' } }, 401);
    await call('GET', '/files', '/files', { headers: { authorization: 'Bearer not-a-key' } }, 401);
    failLists = true;
    await call('GET', '/webhooks', '/webhooks', {}, 500);
    failLists = false;
    await call('GET', '/agreements/{agreementId}', '/agreements/agr_missing/extra', {}, 404);

    const missing = checker.ownResponses().filter((response) => !checker.seen.has(response));
    assert.equal(missing, [], `documented responses the test did not see: ${missing.join(', ')}`);
    assert.ok(checker.seen.has('GET /webhooks/{webhookId} 401') && checker.seen.has('GET /files 401'));
    assert.ok(checker.seen.has('GET /webhooks 500'));
    assert.equal(
      [...checker.seen].filter((seen) => seen.startsWith('CALL ')).sort(),
      Object.keys(document.webhooks)
        .map((type) => `CALL ${type}`)
        .sort(),
      'a call of every event type was checked',
    );
  } finally {
    await app.close();
  }
});

test('a 405 carries Allow and the Error body the document gives it', async () => {
  const checker = createResponseChecker(document);
  await withPortal(async (app) => {
    const res = await fetch(`${app.url}/v1/files`, { method: 'PUT', headers: { authorization: `Bearer ${KEY_A}` } });
    const text = await res.text();
    assert.is(res.status, 405);
    // The document names operations, and PUT /files is none: the shared 405 of the path's GET describes it.
    checker.check('GET', '/files', res, text);
    assert.is(res.headers.get('allow'), 'GET, HEAD, POST');
  });
});

test.run();
