/**
 * `svc-gateway doctor`: checks what an operator gets wrong before clients notice, with the
 * settings a gateway would start with, and says what to fix — the database (reachable, schema
 * current, its clock), the blob store, the certificate (expiry, names against the public URL), the
 * public URL and the FTP passive address against the listeners. One line per check: ok, warn or
 * fail; any fail makes the exit code 1. It starts no listener and changes nothing (a missing SQLite
 * file is created empty, as `serve` would). The settings checks (certificate, public URL, passive
 * address) live in the core (src/core/site/checks.ts): the Site admin page shows the same ones.
 */
import path from 'node:path';
import type { Config } from './config.ts';
import { createBlobStore } from './core/files/blobstores/index.ts';
import { within } from './core/readiness.ts';
import { settingsChecks, type Check, type Verdict } from './core/site/checks.ts';
import { Database } from './db/database.ts';

/** PROBE_TIMEOUT_MS bounds each network check: an unreachable server is a finding, not a hang. */
const PROBE_TIMEOUT_MS = 5_000;
/** CLOCK_WARN_MS and CLOCK_FAIL_MS: instances sharing a database must agree on the time (lockouts, leases, signed URLs). */
const CLOCK_WARN_MS = 2_000;
const CLOCK_FAIL_MS = 30_000;

const message = (err: unknown): string => (err instanceof Error ? err.message : String(err));

/** checkDatabase opens the database, runs a statement, checks the schema and, on PostgreSQL, the clock. */
async function checkDatabase(config: Config): Promise<Check[]> {
  const setting = config.database.url ? 'database.url (SVC_DATABASE_URL)' : 'data_dir (SVC_DATA_DIR)';
  let db: Database;
  try {
    db = await within(Database.open(config), PROBE_TIMEOUT_MS, 'database');
  } catch (err) {
    return [
      { name: 'database', verdict: 'fail', detail: message(err) },
      { name: 'clock', verdict: 'warn', detail: 'not compared: the database did not answer' },
    ];
  }
  const out: Check[] = [];
  try {
    const local0 = Date.now();
    const { now } = await within(db.ping(), PROBE_TIMEOUT_MS, 'database');
    const local1 = Date.now();
    const pending = await within(db.pendingMigrations(), PROBE_TIMEOUT_MS, 'database');
    const kind = db.kind === 'postgres' ? 'PostgreSQL' : `SQLite in ${config.data_dir}`;
    out.push(
      pending
        ? {
            name: 'database',
            verdict: 'warn',
            detail: `${kind} answers, but its schema is behind this version: run \`svc-gateway migrate\` (serve migrates at start)`,
          }
        : { name: 'database', verdict: 'ok', detail: `${kind} answers; schema up to date` },
    );
    if (now) {
      // The server's time against the middle of the round trip.
      const skew = now.getTime() - (local0 + local1) / 2;
      const ahead = `${Math.abs(skew / 1000).toFixed(1)} s ${skew > 0 ? 'behind' : 'ahead of'} the database server`;
      const verdict: Verdict =
        Math.abs(skew) > CLOCK_FAIL_MS ? 'fail' : Math.abs(skew) > CLOCK_WARN_MS ? 'warn' : 'ok';
      out.push({
        name: 'clock',
        verdict,
        detail:
          verdict === 'ok'
            ? `agrees with the database server's (${ahead})`
            : `this machine's clock is ${ahead}: run NTP (chrony, systemd-timesyncd) here and on the database server; lockouts, leases and signed URLs compare times across instances`,
      });
    } else {
      out.push({
        name: 'clock',
        verdict: 'ok',
        detail: `SQLite: one machine, one clock (now ${new Date().toISOString()}); keep it synchronised (NTP) for signed URLs and webhook signatures`,
      });
    }
  } catch (err) {
    out.push({ name: 'database', verdict: 'fail', detail: `setting ${setting}: ${message(err)}` });
  } finally {
    await db.close().catch(() => undefined);
  }
  return out;
}

/** checkStorage asks the blob store for a blob that does not exist: the store's real read path. */
async function checkStorage(config: Config): Promise<Check> {
  const where =
    config.storage.kind === 's3'
      ? `S3 bucket ${config.storage.s3.bucket}${config.storage.s3.endpoint ? ` at ${config.storage.s3.endpoint}` : ''}`
      : `local store in ${path.join(config.data_dir, 'blobs')}`;
  const settings =
    config.storage.kind === 's3'
      ? 'storage.s3.* (SVC_S3_BUCKET, SVC_S3_ENDPOINT, SVC_S3_REGION, AWS credentials)'
      : 'data_dir (SVC_DATA_DIR)';
  try {
    const store = await createBlobStore(config, config.data_dir);
    try {
      await within(
        (async () => {
          await store.probe?.();
          await store.size('doctor-probe');
        })(),
        PROBE_TIMEOUT_MS,
        'blob store',
      );
      const space = store.space ? await store.space().catch(() => null) : null;
      if (space && space.total > 0 && space.free / space.total < 0.05)
        return {
          name: 'storage',
          verdict: 'warn',
          detail: `${where} answers, but only ${Math.round((space.free / space.total) * 100)}% of its file system is free`,
        };
      return { name: 'storage', verdict: 'ok', detail: `${where} answers` };
    } finally {
      await store.close().catch(() => undefined);
    }
  } catch (err) {
    return { name: 'storage', verdict: 'fail', detail: `${where}: ${message(err)} (settings ${settings})` };
  }
}

/** runDoctor runs every check; the database, the store and the rest at once. */
export async function runDoctor(config: Config): Promise<Check[]> {
  const [database, storage] = await Promise.all([checkDatabase(config), checkStorage(config)]);
  return [...database, storage, ...settingsChecks(config)];
}

/** formatCheck prints one check as a report line: `fail  database: …`. */
export function formatCheck(c: Check): string {
  return `${c.verdict.padEnd(4)}  ${c.name}: ${c.detail}`;
}
