export { memoryStorage } from './memory-storage.js';
export { memoryBlobs } from './memory-blobs.js';
export { memoryTransport, type MemoryTransport, type MemoryResponse } from './memory-transport.js';
