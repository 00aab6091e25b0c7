/**
 * Keyset paging, shared by the lists that sort (history, users): SPEC's `sort_by[field]=asc|desc`
 * read once, and the WHERE that keeps the rows sorting after a cursor's key, so a deep page reads
 * what the first one does (the cursor itself is pagination.ts's).
 */
import type { ObjectLiteral, SelectQueryBuilder } from 'typeorm';
import { GatewayError } from './errors.ts';
import type { SortKey } from './pagination.ts';

/** SortTerm is one ORDER BY expression and its direction. */
export interface SortTerm {
  expr: string;
  asc: boolean;
}

/** SortDirection is SPEC's direction of a sort_by field. */
export type SortDirection = 'asc' | 'desc';

/**
 * parseSort reads sort_by (`sort_by[user_id]=desc`): one field of `allowed`, asc or desc;
 * `fallback` when absent or empty.
 */
export function parseSort<F extends string, D>(
  raw: unknown,
  allowed: readonly F[],
  fallback: D,
): D | { field: F; direction: SortDirection } {
  if (raw === undefined || raw === '') return fallback;
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) {
    throw new GatewayError(
      'bad-request/invalid-filter-param',
      'sort_by must be an object such as sort_by[created_at]=desc',
    );
  }
  const entries = Object.entries(raw as Record<string, unknown>);
  if (entries.length === 0) return fallback;
  if (entries.length > 1)
    throw new GatewayError('bad-request/invalid-filter-combination', 'sort_by takes one field');
  const [field, value] = entries[0]!;
  if (!(allowed as readonly string[]).includes(field)) {
    throw new GatewayError(
      'bad-request/invalid-filter-field',
      `sort_by[${field}] is not available here; sort by ${allowed.join(' or ')}`,
    );
  }
  const direction = typeof value === 'string' ? value.trim().toLowerCase() : '';
  if (direction !== 'asc' && direction !== 'desc') {
    throw new GatewayError('bad-request/invalid-filter-param-value', `sort_by[${field}] must be asc or desc`);
  }
  return { field: field as F, direction };
}

/**
 * afterKey keeps the rows that sort after `key` under `terms`: a lexicographic comparison, with
 * each run of terms in one direction compared as a row value, (when, id) < (:w, :i), which both
 * databases seek in a (…, when, id) index.
 */
export function afterKey<T extends ObjectLiteral>(
  qb: SelectQueryBuilder<T>,
  terms: SortTerm[],
  key: SortKey,
  name: string,
): void {
  if (key.length !== terms.length) throw new GatewayError('bad-request/invalid-cursor', 'Invalid cursor');
  const params: Record<string, number | string> = {};
  key.forEach((v, i) => (params[`${name}${i}`] = v));
  const runs: { from: number; to: number; asc: boolean }[] = [];
  terms.forEach((t, i) => {
    const run = runs[runs.length - 1];
    if (run && run.asc === t.asc) run.to = i + 1;
    else runs.push({ from: i, to: i + 1, asc: t.asc });
  });
  const tuple = (from: number, to: number, value: (i: number) => string) => {
    const parts = terms.slice(from, to).map((_, j) => value(from + j));
    return parts.length === 1 ? parts[0]! : `(${parts.join(', ')})`;
  };
  const alternatives = runs.map((run) => {
    const equal =
      run.from === 0
        ? ''
        : `${tuple(0, run.from, (i) => terms[i]!.expr)} = ${tuple(0, run.from, (i) => `:${name}${i}`)} AND `;
    const cmp = `${tuple(run.from, run.to, (i) => terms[i]!.expr)} ${run.asc ? '>' : '<'} ${tuple(run.from, run.to, (i) => `:${name}${i}`)}`;
    return `(${equal}${cmp})`;
  });
  qb.andWhere(`(${alternatives.join(' OR ')})`, params);
}
