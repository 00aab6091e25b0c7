/**
 * Query plans of what a core runs: queriesDuring collects the statements (a TypeORM subscriber's
 * beforeQuery sees every query of both drivers), wholeReads asks the database how it would run
 * those that read the named tables and keeps the plans that read one of them whole.
 */
import type { EntitySubscriberInterface } from 'typeorm';
import type { Core } from '../../src/core/index.ts';
import { dbKind } from './gateway.ts';
import { dbOf } from './internals.ts';

/** Statement is one query a core ran, with its parameters. */
export interface Statement {
  query: string;
  parameters: unknown[];
}

/** queriesDuring runs `run` and returns every statement the core's database ran meanwhile. */
export async function queriesDuring(core: Core, run: () => Promise<unknown>): Promise<Statement[]> {
  const seen: Statement[] = [];
  const subscriber: EntitySubscriberInterface = {
    beforeQuery: (event) =>
      void seen.push({
        query: event.query,
        parameters: Array.isArray(event.parameters) ? [...(event.parameters as unknown[])] : [],
      }),
  };
  const subscribers = dbOf(core).source.subscribers;
  subscribers.push(subscriber);
  try {
    await run();
  } finally {
    subscribers.splice(subscribers.indexOf(subscriber), 1);
  }
  return seen;
}

/**
 * wholeReads gives, for each SELECT or DELETE among `statements` that names one of `tables`, its
 * plan when that plan reads one of them whole: on SQLite a SCAN of the table (or of an index of
 * it, in full); on PostgreSQL a sequential scan chosen although scans are turned off, which is
 * what happens when no index can serve the statement (a table this small would be scanned anyway).
 */
export async function wholeReads(core: Core, statements: Statement[], tables: string[]): Promise<string[]> {
  const named = new RegExp(`\\b(?:FROM|JOIN)\\s+"?(${tables.join('|')})"?(?:\\s+"?(\\w+)"?)?`, 'gi');
  const found: string[] = [];
  await dbOf(core).work(async (em) => {
    if (dbKind === 'postgres') await em.query('SET LOCAL enable_seqscan = off');
    for (const { query, parameters } of statements) {
      if (!/^\s*(SELECT|DELETE)\b/i.test(query)) continue;
      // The names a plan calls these tables by: their own, or the alias the statement gives them.
      const names = new Set<string>();
      for (const m of query.matchAll(named)) {
        names.add(m[1]!.toLowerCase());
        if (m[2] && !/^(WHERE|ORDER|LIMIT|GROUP|INNER|LEFT|JOIN|ON)$/i.test(m[2]))
          names.add(m[2].toLowerCase());
      }
      if (names.size === 0) continue;
      if (dbKind === 'postgres') {
        const plan = (await em.query(`EXPLAIN ${query}`, parameters)) as Record<string, string>[];
        const lines = plan.map((r) => r['QUERY PLAN']!);
        if (lines.some((l) => [...names].some((n) => new RegExp(`Seq Scan on "?${n}"?\\b`, 'i').test(l))))
          found.push(`${query}\n  ${lines.join('\n  ')}`);
      } else {
        const plan = (await em.query(`EXPLAIN QUERY PLAN ${query}`, parameters)) as { detail: string }[];
        const lines = plan.map((r) => r.detail);
        if (lines.some((l) => [...names].some((n) => new RegExp(`^SCAN "?${n}"?\\b`, 'i').test(l))))
          found.push(`${query}\n  ${lines.join('\n  ')}`);
      }
    }
  });
  return found;
}
