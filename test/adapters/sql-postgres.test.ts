import { sqlSuites } from './sql/suite.js';

// The SQL adapter's conformance and own suites on PostgreSQL (the other backend: sql-pglite.test.ts).
await sqlSuites('PostgreSQL');
