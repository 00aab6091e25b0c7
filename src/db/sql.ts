/**
 * sql runs one hand-written statement on either database, for the per-file hot paths (issue 13):
 * TypeORM's query builder spends more time building a statement than SQLite spends running it.
 * Statements are written once with `?` placeholders; PostgreSQL's `$n` text is made once per
 * statement and kept. better-sqlite3 keeps the prepared statement by its text (TypeORM's cache),
 * so a hot statement is prepared once.
 */
import type { DataSource, EntityManager, EntitySchema, ValueTransformer } from 'typeorm';
import type { DatabaseKind } from './database.ts';

const pgText = new Map<string, string>();
/** the part of a better-sqlite3 connection and statement that sqlArrays uses (it ships no types) */
interface Database {
  prepare(text: string): Statement;
}
interface Statement {
  raw(on: boolean): Statement;
  all(...params: unknown[]): unknown[];
}
/** the raw-mode statements of each SQLite connection, by their text (bounded as pgText is) */
const rawStatements = new WeakMap<Database, Map<string, Statement>>();

/** sql runs `text` with `params` in `em`'s unit of work and returns the rows it answers. */
export function sql<T>(em: EntityManager, text: string, params: readonly unknown[]): Promise<T[]> {
  if (em.connection.driver.options.type !== 'postgres') return em.query(text, params as unknown[]);
  let pg = pgText.get(text);
  if (pg === undefined) {
    let n = 0;
    pg = text.replace(/\?/g, () => `$${++n}`);
    // Statements with an IN list vary by its length; a bounded cache still keeps the hot ones.
    if (pgText.size < 1000) pgText.set(text, pg);
  }
  return em.query(pg, params as unknown[]).then((r: unknown) =>
    // TypeORM answers an UPDATE or DELETE on PostgreSQL with [rows, row count]: its RETURNING rows
    // are the first (on SQLite a statement with RETURNING answers its rows alone).
    UPDATE_OR_DELETE.test(pg) ? ((r as [T[], number])[0] ?? []) : (r as T[]),
  );
}
const UPDATE_OR_DELETE = /^\s*(UPDATE|DELETE)\b/i;

/**
 * sqlArrays is sql with each row an array of its columns in the statement's order, for listings:
 * better-sqlite3 builds an object per row through V8's API, which costs twice what reading the
 * row does, so a 10,000-entry folder's rows are read in raw mode (about 12 → 6 ms here). On
 * PostgreSQL the row objects are turned into arrays, the columns in the statement's order.
 */
export async function sqlArrays(
  em: EntityManager,
  text: string,
  params: readonly unknown[],
): Promise<unknown[][]> {
  const driver = em.connection.driver as unknown as {
    options: { type: string };
    databaseConnection?: Database;
  };
  const db = driver.databaseConnection;
  if (driver.options.type !== 'better-sqlite3' || !db)
    return (await sql<Record<string, unknown>>(em, text, params)).map((r) => Object.values(r));
  let statements = rawStatements.get(db);
  if (!statements) rawStatements.set(db, (statements = new Map()));
  let statement = statements.get(text);
  if (!statement) {
    statement = db.prepare(text).raw(true);
    if (statements.size < 1000) statements.set(text, statement);
  }
  return statement.all(...params) as unknown[][];
}

/**
 * bytewise makes a text expression compare by code point on both databases: SQLite's BINARY
 * collation does; PostgreSQL would otherwise use its own collation. Range tests on paths (`a/` ≤
 * path < `a0` for everything inside `a`) rely on it; their PostgreSQL indexes are built
 * `COLLATE "C"` (migrations 0008, 0015), so such tests are written through this to use them.
 */
export function bytewise(kind: DatabaseKind, expr: string): string {
  return kind === 'postgres' ? `${expr} COLLATE "C"` : expr;
}

/** kindOf tells which database a unit of work (or a query builder) talks to. */
export function kindOf(on: { connection: DataSource }): DatabaseKind {
  return on.connection.driver.options.type === 'postgres' ? 'postgres' : 'sqlite';
}

/**
 * subtreeBounds are the bounds of the paths strictly inside `folder` (not the root): everything
 * under `a/` sorts from `a/` up to (not including) `a0`, '0' following '/', compared byte by byte
 * (bytewise; on PostgreSQL through indexes built `COLLATE "C"`, migrations 0008, 0015 and 0018).
 * A range an index on the path seeks; a `substr(path, 1, n) = 'a/'` test, exact too, seeks
 * nothing (every folder move, copy or delete read the whole files table through one).
 */
export function subtreeBounds(folder: string): [below: string, beyond: string] {
  return [`${folder}/`, `${folder}0`];
}

/**
 * inside is the test "`column` (a path) is strictly inside `folder`" (subtreeBounds) for a query
 * with named parameters, and those parameters (`:<name>Below`, `:<name>Beyond`).
 */
export function inside(
  on: { connection: DataSource },
  column: string,
  folder: string,
  name = 'sub',
): [string, Record<string, string>] {
  const col = bytewise(kindOf(on), column);
  const [below, beyond] = subtreeBounds(folder);
  return [
    `${col} >= :${name}Below AND ${col} < :${name}Beyond`,
    { [`${name}Below`]: below, [`${name}Beyond`]: beyond },
  ];
}

/** insideMarked is `inside` for a hand-written statement (`sql`): the test with `?` marks, and their values. */
export function insideMarked(
  on: { connection: DataSource },
  column: string,
  folder: string,
): [string, string[]] {
  const col = bytewise(kindOf(on), column);
  return [`${col} >= ? AND ${col} < ?`, subtreeBounds(folder)];
}

/** marks is `?, ?, …` for an IN list of n values. */
export function marks(n: number): string {
  return n === 1 ? '?' : `?${', ?'.repeat(n - 1)}`;
}

/** Reader turns one column's value as a database answers it into what TypeORM would give. */
type Reader = (value: unknown) => unknown;
const readers = new WeakMap<object, Map<string, Reader | null>>();

/** readersOf is, by column name, how `entity`'s columns are read (null: as they come), made once. */
function readersOf(entity: EntitySchema<unknown>): Map<string, Reader | null> {
  let map = readers.get(entity);
  if (map) return map;
  map = new Map();
  const columns = entity.options.columns as Record<
    string,
    { type?: unknown; transformer?: ValueTransformer | ValueTransformer[] } | undefined
  >;
  for (const [name, column] of Object.entries(columns)) {
    const transformer = Array.isArray(column?.transformer) ? undefined : column?.transformer;
    if (transformer) map.set(name, (v) => transformer.from(v));
    else if (column?.type === 'boolean') map.set(name, (v) => (v === null ? null : v === true || v === 1));
    else map.set(name, null);
  }
  readers.set(entity, map);
  return map;
}

/**
 * rowOf turns a hand-written statement's row into `entity`'s row type as TypeORM reads one: each
 * column's transformer applied (epoch milliseconds to a Date, a bigint PostgreSQL answers as a
 * string to a number) and SQLite's 0/1 booleans made booleans. The row is `values` of `columns`
 * (sqlArrays), or an object by column name (sql); columns not selected are left out.
 */
export function rowOf<T>(
  entity: EntitySchema<T>,
  row: Record<string, unknown> | unknown[],
  columns?: readonly string[],
): T {
  const read = readersOf(entity as EntitySchema<unknown>);
  const out: Record<string, unknown> = {};
  if (Array.isArray(row)) {
    for (let i = 0; i < columns!.length; i++) {
      const name = columns![i]!;
      const reader = read.get(name);
      out[name] = reader ? reader(row[i]) : row[i];
    }
  } else {
    for (const name in row) {
      const reader = read.get(name);
      out[name] = reader ? reader(row[name]) : row[name];
    }
  }
  return out as T;
}
