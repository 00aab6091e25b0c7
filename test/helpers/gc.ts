/** Forcing garbage collection in tests (memory bounds, and timers that must survive a collection). */
import v8 from 'node:v8';
import vm from 'node:vm';

/** collectGarbage is global.gc when node runs with --expose-gc, else the same function enabled now. */
export function collectGarbage(): () => void {
  const existing = (globalThis as { gc?: () => void }).gc;
  if (existing) return existing;
  v8.setFlagsFromString('--expose-gc');
  const gc = vm.runInNewContext('gc') as unknown;
  if (typeof gc !== 'function') throw new Error('this node cannot expose gc');
  return gc as () => void;
}
