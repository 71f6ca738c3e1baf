/**
 * The portal server of `portal.ts` where `@opentelemetry/api` is not installed: its resolution
 * fails, as it does for a host without the package (the telemetry scenario's "absent").
 */
import { register } from 'node:module';

const HOOKS = `
export async function resolve(specifier, context, next) {
  if (specifier.startsWith('@opentelemetry/')) {
    const error = new Error("Cannot find package '" + specifier + "'");
    error.code = 'ERR_MODULE_NOT_FOUND';
    throw error;
  }
  return next(specifier, context);
}`;
register('data:text/javascript,' + encodeURIComponent(HOOKS));
await import('./portal.js');
