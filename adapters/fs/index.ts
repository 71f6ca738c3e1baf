export { fsStorage, type FsStorageOptions } from './fs-storage.js';
export { fsBlobs, type FsBlobsOptions } from './fs-blobs.js';
export { DirectoryInUseError } from './lock.js';
export { DamagedLogError, type DiscardReport, type RepairReport } from './record-log.js';
