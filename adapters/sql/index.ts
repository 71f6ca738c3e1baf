export { sqlStorage, type SqlStorageOptions } from './sql-storage.js';
export { sqlBlobs, type SqlBlobsOptions } from './sql-blobs.js';
export { sqlAdapters, connectDatabase, type Database, type SqlAdaptersOptions } from './connect.js';
export type { SqlClient } from './client.js';
export type { SqlOptions } from './schema.js';
