import { memoryBlobs } from '../../adapters/memory/index.js';
import { blobStoreSuite } from '../conformance/blobs.js';
import { storageSuite } from '../conformance/storage.js';
import { NOTHING_OUTLIVES, memoryStorageFactory } from '../helpers/memory.js';

storageSuite(memoryStorageFactory());
blobStoreSuite({
  name: 'memory',
  create: async ({ clock }) => memoryBlobs({ clock }),
  destroy: async () => {},
  whyNoReopen: NOTHING_OUTLIVES,
});
