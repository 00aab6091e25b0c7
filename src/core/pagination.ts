/**
 * Cursor pagination, shared by every list (SPEC "Limits"): a cursor is a page-number prefix, a
 * colon, and an opaque part, here AES-256-GCM over {list, offset, per_page} with a key derived
 * from the site secret, so clients cannot forge offsets and any instance can read any cursor.
 * A list that can seek (keyset paging) also puts the sort key of the row the page starts after
 * (or, going back, ends before) in the cursor, so a deep page costs what the first one does
 * instead of reading and dropping every row before it.
 */
import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';
import { GatewayError } from './errors.ts';

/** PageRequest is what a client sends: an optional cursor and per_page (kept the same across pages). */
export interface PageRequest {
  cursor?: string | undefined;
  per_page?: number | string | undefined;
}

/** Page is one page of a list with the cursors for the next and previous pages, if any. */
export interface Page<T> {
  items: T[];
  next: string | null;
  prev: string | null;
}

/** PageWindow is the slice of the list a request asks for. */
export interface PageWindow {
  list: string;
  page: number;
  offset: number;
  perPage: number;
  usedCursor: boolean;
  /**
   * snapshot is an optional number a list pins on its first page (e.g. the highest row id then)
   * and gets back from every later cursor, so rows added meanwhile do not shift its pages.
   */
  snapshot?: number;
  /**
   * seek is set for a keyset cursor: the sort key of the row the page comes after (`before`
   * false) or, for a previous page, the row it comes before (`before` true: the list reads
   * backwards from there, and `page` gets the rows in that reversed order).
   */
  seek?: { key: SortKey; before: boolean };
}

/** SortKey is the values of a row's sort columns, in order (numbers and strings). */
export type SortKey = (number | string)[];

interface CursorState {
  l: string;
  o: number;
  n: number;
  s?: number;
  /** keyset: the sort key of the boundary row */
  k?: SortKey;
  /** keyset: true when the page ends before `k` (a previous page) */
  b?: boolean;
}

/** Paginator turns cursors into windows and windows back into cursors. */
export class Paginator {
  private readonly key: Buffer;

  constructor(secret: string) {
    this.key = createHash('sha256').update(`cursor:${secret}`).digest();
  }

  /** window reads the request; bad per_page or a cursor not made for this list is a 400. */
  window(list: string, req: PageRequest, limits = { defaultPerPage: 1000, maxPerPage: 10000 }): PageWindow {
    let perPage = limits.defaultPerPage;
    if (req.per_page !== undefined && req.per_page !== '') {
      const n = typeof req.per_page === 'number' ? req.per_page : Number(req.per_page);
      if (!Number.isInteger(n) || n < 1 || n > limits.maxPerPage) {
        throw new GatewayError(
          'bad-request/request-params-invalid',
          `per_page must be an integer from 1 to ${limits.maxPerPage}`,
        );
      }
      perPage = n;
    }
    if (req.cursor === undefined || req.cursor === '')
      return { list, page: 1, offset: 0, perPage, usedCursor: false };
    const state = this.decode(req.cursor);
    if (!state || state.l !== list) throw new GatewayError('bad-request/invalid-cursor', 'Invalid cursor');
    if (req.per_page !== undefined && req.per_page !== '' && state.n !== perPage) {
      throw new GatewayError(
        'bad-request/invalid-cursor',
        'per_page must stay the same across pages of one listing',
      );
    }
    return {
      list,
      page: Math.floor(state.o / state.n) + 1,
      offset: state.o,
      perPage: state.n,
      usedCursor: true,
      ...(state.s === undefined ? {} : { snapshot: state.s }),
      ...(state.k === undefined ? {} : { seek: { key: state.k, before: state.b === true } }),
    };
  }

  /** listOf names the list a cursor was made for (null for a cursor this site did not make). */
  listOf(cursor: string): string | null {
    return this.decode(cursor)?.l ?? null;
  }

  /**
   * page builds the answer from rows fetched with `limit perPage + 1`: the extra row only says
   * that a next page exists.
   */
  page<T>(w: PageWindow, rows: T[]): Page<T> {
    const hasNext = rows.length > w.perPage;
    const items = hasNext ? rows.slice(0, w.perPage) : rows;
    const s = w.snapshot === undefined ? {} : { s: w.snapshot };
    return {
      items,
      next: hasNext
        ? this.encode(w.page + 1, { l: w.list, o: w.offset + w.perPage, n: w.perPage, ...s })
        : null,
      prev:
        w.usedCursor && w.offset > 0
          ? this.encode(w.page - 1, { l: w.list, o: Math.max(0, w.offset - w.perPage), n: w.perPage, ...s })
          : null,
    };
  }

  /**
   * seekPage builds the answer of a keyset list from rows fetched with `limit perPage + 1` in the
   * list's order (in reverse order when `w.seek.before`: the extra row then says that a previous
   * page exists). `keyOf` gives a row's sort key; the cursors carry the keys of the page's ends.
   */
  seekPage<T>(w: PageWindow, rows: T[], keyOf: (row: T) => SortKey): Page<T> {
    const back = w.seek?.before === true;
    const more = rows.length > w.perPage;
    const items = rows.slice(0, w.perPage);
    if (back) items.reverse();
    const first = items[0];
    const last = items[items.length - 1];
    const s = w.snapshot === undefined ? {} : { s: w.snapshot };
    const at = (page: number, offset: number, row: T, before: boolean) =>
      this.encode(page, {
        l: w.list,
        o: Math.max(0, offset),
        n: w.perPage,
        ...s,
        k: keyOf(row),
        ...(before ? { b: true } : {}),
      });
    // Going back, the page we came from follows; going forward, the extra row says one follows.
    const hasNext = back || more;
    const hasPrev = back ? more : w.usedCursor && w.offset > 0;
    return {
      items,
      next: hasNext && last !== undefined ? at(w.page + 1, w.offset + w.perPage, last, false) : null,
      prev: hasPrev && first !== undefined ? at(w.page - 1, w.offset - w.perPage, first, true) : null,
    };
  }

  private encode(page: number, state: CursorState): string {
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.key, iv);
    const body = Buffer.concat([cipher.update(JSON.stringify(state), 'utf8'), cipher.final()]);
    return `${page}:${Buffer.concat([iv, cipher.getAuthTag(), body]).toString('base64url')}`;
  }

  private decode(cursor: string): CursorState | null {
    const match = /^(\d+):([A-Za-z0-9_-]{40,2000})$/.exec(cursor);
    if (!match) return null;
    try {
      const raw = Buffer.from(match[2]!, 'base64url');
      const decipher = createDecipheriv('aes-256-gcm', this.key, raw.subarray(0, 12));
      decipher.setAuthTag(raw.subarray(12, 28));
      const json = Buffer.concat([decipher.update(raw.subarray(28)), decipher.final()]).toString('utf8');
      const state = JSON.parse(json) as CursorState;
      if (typeof state.l !== 'string' || !Number.isInteger(state.o) || !Number.isInteger(state.n))
        return null;
      if (state.s !== undefined && !Number.isInteger(state.s)) return null;
      if (
        state.k !== undefined &&
        !(Array.isArray(state.k) && state.k.every((v) => typeof v === 'number' || typeof v === 'string'))
      )
        return null;
      return state;
    } catch {
      return null;
    }
  }
}
