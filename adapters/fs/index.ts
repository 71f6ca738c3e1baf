export { fsStorage, type FsStorageOptions } from './fs-storage.js';
export { fsBlobs, type FsBlobsOptions } from './fs-blobs.js';
export { DirectoryInUseError } from './lock.js';
export { DamagedLogError, type DiscardReport, type RepairReport } from './record-log.js';
// For a host that keeps files of its own beside the store (the standalone server's keys): made and
// written so that a crash leaves the old file or the new one, whole.
export { ensureDirectory, writeFileAtomically } from './durable.js';
