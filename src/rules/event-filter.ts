import { PortalError } from '../errors.js';

import type { EventFilter } from '../records.js';

export type { EventFilter };

/** The value operators, in the order the documentation lists them. */
const VALUE_OPERATORS = [
  '$eq',
  '$neq',
  '$gt',
  '$gte',
  '$lt',
  '$lte',
  '$in',
  '$nin',
  '$startsWith',
  '$endsWith',
  '$exist',
] as const;
/** The logical operators. */
const LOGICAL_OPERATORS = ['$and', '$or', '$not'] as const;

/**
 * What one filter may hold: a tenant's filter runs against every event of its type, so its cost
 * per event is bounded here (the bench row "a filter of 10 clauses" of filter.bench.ts).
 */
export const FILTER_LIMITS = {
  /** The filter as JSON text, in characters. */
  chars: 8192,
  /** Operators and equalities, in all. */
  clauses: 50,
  /** Filters inside filters (`$and`, `$or`, `$not`, a path's nested filter). */
  depth: 8,
  /** Segments of one path. */
  segments: 16,
  /** Values in one `$in` or `$nin`. */
  list: 100,
} as const;

type Test = (data: unknown) => boolean;

const isValueOperator = (key: string) => (VALUE_OPERATORS as readonly string[]).includes(key);
const OPERATOR_LIST = [...VALUE_OPERATORS, ...LOGICAL_OPERATORS].join(', ');
const ARRAY_INDEX = /^(?:0|[1-9][0-9]{0,8})$/;

const isObject = (value: unknown): value is Record<string, unknown> =>
  value !== null && typeof value === 'object' && !Array.isArray(value);

/** Whether two JSON values are equal: the same primitive, or arrays and objects equal member by member. */
function same(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (a === null || b === null || typeof a !== 'object' || typeof b !== 'object') return false;
  if (Array.isArray(a)) {
    if (!Array.isArray(b) || a.length !== b.length) return false;
    for (let i = 0; i < a.length; i++) if (!same(a[i], b[i])) return false;
    return true;
  }
  if (Array.isArray(b)) return false;
  const keys = Object.keys(a);
  if (keys.length !== Object.keys(b).length) return false;
  for (const key of keys) {
    if (!Object.hasOwn(b, key) || !same((a as Record<string, unknown>)[key], (b as Record<string, unknown>)[key]))
      return false;
  }
  return true;
}

/**
 * The value at `segments` inside `data`, or `undefined` where the path leads nowhere: own
 * properties of objects only (never a prototype's), and whole-number indexes of arrays.
 */
function reader(segments: readonly string[]): (data: unknown) => unknown {
  return (data) => {
    let current = data;
    for (const segment of segments) {
      if (current === null || typeof current !== 'object') return undefined;
      if (Array.isArray(current)) {
        if (!ARRAY_INDEX.test(segment)) return undefined;
        current = current[Number(segment)];
      } else {
        if (!Object.hasOwn(current, segment)) return undefined;
        current = (current as Record<string, unknown>)[segment];
      }
    }
    return current;
  };
}

/** Where a part of a filter sits, for error messages: `webhook.filter["customer.tier"].$gte`. */
const child = (where: string, key: string) =>
  /^[A-Za-z_$][A-Za-z0-9_$]*$/.test(key) ? `${where}.${key}` : `${where}[${JSON.stringify(key)}]`;

/** Compiles one filter, counting its clauses against the limits as it goes. */
class Compiler {
  private clauses = 0;

  private fail(where: string, problem: string): never {
    throw new PortalError('INPUT_INVALID', where, problem);
  }

  private count(where: string): void {
    if (++this.clauses > FILTER_LIMITS.clauses)
      this.fail(where, `a filter holds at most ${FILTER_LIMITS.clauses} clauses (operators and equalities).`);
  }

  /** A filter: an object whose every clause must hold. */
  filter(node: unknown, where: string, depth: number): Test {
    if (!isObject(node)) this.fail(where, 'must be an object of clauses, such as {"customer.tier": "gold"}.');
    if (depth > FILTER_LIMITS.depth) this.fail(where, `filters nest at most ${FILTER_LIMITS.depth} deep.`);
    const tests: Test[] = [];
    for (const [key, value] of Object.entries(node)) tests.push(this.clause(key, value, child(where, key), depth));
    return all(tests);
  }

  private clause(key: string, value: unknown, where: string, depth: number): Test {
    if (key === '$and' || key === '$or') {
      if (!Array.isArray(value) || value.length === 0) this.fail(where, 'must be a non-empty array of filters.');
      const tests = value.map((item, i) => this.filter(item, `${where}[${i}]`, depth + 1));
      return key === '$and' ? all(tests) : any(tests);
    }
    if (key === '$not') {
      const test = this.filter(value, where, depth + 1);
      return (data) => !test(data);
    }
    if (key.startsWith('$')) {
      if (isValueOperator(key))
        this.fail(where, `needs a path to test: put it under one, as {"amount": {"${key}": …}}.`);
      this.fail(where, `is not an operator; use one of ${OPERATOR_LIST}.`);
    }
    const segments = key.split('.');
    if (segments.some((segment) => segment === ''))
      this.fail(where, 'is not a path: segments are separated by single dots, none empty.');
    if (segments.length > FILTER_LIMITS.segments)
      this.fail(where, `a path has at most ${FILTER_LIMITS.segments} segments.`);
    return this.value(value, where, reader(segments), depth);
  }

  /** What a path's value asks: an equality, value operators, or a filter nested under the path. */
  private value(value: unknown, where: string, read: (data: unknown) => unknown, depth: number): Test {
    if (!isObject(value)) {
      this.count(where);
      return (data) => {
        const found = read(data);
        return found !== undefined && same(found, value);
      };
    }
    const keys = Object.keys(value);
    if (keys.length === 0)
      this.fail(where, 'an empty object tests nothing: give operators, as {"$exist": true}, or paths under it.');
    if (keys.some(isValueOperator)) {
      const tests: Test[] = [];
      for (const key of keys) {
        const at = child(where, key);
        if (!key.startsWith('$'))
          this.fail(at, 'mixes a path with value operators: put the path beside this one, joined to it by a dot.');
        if (!isValueOperator(key)) this.fail(at, `is not a value operator; use one of ${VALUE_OPERATORS.join(', ')}.`);
        this.count(at);
        tests.push(this.operator(key, value[key], at));
      }
      // The path read once for all its operators.
      const found = all(tests);
      return (data) => found(read(data));
    }
    const nested = this.filter(value, where, depth + 1);
    return (data) => nested(read(data));
  }

  /** One value operator with its operand, as a test of the value found at the path (`undefined`: none). */
  private operator(operator: string, operand: unknown, where: string): (found: unknown) => boolean {
    switch (operator) {
      case '$eq':
        return (found) => found !== undefined && same(found, operand);
      case '$neq':
        return (found) => found === undefined || !same(found, operand);
      case '$gt':
      case '$gte':
      case '$lt':
      case '$lte':
        return this.comparison(operator, operand, where);
      case '$in':
      case '$nin': {
        if (!Array.isArray(operand) || operand.length === 0 || operand.length > FILTER_LIMITS.list) {
          this.fail(where, `must be an array of 1 to ${FILTER_LIMITS.list} values.`);
        }
        const test = membership(operand);
        return operator === '$in' ? test : (found) => !test(found);
      }
      case '$startsWith':
      case '$endsWith': {
        if (typeof operand !== 'string') this.fail(where, 'must be a string.');
        return operator === '$startsWith'
          ? (found) => typeof found === 'string' && found.startsWith(operand)
          : (found) => typeof found === 'string' && found.endsWith(operand);
      }
      default: {
        if (typeof operand !== 'boolean')
          this.fail(where, 'must be true (the path holds a value, null included) or false (it does not).');
        return operand ? (found) => found !== undefined : (found) => found === undefined;
      }
    }
  }

  /** `$gt`, `$gte`, `$lt`, `$lte`: numbers against numbers, strings against strings (code unit order, as ATOM times sort); anything else does not match. */
  private comparison(operator: string, operand: unknown, where: string): (found: unknown) => boolean {
    if (typeof operand !== 'string' && !(typeof operand === 'number' && Number.isFinite(operand)))
      this.fail(where, 'must be a number or a string.');
    const kind = typeof operand;
    const limit = operand as number | string;
    switch (operator) {
      case '$gt':
        return (found) => typeof found === kind && (found as number | string) > limit;
      case '$gte':
        return (found) => typeof found === kind && (found as number | string) >= limit;
      case '$lt':
        return (found) => typeof found === kind && (found as number | string) < limit;
      default:
        return (found) => typeof found === kind && (found as number | string) <= limit;
    }
  }
}

function all(tests: Test[]): Test {
  if (tests.length === 1) return tests[0]!;
  return (data) => {
    for (const test of tests) if (!test(data)) return false;
    return true;
  };
}

function any(tests: Test[]): Test {
  return (data) => {
    for (const test of tests) if (test(data)) return true;
    return false;
  };
}

/**
 * A JSON value as text in one spelling whatever its objects' key order: two values are `same` when,
 * and only when, their canonical texts are equal.
 */
function canonical(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value);
  let text: string;
  if (Array.isArray(value)) {
    text = '[';
    for (let i = 0; i < value.length; i++) text += (i === 0 ? '' : ',') + canonical(value[i]);
    return `${text}]`;
  }
  const keys = Object.keys(value).sort();
  text = '{';
  for (let i = 0; i < keys.length; i++)
    text += `${i === 0 ? '' : ','}${JSON.stringify(keys[i])}:${canonical((value as Record<string, unknown>)[keys[i]!])}`;
  return `${text}}`;
}

/**
 * The canonical text of an object or array of an event's data, made once per object: every `$in`
 * of every webhook's filter that meets it reads the same text (an event's data is one object for
 * all its webhooks). Held weakly, so it goes with the event.
 */
const canonicalOf = new WeakMap<object, string>();
function canonicalCached(value: object): string {
  let text = canonicalOf.get(value);
  if (text === undefined) canonicalOf.set(value, (text = canonical(value)));
  return text;
}

/**
 * `$in`: the value found is one of `list`, or is an array holding one of them (so `{"tags": {"$in":
 * ["vip"]}}` matches `"tags": ["new", "vip"]`). Primitives are found in a set, objects and arrays by
 * their canonical text in another: a test costs one look-up a value found, never a comparison with
 * each of the list's values (100 objects against an array of 1,000 objects took seconds that way).
 */
function membership(list: unknown[]): (found: unknown) => boolean {
  const primitives = new Set(list.filter((item) => item === null || typeof item !== 'object'));
  const composites = new Set(list.filter((item) => item !== null && typeof item === 'object').map(canonical));
  // Only a value of a kind the list holds is spelled out: an array found is never one of a list of objects.
  const arrays = list.some(Array.isArray);
  const objects = list.some((item) => item !== null && typeof item === 'object' && !Array.isArray(item));
  const one = (value: unknown) => {
    if (value === null || typeof value !== 'object') return primitives.has(value);
    return (Array.isArray(value) ? arrays : objects) && composites.has(canonicalCached(value));
  };
  return (found) => {
    if (found === undefined) return false;
    if (one(found)) return true;
    return Array.isArray(found) && found.some(one);
  };
}

/**
 * The filter as it is stored: checked against the grammar and the limits, and copied through JSON
 * (a `Date` becomes its string, `undefined` members vanish). Throws `INPUT_INVALID` naming the
 * part that is wrong, under `where` (`webhook.filter`).
 */
export function checkFilter(input: unknown, where: string): EventFilter {
  let text: string | undefined;
  try {
    text = JSON.stringify(input);
  } catch {
    throw new PortalError('INPUT_INVALID', where, 'must be JSON.');
  }
  if (text === undefined) throw new PortalError('INPUT_INVALID', where, 'must be an object of clauses.');
  if (text.length > FILTER_LIMITS.chars)
    throw new PortalError('INPUT_INVALID', where, `must be at most ${FILTER_LIMITS.chars} characters as JSON.`);
  const filter = JSON.parse(text) as unknown;
  compiled.set(filter as object, new Compiler().filter(filter, where, 1));
  return filter as EventFilter;
}

/** Filters compiled, by the object they were compiled from (a stored record's stays the same object). */
const compiled = new WeakMap<object, Test>();

/** Whether `data` (an event's) matches `filter` (a stored one: see `checkFilter`). */
export function matchesFilter(filter: EventFilter, data: unknown): boolean {
  let test = compiled.get(filter);
  if (test === undefined) compiled.set(filter, (test = new Compiler().filter(filter, 'filter', 1)));
  return test(data);
}
