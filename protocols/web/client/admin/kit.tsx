/**
 * What the admin pages share: a SPEC cursor-paged list, a message in words, and a sortable column
 * header. Pages build their own tables and forms from these and from ../field.tsx and ../dialogs.tsx.
 */
import type { ComponentChildren } from 'preact';
import { useCallback, useEffect, useState } from 'preact/hooks';
import { ApiError, request } from '../api.ts';

/** Message is an outcome shown to the person: a status when it went well, an alert when not. */
export type Message = { ok: boolean; text: string } | null;

/** MessageLine shows a Message (nothing when null). */
export function MessageLine(props: { message: Message }) {
  const m = props.message;
  if (!m) return null;
  return (
    <p class={m.ok ? 'notice' : 'error'} role={m.ok ? 'status' : 'alert'}>
      {m.text}
    </p>
  );
}

/** failed turns a thrown error into a Message in words. */
export function failed(err: unknown, fallback = 'That did not work.'): Message {
  return { ok: false, text: err instanceof ApiError ? err.message : fallback };
}

/** withQuery appends query parameters to a URL, skipping blank values. */
export function withQuery(url: string, params: Record<string, string | number | undefined>): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== '') q.set(k, String(v));
  const s = q.toString();
  return s ? `${url}${url.includes('?') ? '&' : '?'}${s}` : url;
}

/**
 * useCursorList pages through a SPEC list endpoint with `cursor` and `per_page` (SPEC "Limits":
 * X-Svc-Cursor-Next / X-Svc-Cursor-Prev). A new `url` starts again at the first page; null loads
 * nothing.
 */
export function useCursorList<T>(url: string | null, perPage = 50) {
  const [rows, setRows] = useState<T[]>([]);
  const [cursor, setCursor] = useState<string | undefined>(undefined);
  const [next, setNext] = useState<string | null>(null);
  const [prev, setPrev] = useState<string | null>(null);
  const [error, setError] = useState<Message>(null);
  const [loading, setLoading] = useState(false);
  const [tick, setTick] = useState(0);
  useEffect(() => setCursor(undefined), [url]);
  useEffect(() => {
    if (url === null) return;
    let live = true;
    setLoading(true);
    request<T[]>('GET', withQuery(url, { per_page: perPage, cursor }))
      .then(({ data, headers }) => {
        if (!live) return;
        setRows(data ?? []);
        setNext(headers.get('X-Svc-Cursor-Next'));
        setPrev(headers.get('X-Svc-Cursor-Prev'));
        setError(null);
      })
      .catch((err: unknown) => live && setError(failed(err, 'The list could not be loaded.')))
      .finally(() => live && setLoading(false));
    return () => {
      live = false;
    };
  }, [url, cursor, perPage, tick]);
  const reload = useCallback(() => setTick((t) => t + 1), []);
  return {
    rows,
    error,
    loading,
    reload,
    next: next ? () => setCursor(next) : null,
    prev: prev ? () => setCursor(prev) : null,
  };
}

/** Pager is the Previous / Next buttons under a cursor-paged table. */
export function Pager(props: { prev: (() => void) | null; next: (() => void) | null; label: string }) {
  if (!props.prev && !props.next) return null;
  return (
    <nav class="pager" aria-label={props.label}>
      <button type="button" disabled={!props.prev} onClick={() => props.prev?.()}>
        Previous page
      </button>
      <button type="button" disabled={!props.next} onClick={() => props.next?.()}>
        Next page
      </button>
    </nav>
  );
}

/** Sort is a column and its direction, as SPEC's `sort_by[field]=asc|desc`. */
export type Sort = { field: string; dir: 'asc' | 'desc' };

/** SortHeader is a column header that sorts by its field; aria-sort tells a screen reader the order. */
export function SortHeader(props: {
  field: string;
  sort: Sort;
  onSort: (s: Sort) => void;
  children: ComponentChildren;
}) {
  const active = props.sort.field === props.field;
  return (
    <th scope="col" aria-sort={active ? (props.sort.dir === 'asc' ? 'ascending' : 'descending') : 'none'}>
      <button
        type="button"
        class="link"
        onClick={() =>
          props.onSort({ field: props.field, dir: active && props.sort.dir === 'asc' ? 'desc' : 'asc' })
        }
      >
        {props.children}
        {active ? (props.sort.dir === 'asc' ? ' ▲' : ' ▼') : ''}
      </button>
    </th>
  );
}
