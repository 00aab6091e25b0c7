/**
 * The parts of a core that front ends must not reach: its database and its file service's
 * storage and background work (STYLE.md §10, "a narrow adapter API"). The process (main.ts) and
 * tests reach them here; the lint fence keeps protocols/ on src/core/index.ts, which does not
 * export this module.
 */
import type { Database } from '../db/database.ts';
import type { Files } from './files/files.ts';

/** CoreInternals are a core's database and full file service. */
export interface CoreInternals {
  readonly db: Database;
  readonly files: Files;
}

const byCore = new WeakMap<object, CoreInternals>();

/** keepInternals records the internals of a core as createCore builds it. */
export function keepInternals(core: object, internals: CoreInternals): void {
  byCore.set(core, internals);
}

/** internalsOf gives the internals of a core made by createCore. */
export function internalsOf(core: object): CoreInternals {
  const found = byCore.get(core);
  if (!found) throw new Error('internalsOf: not a core made by createCore');
  return found;
}
