import { memoryBlobs, memoryStorage } from '../adapters/memory/index.js';
import { blobStoreSuite } from './conformance/blobs.js';
import { storageSuite } from './conformance/storage.js';

storageSuite({ name: 'memory', create: async () => memoryStorage(), destroy: async () => {} });
blobStoreSuite({ name: 'memory', create: async ({ clock }) => memoryBlobs({ clock }), destroy: async () => {} });
