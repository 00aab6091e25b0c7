/**
 * The failed logins the login gate counts before it checks a password (DESIGN.md "Lockout"), read
 * from the Action log with the indexes made for them: `action = 'failedlogin'` and
 * `action IN ('login', 'failedlogin')` are written as literals, which is what lets a database use
 * a partial index (with the action bound as a parameter, SQLite read every Action of the window
 * instead: 3.6 ms a login with 66,000 Actions in the last half hour, growing with the site's
 * traffic; 0.014 ms with the index).
 */
import type { EntityManager } from 'typeorm';
import { sql } from '../../db/sql.ts';

/** FAILED_FROM_IP counts an address's failed logins since a time (migration 0016's index). */
export const FAILED_FROM_IP = `SELECT COUNT(*) AS n FROM actions WHERE action = 'failedlogin' AND ip = ? AND "when" > ?`;

/** UNKNOWN_NAME_FAILURES lists when a lower-cased username failed as unknown since a time (the logins' index, migration 0008). */
export const UNKNOWN_NAME_FAILURES =
  `SELECT "when" FROM actions WHERE action IN ('login', 'failedlogin') AND action = 'failedlogin' ` +
  `AND failure_type = 'username_not_found' AND "when" > ? AND LOWER(username) = ? ORDER BY "when", id`;

/** failedLoginsFrom counts the failed logins from client address `ip` since `since`. */
export async function failedLoginsFrom(em: EntityManager, ip: string, since: Date): Promise<number> {
  const [row] = await sql<{ n: number | string }>(em, FAILED_FROM_IP, [ip, since.getTime()]);
  return Number(row?.n ?? 0);
}

/**
 * unknownNameFailures gives the times, oldest first, of the failed logins with username_not_found
 * for `nameKey` (a lower-cased username) since `since`.
 */
export async function unknownNameFailures(
  em: EntityManager,
  nameKey: string,
  since: Date,
): Promise<number[]> {
  const rows = await sql<{ when: number | string }>(em, UNKNOWN_NAME_FAILURES, [since.getTime(), nameKey]);
  return rows.map((r) => Number(r.when));
}
