/**
 * Fills the Action log of a gateway database with N synthetic Actions, fast (issue 19, item 3):
 *
 *   node --import tsx test/bench/seed-actions.ts --count 10000000 --database postgres://…/db
 *   node --import tsx test/bench/seed-actions.ts --count 10000000 --database data/gateway.sqlite
 *
 * One INSERT … SELECT generates every row inside the database (PostgreSQL: generate_series;
 * SQLite: a recursive CTE, in one transaction), with the table's secondary indexes dropped first
 * and rebuilt after (a sorted build beats 10 million random inserts), then ANALYZE. The rows are
 * the same on both databases: each column is a multiplicative hash of the row number, so a run is
 * repeatable without a random seed.
 *
 * The spread: 200 users, the first ones far busier (the square of a uniform number picks one);
 * 70% of actions under the user's home `users/uN/` and 30% under 20 `shared/teamN/` folders,
 * 0 to 3 folders deep (p0–p9 / q0–q9 / r0–r9), 500 file names; read 35%, create 20%, update 10%,
 * destroy 5%, move 4% and copy 2% (source in the same folder), login 15%, failedlogin 3%, and 6%
 * account changes without a path; the five interfaces. Times run over `--days` (default 90) up
 * to a second ago, denser toward now (the i-th of n is (1 - i/n)² of the span back), so about
 * sqrt(1/days) of them, 10.5% for 90 days, fall in the 24 hours the history endpoints show; ids
 * grow with time, as recording gives them.
 */
import { createRequire } from 'node:module';
import pg from 'pg';

/** SqliteDb is the part of better-sqlite3's Database the benchmark uses (the package ships no types). */
export interface SqliteDb {
  prepare(sql: string): {
    reader: boolean;
    all(...params: unknown[]): unknown[];
    run(...params: unknown[]): unknown;
  };
  exec(sql: string): void;
  pragma(text: string): unknown;
  transaction(f: () => void): () => void;
  close(): void;
}

/** openSqlite opens a SQLite file with better-sqlite3. */
export function openSqlite(file: string): SqliteDb {
  const Database = createRequire(import.meta.url)('better-sqlite3') as new (file: string) => SqliteDb;
  return new Database(file);
}

/** SeedTarget is the database to fill: a PostgreSQL URL or a SQLite file. */
export type SeedTarget = { kind: 'postgres'; url: string } | { kind: 'sqlite'; file: string };

const DAY_MS = 86_400_000;
const USERS = 200;
const TEAMS = 20;
const FILES = 500;
const ACCOUNT_ACTIONS = ['user_update', 'permission_create', 'api_key_create', 'group_update'];
const INTERFACES = ['restapi', 'ftp', 'sftp', 'dav', 'web'];

/** seedActions appends `count` Actions to the database's log and returns how long it took (ms). */
export async function seedActions(target: SeedTarget, count: number, days = 90): Promise<number> {
  if (!Number.isInteger(count) || count < 1) throw new Error(`a count of Actions is needed, got ${count}`);
  const t0 = performance.now();
  const now = Date.now() - 1000;
  const sql = insertSql(target.kind, count, now, days * DAY_MS);
  if (target.kind === 'postgres') {
    const c = new pg.Client({ connectionString: target.url });
    await c.connect();
    try {
      await c.query("SET maintenance_work_mem = '512MB'");
      await c.query('SET synchronous_commit = off');
      const { rows } = await c.query<{ indexdef: string; indexname: string }>(
        `SELECT i.relname AS indexname, pg_get_indexdef(i.oid) AS indexdef FROM pg_index x
           JOIN pg_class i ON i.oid = x.indexrelid WHERE x.indrelid = 'actions'::regclass AND NOT x.indisprimary`,
      );
      for (const r of rows) await c.query(`DROP INDEX "${r.indexname}"`);
      await c.query(sql);
      for (const r of rows) await c.query(r.indexdef);
      await c.query('ANALYZE actions');
    } finally {
      await c.end();
    }
  } else {
    const db = openSqlite(target.file);
    try {
      db.pragma('cache_size = -524288'); // 512 MiB for the index builds
      const indexes = db
        .prepare(
          "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = 'actions' AND sql IS NOT NULL",
        )
        .all() as { name: string; sql: string }[];
      db.transaction(() => {
        for (const i of indexes) db.exec(`DROP INDEX "${i.name}"`);
        db.exec(sql);
        for (const i of indexes) db.exec(i.sql);
      })();
      db.exec('ANALYZE actions');
    } finally {
      db.close();
    }
  }
  return Math.round(performance.now() - t0);
}

/** insertSql is the one statement that generates the rows, in each database's dialect. */
function insertSql(kind: SeedTarget['kind'], n: number, now: number, span: number): string {
  const pgsql = kind === 'postgres';
  // A number in [0, 1) from row number i and an odd multiplier: the low 32 bits of the product.
  const hash = (m: number) => `((i * ${m}) % 4294967296)${pgsql ? '::float8' : ''} / 4294967296.0`;
  const int = (x: string) => (pgsql ? `floor(${x})::bigint` : `CAST(${x} AS INTEGER)`);
  const pick = (list: string[], x: string) =>
    `CASE ${int(`${x} * ${list.length}`)} ${list.map((v, j) => `WHEN ${j} THEN '${v}'`).join(' ')} END`;
  const rows = pgsql ? `SELECT i::bigint AS i FROM generate_series(1, ${n}) AS g(i)` : `SELECT i FROM seq`;
  const cte = pgsql
    ? ''
    : `WITH RECURSIVE seq(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM seq WHERE i < ${n}) `;
  // Parenthesize around ||: SQLite binds it tighter than * / %, PostgreSQL looser.
  // r: the row's numbers. u: user; k: kind of action; home/depth/seg: where; f: file.
  const base = `SELECT i,
      ${int(`${USERS} * ${hash(2654435761)} * ${hash(2654435761)}`)} + 1 AS u,
      ${hash(2246822519)} AS k,
      ${hash(3266489917)} AS h,
      ${int(`4 * ${hash(668265263)}`)} AS depth,
      ${int(`1000 * ${hash(374761393)}`)} AS seg,
      ${int(`${FILES} * ${hash(3323198485)}`)} AS f,
      ${hash(2870177451)} AS x
    FROM (${rows}) AS numbered`;
  const folder = `(CASE WHEN h < 0.7 THEN 'users/u' || u ELSE 'shared/team' || (${int(`h * 1000`)} % ${TEAMS}) END
      || CASE WHEN depth >= 1 THEN '/p' || (seg / 100) ELSE '' END
      || CASE WHEN depth >= 2 THEN '/q' || (seg / 10 % 10) ELSE '' END
      || CASE WHEN depth >= 3 THEN '/r' || (seg % 10) ELSE '' END)`;
  const file = `'f' || f || CASE f % 4 WHEN 0 THEN '.txt' WHEN 1 THEN '.pdf' WHEN 2 THEN '.jpg' ELSE '.csv' END`;
  const action = `CASE WHEN k < 0.35 THEN 'read' WHEN k < 0.55 THEN 'create' WHEN k < 0.65 THEN 'update'
      WHEN k < 0.70 THEN 'destroy' WHEN k < 0.74 THEN 'move' WHEN k < 0.76 THEN 'copy'
      WHEN k < 0.91 THEN 'login' WHEN k < 0.94 THEN 'failedlogin' ELSE ${pick(ACCOUNT_ACTIONS, 'x')} END`;
  const hasPath = 'k < 0.76';
  const relocated = 'k >= 0.70 AND k < 0.76';
  const when = `${now} - ${int(`${span} * (1.0 - i * 1.0 / ${n}) * (1.0 - i * 1.0 / ${n})`)}`;
  return `${cte}INSERT INTO actions ("when", action, path, source, destination, display, ip, user_id,
      username, interface, failure_type, targets)
    SELECT ${when}, ${action},
      CASE WHEN ${hasPath} THEN ${folder} || '/' || ${file} ELSE '' END,
      CASE WHEN ${relocated} THEN ${folder} || '/old-' || ${file} ELSE '' END,
      CASE WHEN ${relocated} THEN ${folder} || '/' || ${file} ELSE '' END,
      '', '10.' || (u % 256) || '.' || ${int('x * 256')} || '.' || (f % 256),
      u, 'user' || u, ${pick(INTERFACES, 'x')},
      CASE WHEN k >= 0.91 AND k < 0.94 THEN 'password_mismatch' ELSE '' END, '[]'
    FROM (${base}) AS r`;
}

const arg = (flag: string) => {
  const at = process.argv.indexOf(flag);
  return at > 0 ? process.argv[at + 1] : undefined;
};

if (process.argv[1]?.endsWith('seed-actions.ts')) {
  const database = arg('--database');
  const count = Number(arg('--count'));
  if (!database) throw new Error('usage: seed-actions.ts --count N --database URL|FILE [--days D]');
  const target: SeedTarget = /^postgres(ql)?:/.test(database)
    ? { kind: 'postgres', url: database }
    : { kind: 'sqlite', file: database };
  const ms = await seedActions(target, count, Number(arg('--days') ?? 90));
  console.log(`seeded ${count} Actions in ${(ms / 1000).toFixed(1)} s`);
}
