/**
 * The one place the core reaches into an adapter: the contract makes the memory adapters the
 * default storage and blob store, and the HTTP transport the default transport, so a portal runs
 * with no adapter named at all.
 */
export { memoryBlobs as defaultBlobs, memoryStorage as defaultStorage } from '../adapters/memory/index.js';
export { httpTransport as defaultTransport } from '../adapters/http-transport/index.js';
