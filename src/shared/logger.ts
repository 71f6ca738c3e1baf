/** The part of a pino logger the portal uses; pino, bunyan-style and console wrappers fit. */
export interface Logger {
  debug(object: object, message?: string): void;
  info(object: object, message?: string): void;
  warn(object: object, message?: string): void;
  error(object: object, message?: string): void;
}

const ignore = () => {};

export const silentLogger: Logger = { debug: ignore, info: ignore, warn: ignore, error: ignore };

/** One JSON object a line on stdout (warnings and errors on stderr): what the standalone server prints. */
export function jsonLineLogger(level: 'debug' | 'info' | 'warn' | 'error' = 'info'): Logger {
  const order = ['debug', 'info', 'warn', 'error'] as const;
  const line = (at: (typeof order)[number]) =>
    order.indexOf(at) < order.indexOf(level)
      ? ignore
      : (object: object, message?: string) => {
          const text = JSON.stringify({ time: new Date().toISOString(), level: at, ...object, msg: message }) + '\n';
          (at === 'warn' || at === 'error' ? process.stderr : process.stdout).write(text);
        };
  return { debug: line('debug'), info: line('info'), warn: line('warn'), error: line('error') };
}

const warned = new Set<string>();

/**
 * For a warning about the configuration when the host gave no logger: Node's own process warning
 * (printed on stderr, and seen by `process.on('warning')`), once per message per process, so that a
 * setting that loses data on restart is never silent.
 */
export const processWarnings: Logger = {
  ...silentLogger,
  warn(_object, message) {
    if (message === undefined || warned.has(message)) return;
    warned.add(message);
    process.emitWarning(message, { code: 'CUSTOMER_PORTAL_CONFIG' });
  },
};
