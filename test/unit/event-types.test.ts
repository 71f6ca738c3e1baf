import { Ajv2020 } from 'ajv/dist/2020.js';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { createEventCatalogue } from '../../src/domain/event-types.js';
import { isPortalError } from '../../src/errors.js';
import { LIBRARY_EVENT_TYPES, libraryEventDefinitions } from '../../src/openapi/event-catalogue.js';
import { DEFAULT_EVENT_TYPES } from '../../src/options.js';
import { createPortal } from '../../src/index.js';
import { loadedProbe, runModuleScript } from '../helpers/process.js';

const customer = {
  type: 'object',
  required: ['customer'],
  properties: {
    customer: {
      type: 'object',
      required: ['id'],
      properties: {
        id: { type: 'string', pattern: '^cus_' },
        email: { type: 'string', format: 'email' },
        tags: { type: 'array', items: { type: 'string' } },
      },
    },
  },
};

/** The message of the refusal `check` throws, after asserting it is a 400 `EVENT_DATA_INVALID`. */
function refusal(run: () => void): string {
  try {
    run();
  } catch (error) {
    assert.ok(isPortalError(error, 'EVENT_DATA_INVALID'), String(error));
    assert.is((error as { status: number }).status, 400);
    return (error as Error).message;
  }
  throw new Error('accepted');
}

test("the library's types come with their schemas and examples, each example valid; a host type has none until defined", () => {
  const catalogue = createEventCatalogue(DEFAULT_EVENT_TYPES, libraryEventDefinitions());
  const listed = catalogue.list();
  assert.equal(
    listed.map((type) => type.name),
    [...DEFAULT_EVENT_TYPES],
  );
  assert.equal(listed[0], {
    name: 'customer-created',
    description: null,
    schema: null,
    example: null,
    deprecated: false,
  });
  for (const { name, example } of LIBRARY_EVENT_TYPES) {
    const entry = listed.find((type) => type.name === name)!;
    assert.equal(entry.example, example, name);
    assert.is(entry.schema!.type, 'object');
    catalogue.check(name, example);
  }
  assert.match(
    refusal(() => catalogue.check('agreement-signed', { ...LIBRARY_EVENT_TYPES[1]!.example, status: 'lost' })),
    /data\.status must be equal to one of the allowed values/,
  );
});

test("the library's types are compiled with the first check of their data, once for every catalogue of the process; a host's when defined", () => {
  const compile = Ajv2020.prototype.compile;
  let compiled = 0;
  Ajv2020.prototype.compile = function (this: Ajv2020, ...args: Parameters<typeof compile>) {
    compiled++;
    return compile.apply(this, args);
  } as typeof compile;
  try {
    // A built-in schema of this test's own, so that no other test has compiled it in this process.
    const builtIn = { 'customer-created': { schema: { ...customer, title: `only here ${Math.random()}` } } };
    const first = createEventCatalogue(['customer-created'], builtIn);
    const second = createEventCatalogue(['customer-created'], builtIn);
    assert.is(compiled, 0, 'making a catalogue compiles nothing');
    assert.is(
      first.list()[0]!.schema!.title,
      builtIn['customer-created'].schema.title,
      'it lists the schema all the same',
    );
    first.check('customer-created', { customer: { id: 'cus_1' } });
    assert.is(compiled, 1, 'the first check compiles it');
    assert.match(
      refusal(() => second.check('customer-created', { customer: { id: 'nope' } })),
      'data.customer.id',
    );
    assert.is(compiled, 1, 'the next checks, in any catalogue of the process, compile nothing');
    first.define('customer-created', { schema: customer });
    assert.is(compiled, 2, "a host's definition is compiled when defined");
  } finally {
    Ajv2020.prototype.compile = compile;
  }
});

test('ajv is loaded with the first schema compiled: a portal whose events no schema checks does not hold it', async () => {
  // A process of its own, so that no other test has loaded ajv before.
  const url = (path: string) => JSON.stringify(new URL(path, import.meta.url).href);
  const child = await runModuleScript(`
      ${loadedProbe('ajv')}
      const { createPortal } = await import(${url('../../src/index.js')});
      const { memoryStorage } = await import(${url('../../adapters/memory/index.js')});
      const portal = await createPortal({ storage: memoryStorage(), auth: { apiKeys: ['lazy-ajv-key-0123456'] }, webhooks: { worker: false } });
      const seen = [loaded(), portal.eventTypes.list().filter((type) => type.schema !== null).length > 0];
      await portal.events.publish('acc_1', 'customer-created', { id: 1 });
      seen.push(loaded());
      const example = portal.eventTypes.list().find((type) => type.name === 'agreement-signed').example;
      await portal.events.publish('acc_1', 'agreement-signed', example);
      seen.push(loaded());
      console.log(JSON.stringify(seen));
      await portal.close();
    `);
  assert.is(child.stdout.trim(), '[false,true,false,true]', child.stderr);
});

test('define: a schema for a type of eventTypes; publish-time checks name the first failing path', () => {
  const catalogue = createEventCatalogue(['customer-created']);
  catalogue.define('customer-created', {
    schema: customer,
    description: 'A customer signed up.',
    example: { customer: { id: 'cus_1' } },
    deprecated: true,
  });
  assert.equal(catalogue.list(), [
    {
      name: 'customer-created',
      description: 'A customer signed up.',
      schema: customer,
      example: { customer: { id: 'cus_1' } },
      deprecated: true,
    },
  ]);
  catalogue.check('customer-created', { customer: { id: 'cus_2', tags: ['a'] } });
  assert.match(
    refusal(() => catalogue.check('customer-created', {})),
    /^The data of a customer-created event breaks its schema \(GET \/event-types\): data\.customer is required\.$/,
  );
  assert.match(
    refusal(() => catalogue.check('customer-created', { customer: { id: 'x' } })),
    /data\.customer\.id must match pattern "\^cus_"/,
  );
  assert.match(
    refusal(() => catalogue.check('customer-created', { customer: { id: 'cus_1', tags: ['a', 2] } })),
    /data\.customer\.tags\.1 must be string/,
  );
  assert.match(
    refusal(() => catalogue.check('customer-created', { customer: { id: 'cus_1', email: 'nope' } })),
    /data\.customer\.email must match format "email"/,
  );
  catalogue.check('webhook.test', { anything: true });
});

test('define refuses what it cannot use: another type, a schema that is not one, an example its schema refuses; the catalogue keeps its own copy', () => {
  const catalogue = createEventCatalogue(['customer-created']);
  assert.throws(
    () => catalogue.define('invoice-paid', { schema: {} }),
    /"invoice-paid" is not one of the eventTypes option \(customer-created\); add it there first/,
  );
  assert.throws(
    () => catalogue.define('customer-created', { schema: { type: 'objec' } }),
    /the schema of "customer-created" is not a valid JSON Schema/,
  );
  assert.throws(() => catalogue.define('customer-created', { schema: [] as never }), /must be a JSON Schema object/);
  assert.throws(
    () => catalogue.define('customer-created', { schema: customer, example: { customer: {} } }),
    /the example of "customer-created" breaks its own schema: example\.customer\.id is required/,
  );
  const schema = structuredClone(customer);
  catalogue.define('customer-created', { schema });
  (schema.properties.customer as { required: string[] }).required = [];
  assert.match(
    refusal(() => catalogue.check('customer-created', { customer: {} })),
    /data\.customer\.id is required/,
  );
});

test("portal.eventTypes and events.publish: data breaking its type's schema is refused before anything is stored", async () => {
  const portal = await createPortal({
    auth: { apiKeys: { 'event-types-test-key-a': 'acct_a' } },
    webhooks: { worker: false },
  });
  try {
    const hook = await portal.webhooks.create('acct_a', { type: 'customer-created', url: 'https://r.example/c' });
    portal.eventTypes.define('customer-created', { schema: customer });
    await portal.events.publish('acct_a', 'customer-created', { customer: { id: 'cus_1' } });
    const error = await portal.events
      .publish('acct_a', 'customer-created', { customer: { id: 7 } })
      .catch((caught: unknown) => caught);
    assert.ok(isPortalError(error, 'EVENT_DATA_INVALID'));
    assert.match((error as Error).message, /data\.customer\.id must be string/);
    assert.is((await portal.webhooks.deliveries('acct_a', hook.id))!.length, 1, 'the refused event made no delivery');
    assert.equal(portal.eventTypes.list()[0]!.schema, customer);
  } finally {
    await portal.close();
  }
});

test.run();
