/**
 * The Users admin page (issue 15), for site admins: a list searched, sorted and paged on the server
 * (GET /users with `search` and `sort_by`, SPEC cursors), so it stays fast at 10,000 users; and one
 * user's editor (./user-editor.tsx) with their SSH and API keys (./user-keys.tsx).
 */
import { useEffect, useState } from 'preact/hooks';
import { API, type Me } from '../api.ts';
import { MessageLine, Pager, SortHeader, useCursorList, withQuery, type Message, type Sort } from './kit.tsx';
import { UserEditor, when, type AdminUser } from './user-editor.tsx';

const PER_PAGE = 50;

export function UsersPage(props: { me: Me }) {
  const [typed, setTyped] = useState('');
  const [search, setSearch] = useState('');
  const [sort, setSort] = useState<Sort>({ field: 'username', dir: 'asc' });
  // null: the list; 'new': a new user; a user: that user's editor.
  const [editing, setEditing] = useState<AdminUser | 'new' | null>(null);
  const [message, setMessage] = useState<Message>(null);

  // The server searches; wait for a pause in typing rather than asking on every key.
  useEffect(() => {
    const t = setTimeout(() => setSearch(typed.trim()), 250);
    return () => clearTimeout(t);
  }, [typed]);

  const url = withQuery(`${API}/users?sort_by[${sort.field}]=${sort.dir}`, { search });
  const list = useCursorList<AdminUser>(editing === null ? url : null, PER_PAGE);

  if (editing !== null) {
    return (
      <main class="admin users">
        <UserEditor
          me={props.me}
          user={editing === 'new' ? null : editing}
          onClose={(m) => {
            setEditing(null);
            setMessage(m);
            list.reload();
          }}
          onSaved={(u) => setEditing(u)}
        />
      </main>
    );
  }

  return (
    <main class="admin users">
      <h1>Users</h1>
      <div class="toolbar">
        <button
          type="button"
          onClick={() => {
            setMessage(null);
            setEditing('new');
          }}
        >
          New user
        </button>
        <label class="search">
          Search users
          <input
            type="search"
            value={typed}
            placeholder="Username, name or e-mail"
            onInput={(e) => setTyped(e.currentTarget.value)}
          />
        </label>
      </div>
      <MessageLine message={message} />
      <MessageLine message={list.error} />
      <table class="admin-table">
        <caption>
          Users{search ? ` matching “${search}”` : ''}
          {list.loading ? ' (loading…)' : ''}
        </caption>
        <thead>
          <tr>
            <SortHeader field="username" sort={sort} onSort={setSort}>
              Username
            </SortHeader>
            <th scope="col">Name</th>
            <th scope="col">E-mail</th>
            <SortHeader field="last_login_at" sort={sort} onSort={setSort}>
              Last login
            </SortHeader>
            <SortHeader field="created_at" sort={sort} onSort={setSort}>
              Created
            </SortHeader>
            <th scope="col">Status</th>
          </tr>
        </thead>
        <tbody>
          {list.rows.map((u) => (
            <tr key={u.id}>
              <td>
                <button
                  type="button"
                  class="link"
                  onClick={() => {
                    setMessage(null);
                    setEditing(u);
                  }}
                >
                  {u.username}
                </button>
              </td>
              <td>{u.name}</td>
              <td>{u.email}</td>
              <td>{when(u.last_login_at)}</td>
              <td>{when(u.created_at)}</td>
              <td>
                {[u.site_admin ? 'Site admin' : '', u.locked_until ? 'Locked out' : '']
                  .filter(Boolean)
                  .join(', ')}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      {!list.loading && list.rows.length === 0 && !list.error && (
        <p class="empty">{search ? 'No user matches this search.' : 'No users yet.'}</p>
      )}
      <Pager prev={list.prev} next={list.next} label="Pages of users" />
    </main>
  );
}
