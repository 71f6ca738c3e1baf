/**
 * Adds `open` and `close` to an adapter's methods and makes every method reject with a clear
 * message before `open()` finished (the tables may not exist yet: the driver's "relation does not
 * exist" would not say why) and after `close()`. `close` releases nothing of the client: its owner
 * closes it. Methods named in `iterables` return async iterables and are wrapped as such.
 */
export function guardUntilOpen<T extends object>(
  who: string,
  methods: T,
  open: () => Promise<void>,
  iterables: readonly string[] = [],
): T & { open(): Promise<void>; close(): Promise<void> } {
  let state: 'new' | 'opening' | 'open' | 'closed' = 'new';
  let opening: Promise<void> | undefined;

  const check = () => {
    if (state === 'open') return;
    throw new Error(
      state === 'closed'
        ? `${who}: used after close()`
        : `${who}: call open() first and wait for it (createPortal does)`,
    );
  };

  const guarded: Record<string, unknown> = {};
  for (const [name, method] of Object.entries(methods)) {
    if (typeof method !== 'function') continue;
    const run = method as (...args: unknown[]) => unknown;
    guarded[name] = iterables.includes(name)
      ? async function* (...args: unknown[]) {
          check();
          yield* run(...args) as AsyncIterable<unknown>;
        }
      : async (...args: unknown[]) => {
          check();
          return run(...args);
        };
  }

  return Object.assign(guarded as T, {
    open() {
      if (state === 'closed') return Promise.reject(new Error(`${who}: open() after close(); make a new adapter`));
      opening ??= (async () => {
        state = 'opening';
        try {
          await open();
          if (state === 'opening') state = 'open';
        } catch (error) {
          state = 'new';
          opening = undefined;
          throw error;
        }
      })();
      return opening;
    },
    async close() {
      state = 'closed';
    },
  });
}
