/**
 * underStrace runs node with `nodeArgs` under strace (following threads, tracing the system calls
 * `calls`, strings up to 4 KiB) and returns its exit status, stderr and the trace's lines, each
 * starting with the thread's id. It fails naming the Debian package when strace is missing.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

export function underStrace(
  calls: string,
  nodeArgs: string[],
  opts: { env?: NodeJS.ProcessEnv; paths?: boolean } = {},
): { status: number | null; stderr: string; lines: string[] } {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'svc-strace-'));
  try {
    const trace = path.join(dir, 'trace');
    const flags = ['-f', '-qq', '-s', '4096', ...(opts.paths ? ['-y'] : []), '-e', `trace=${calls}`];
    const run = spawnSync('strace', [...flags, '-o', trace, process.execPath, ...nodeArgs], {
      encoding: 'utf8',
      ...(opts.env ? { env: opts.env } : {}),
    });
    if (run.error)
      throw new Error(`strace is needed for this test (Debian package strace): ${run.error.message}`);
    return { status: run.status, stderr: run.stderr, lines: readFileSync(trace, 'utf8').split('\n') };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
