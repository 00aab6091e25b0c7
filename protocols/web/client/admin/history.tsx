/**
 * The History admin page (issue 15): the last 24 hours of Actions (SPEC "History"), one server page
 * at a time. Site admins read GET /history with its filters (user, exact path or prefix, folder,
 * and the extensions interface and action) and a date range; a Folder Admin reads the history of
 * one of their folders (GET /history/folders/{path}, which the core allows with `list` there) with
 * a date range. The server decides what each may see; the page only offers what it would allow.
 */
import { useState } from 'preact/hooks';
import { API, encodePath, type Me } from '../api.ts';
import { Field } from '../field.tsx';
import { dateFormat } from '../paths.ts';
import { MessageLine, Pager, SortHeader, useCursorList, withQuery, type Sort } from './kit.tsx';
import { ACTIONS, INTERFACES, localToIso, SelectField } from './activity-kit.tsx';

interface Action {
  id: number;
  path: string;
  when: string;
  source: string;
  destination: string;
  ip: string;
  username: string;
  action: string;
  failure_type: string;
  interface: string;
}

/** Filters are the form's fields, as typed. */
interface Filters {
  username: string;
  path: string;
  pathMatch: 'exact' | 'prefix';
  folder: string;
  iface: string;
  action: string;
  from: string;
  to: string;
}

const EMPTY: Filters = {
  username: '',
  path: '',
  pathMatch: 'exact',
  folder: '',
  iface: '',
  action: '',
  from: '',
  to: '',
};

/** historyUrl is the list's address for the applied filters (site admins: /history, others: a folder's). */
function historyUrl(f: Filters, siteAdmin: boolean, scope: string, sort: Sort): string {
  const range = { start_at: localToIso(f.from), end_at: localToIso(f.to) };
  if (!siteAdmin) return withQuery(`${API}/history/folders/${encodePath(scope)}`, range);
  const path = f.path.trim().replace(/^\/+/, '');
  return withQuery(`${API}/history`, {
    ...range,
    'filter[username]': f.username.trim(),
    'filter[path]': f.pathMatch === 'exact' ? path : '',
    'filter_prefix[path]': f.pathMatch === 'prefix' ? path : '',
    'filter[folder]': f.folder.trim(),
    'filter[interface]': f.iface,
    'filter[action]': f.action,
    [`sort_by[${sort.field}]`]: sort.dir,
  });
}

/** what describes an Action's target: its path, or a move's or copy's two ends. */
function what(a: Action): string {
  if (a.source && a.destination && a.source !== a.destination) return `/${a.source} → /${a.destination}`;
  return a.path ? `/${a.path}` : '';
}

export function HistoryPage(props: { me: Me }) {
  const siteAdmin = props.me.user.site_admin;
  const folders = props.me.user.admin_folders;
  const [form, setForm] = useState<Filters>(EMPTY);
  const [applied, setApplied] = useState<Filters>(EMPTY);
  const [scope, setScope] = useState(folders[0] ?? '');
  const [sort, setSort] = useState<Sort>({ field: 'created_at', dir: 'desc' });
  const list = useCursorList<Action>(historyUrl(applied, siteAdmin, scope, sort));
  const set = (patch: Partial<Filters>) => setForm((f) => ({ ...f, ...patch }));
  // Site admins sort /history; a folder's history sorts by time only (SPEC).
  // A function, not a component: a component made in render would remount (and lose focus) each time.
  const column = (field: string, name: string) =>
    siteAdmin ? (
      <SortHeader field={field} sort={sort} onSort={setSort}>
        {name}
      </SortHeader>
    ) : (
      <th scope="col">{name}</th>
    );

  return (
    <main class="admin activity">
      <h1>History</h1>
      <p class="hint">
        {siteAdmin
          ? 'What everyone did in the last 24 hours. For older activity, export the log on the Webhooks page.'
          : 'What was done in your folders in the last 24 hours.'}
      </p>
      <form
        class="filters"
        aria-label="History filters"
        onSubmit={(e) => {
          e.preventDefault();
          setApplied(form);
        }}
      >
        {siteAdmin ? (
          <>
            <Field label="User" value={form.username} onValue={(v) => set({ username: v })} />
            <Field label="Path" value={form.path} onValue={(v) => set({ path: v })} />
            <SelectField
              label="Path match"
              value={form.pathMatch}
              onValue={(v) => set({ pathMatch: v as Filters['pathMatch'] })}
              options={[
                ['exact', 'Exactly this path'],
                ['prefix', 'Starts with'],
              ]}
            />
            <Field label="In folder" value={form.folder} onValue={(v) => set({ folder: v })} />
            <SelectField
              label="Interface"
              value={form.iface}
              onValue={(v) => set({ iface: v })}
              options={[['', 'Any interface'], ...INTERFACES]}
            />
            <SelectField
              label="Action"
              value={form.action}
              onValue={(v) => set({ action: v })}
              options={[['', 'Any action'], ...ACTIONS.map((a): [string, string] => [a, a])]}
            />
          </>
        ) : (
          <SelectField
            label="Folder"
            value={scope}
            onValue={setScope}
            options={folders.map((f): [string, string] => [f, `/${f}`])}
          />
        )}
        <Field label="From" type="datetime-local" value={form.from} onValue={(v) => set({ from: v })} />
        <Field label="To" type="datetime-local" value={form.to} onValue={(v) => set({ to: v })} />
        <div class="buttons">
          <button type="submit">Apply filters</button>
          <button
            type="button"
            onClick={() => {
              setForm(EMPTY);
              setApplied(EMPTY);
            }}
          >
            Clear filters
          </button>
        </div>
      </form>
      <MessageLine message={list.error} />
      <table class="grid" aria-label="Actions" aria-busy={list.loading}>
        <thead>
          <tr>
            {column('created_at', 'When')}
            {column('user_id', 'User')}
            <th scope="col">Action</th>
            {column('path', 'Path')}
            <th scope="col">Interface</th>
            <th scope="col">IP address</th>
          </tr>
        </thead>
        <tbody>
          {(list.error ? [] : list.rows).map((a) => (
            <tr key={a.id}>
              <td>
                <time dateTime={a.when}>{dateFormat.format(new Date(a.when))}</time>
              </td>
              <td>{a.username || '(site-wide key)'}</td>
              <td>
                {a.action}
                {a.failure_type && a.failure_type !== 'none' ? ` (${a.failure_type})` : ''}
              </td>
              <td class="path">{what(a)}</td>
              <td>{INTERFACES.find(([v]) => v === a.interface)?.[1] ?? a.interface}</td>
              <td>{a.ip}</td>
            </tr>
          ))}
        </tbody>
      </table>
      {!list.loading && !list.error && list.rows.length === 0 ? <p class="empty">No actions match.</p> : null}
      <Pager prev={list.prev} next={list.next} label="History pages" />
    </main>
  );
}
