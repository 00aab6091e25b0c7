/**
 * The Notifications admin page (issue 15): who gets e-mail about new and changed files in which
 * folder (SPEC "Notifications"). A site admin lists every subscription one server page at a time,
 * adds one for a user by username and path, and removes one.
 */
import { useState } from 'preact/hooks';
import { API, request, type Me } from '../api.ts';
import { Field } from '../field.tsx';
import { failed, MessageLine, Pager, useCursorList, type Message } from './kit.tsx';

interface Notification {
  id: number;
  path: string;
  user_id: number;
  username: string;
}

export function NotificationsPage(_props: { me: Me }) {
  const list = useCursorList<Notification>(`${API}/notifications`);
  const [username, setUsername] = useState('');
  const [path, setPath] = useState('');
  const [message, setMessage] = useState<Message>(null);
  const [busy, setBusy] = useState(false);

  const add = async () => {
    setBusy(true);
    setMessage(null);
    try {
      const { data } = await request<Notification>('POST', `${API}/notifications`, {
        body: { username: username.trim(), path: path.trim().replace(/^\/+|\/+$/g, '') },
      });
      setMessage({ ok: true, text: `${data.username} will get e-mail about /${data.path}.` });
      setUsername('');
      setPath('');
      list.reload();
    } catch (err) {
      setMessage(failed(err, 'The notification could not be added.'));
    } finally {
      setBusy(false);
    }
  };

  const remove = async (n: Notification) => {
    setMessage(null);
    try {
      await request('DELETE', `${API}/notifications/${n.id}`);
      setMessage({ ok: true, text: `${n.username} no longer gets e-mail about /${n.path}.` });
      list.reload();
    } catch (err) {
      setMessage(failed(err, 'The notification could not be removed.'));
    }
  };

  return (
    <main class="admin activity">
      <h1>Notifications</h1>
      <p class="hint">
        A user with a notification gets e-mail when files are created or updated in its folder.
      </p>
      <form
        class="filters"
        aria-label="New notification"
        onSubmit={(e) => {
          e.preventDefault();
          void add();
        }}
      >
        <Field label="Username" required value={username} onValue={setUsername} />
        <Field label="Folder path" required value={path} onValue={setPath} />
        <div class="buttons">
          <button type="submit" disabled={busy}>
            Add notification
          </button>
        </div>
      </form>
      <MessageLine message={message} />
      <MessageLine message={list.error} />
      <table class="grid" aria-label="Notifications" aria-busy={list.loading}>
        <thead>
          <tr>
            <th scope="col">User</th>
            <th scope="col">Folder</th>
            <th scope="col">Remove</th>
          </tr>
        </thead>
        <tbody>
          {(list.error ? [] : list.rows).map((n) => (
            <tr key={n.id}>
              <td>{n.username}</td>
              <td class="path">/{n.path}</td>
              <td>
                <button
                  type="button"
                  aria-label={`Remove notification of ${n.username} on /${n.path}`}
                  onClick={() => void remove(n)}
                >
                  Remove
                </button>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      {!list.loading && !list.error && list.rows.length === 0 ? (
        <p class="empty">No notifications yet.</p>
      ) : null}
      <Pager prev={list.prev} next={list.next} label="Notification pages" />
    </main>
  );
}
