/**
 * sql runs one hand-written statement on either database, for the per-file hot paths (issue 13):
 * TypeORM's query builder spends more time building a statement than SQLite spends running it.
 * Statements are written once with `?` placeholders; PostgreSQL's `$n` text is made once per
 * statement and kept. better-sqlite3 keeps the prepared statement by its text (TypeORM's cache),
 * so a hot statement is prepared once.
 */
import type { EntityManager } from 'typeorm';

const pgText = new Map<string, string>();

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
  return em.query(pg, params as unknown[]);
}

/** marks is `?, ?, …` for an IN list of n values. */
export function marks(n: number): string {
  return n === 1 ? '?' : `?${', ?'.repeat(n - 1)}`;
}
