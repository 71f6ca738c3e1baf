export { agreementRecord, attachmentRecord, eventRecord } from '../conformance/fixtures.js';

/** Rejects? Then the error; resolves? Then a failure naming what it resolved. */
export async function rejection(promise: Promise<unknown>): Promise<Error> {
  let value: unknown;
  try {
    value = await promise;
  } catch (error) {
    return error as Error;
  }
  throw new Error(`expected a rejection, got ${JSON.stringify(value)}`);
}
