/**
 * `npm run bench`: every protocol side by side with its peer in one run, on the compiled build, at
 * both durability settings. Compiles once, then runs test/bench/ftp.bench.ts (vsftpd),
 * sftp.bench.ts (OpenSSH sftp-server) and webdav.bench.ts (nginx dav), each at SVC_DURABILITY=fsync
 * and then =os (each benchmark interleaves its own repetitions with its peer's), each in its own
 * process; every one writes results-<protocol>[-os].md and .json, and test/bench/summary.ts turns
 * the JSON files into test/bench/results-summary.md. A benchmark that fails does not stop the
 * others; the command exits 1 when any failed.
 *
 *   npm run bench                        (about 35 minutes on the quiet 2-core machine)
 *   SVC_BENCH_QUICK=1 npm run bench      (a smoke run: 64 MiB, 100 small files, 1 repetition)
 *   npm run bench -- sftp webdav         (only these protocols, both settings)
 *
 * Needs root: the peers run as throwaway local users (useradd) and are installed with apt-get when
 * missing. The REST benchmark is `npm run bench:rest`.
 */
import { spawn, spawnSync } from 'node:child_process';
import { rmSync } from 'node:fs';
import { type BenchRun, PROTOCOLS, type Protocol, resultsFile, SETTINGS, writeSummary } from './summary.ts';

const started = performance.now();
const asked = process.argv.slice(2);
for (const a of asked)
  if (!(PROTOCOLS as readonly string[]).includes(a))
    throw new Error(`unknown protocol ${a}: choose from ${PROTOCOLS.join(', ')}`);
const protocols = asked.length ? (asked as Protocol[]) : [...PROTOCOLS];

const compile = spawnSync('npm', ['run', 'compile'], { stdio: 'inherit' });
if (compile.status !== 0) {
  console.error('npm run compile failed');
  process.exit(1);
}

/** bench runs one benchmark in its own process at a durability setting and says how it ended. */
function bench(name: Protocol, durability: BenchRun['durability']): Promise<BenchRun> {
  // A failed run must not leave an older run's figures for the summary.
  rmSync(resultsFile(name, durability), { force: true });
  const t0 = performance.now();
  console.log(`\n=== ${name}, SVC_DURABILITY=${durability} ===\n`);
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--import', 'tsx', `test/bench/${name}.bench.ts`], {
      env: { ...process.env, SVC_DURABILITY: durability },
      stdio: 'inherit',
    });
    child.on('close', (code) =>
      resolve({ bench: name, durability, code, seconds: (performance.now() - t0) / 1000 }),
    );
  });
}

const runs: BenchRun[] = [];
for (const p of protocols) for (const d of SETTINGS) runs.push(await bench(p, d));
const file = writeSummary(runs, (performance.now() - started) / 1000);
console.log(`\nwrote ${file}`);
for (const r of runs) console.log(`${r.bench} at ${r.durability}: exit ${r.code}, ${r.seconds.toFixed(0)} s`);
if (runs.some((r) => r.code !== 0)) process.exit(1);
