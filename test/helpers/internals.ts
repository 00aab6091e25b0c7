/**
 * Tests reach a core's database and full file service here (adapters cannot: src/core/internals.ts).
 */
import type { Database } from '../../src/db/database.ts';
import type { Core } from '../../src/core/index.ts';
import type { Files } from '../../src/core/files/files.ts';
import { internalsOf } from '../../src/core/internals.ts';

/** dbOf is the database of a core, for fixtures and for reading what a test's requests wrote. */
export function dbOf(core: Core): Database {
  return internalsOf(core).db;
}

/** filesOf is the full file service of a core: its blob store, leases and background work. */
export function filesOf(core: Core): Files {
  return internalsOf(core).files;
}
