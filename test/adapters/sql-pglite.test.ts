import { sqlSuites } from './sql/suite.js';

// The SQL adapter's conformance and own suites on PGlite (the other backend: sql-postgres.test.ts).
await sqlSuites('PGlite');
