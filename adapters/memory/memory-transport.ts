import type { WebhookCall, WebhookCallResult, WebhookTransport } from '../../src/ports.js';

/** What a scripted `respond` may answer: a status code, a fuller result, or a thrown error (a network failure). */
export type MemoryResponse = number | Partial<WebhookCallResult>;

export interface MemoryTransport extends WebhookTransport {
  /** Every call made, in order. */
  readonly calls: WebhookCall[];
}

/**
 * Records every webhook call in `.calls` instead of sending it, and answers 200, or what
 * `respond(call)` answers. For tests and demos.
 */
export function memoryTransport(
  options: { respond?: (call: WebhookCall) => MemoryResponse | Promise<MemoryResponse> } = {},
): MemoryTransport {
  const calls: WebhookCall[] = [];
  return {
    calls,
    async send(call) {
      calls.push(call);
      try {
        const answer = options.respond === undefined ? 200 : await options.respond(call);
        const result = typeof answer === 'number' ? { statusCode: answer } : answer;
        return {
          statusCode: result.statusCode ?? null,
          headers: result.headers ?? {},
          error: result.error ?? null,
          ...(result.local ? { local: true } : {}),
        };
      } catch (error) {
        return { statusCode: null, headers: {}, error: error instanceof Error ? error.message : String(error) };
      }
    },
  };
}
