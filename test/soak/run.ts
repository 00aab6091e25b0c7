/**
 * `npm run soak -- --minutes N [--users 10] [--database postgres://…] [--max-mib 8]
 * [--idle-seconds 60] [--idle-connections 12] [--pause-ms 100]`: the soak of ./soak.ts as a
 * command. Exit code 0 when it passed, 1 when it found an error, a lost or changed file, a
 * descriptor leak or RSS that did not come back, 2 when it could not run.
 */
import { parseArgs } from 'node:util';
import { describeSummary, runSoak } from './soak.ts';

const { values } = parseArgs({
  options: {
    minutes: { type: 'string' },
    users: { type: 'string', default: '10' },
    database: { type: 'string', default: '' },
    'max-mib': { type: 'string', default: '8' },
    'idle-seconds': { type: 'string', default: '60' },
    'idle-connections': { type: 'string', default: '12' },
    'pause-ms': { type: 'string', default: '100' },
  },
});

function number(name: keyof typeof values, min: number, max: number): number {
  const n = Number(values[name]);
  if (!Number.isFinite(n) || n < min || n > max) {
    console.error(`soak: --${name} must be a number from ${min} to ${max}`);
    process.exit(2);
  }
  return n;
}

if (values.minutes === undefined) {
  console.error('usage: npm run soak -- --minutes N [--users 10] [--database postgres://…] [--max-mib 8]');
  process.exit(2);
}
if (values.database && !/^postgres(ql)?:\/\//.test(values.database)) {
  console.error('soak: --database takes a postgres:// URL (its server gets a fresh database)');
  process.exit(2);
}

try {
  const summary = await runSoak({
    minutes: number('minutes', 0.1, 24 * 60),
    users: number('users', 1, 100),
    database: values.database,
    maxMiB: number('max-mib', 0.01, 64),
    idleSeconds: number('idle-seconds', 0, 3600),
    idleConnections: number('idle-connections', 0, 200),
    pauseMs: number('pause-ms', 0, 60_000),
    print: (line) => console.log(line),
  });
  for (const line of describeSummary(summary)) console.log(line);
  process.exit(summary.failures.length ? 1 : 0);
} catch (err) {
  console.error(`soak: could not run: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
  process.exit(2);
}
