/**
 * A folder's activity: the user's e-mail notification for it (SPEC "Notifications": subscribe and
 * unsubscribe themselves) and its recent history (SPEC "History", the last 24 hours, where the
 * user may list the folder). What the server refuses is said in words in its section.
 */
import { useEffect, useState } from 'preact/hooks';
import { API, ApiError, encodePath, request } from './api.ts';
import { Dialog } from './dialogs.tsx';
import { dateFormat } from './paths.ts';

interface Notification {
  id: number;
  path: string;
  user_id: number;
}

interface Action {
  id: number;
  path: string;
  when: string;
  source: string;
  destination: string;
  username: string;
  action: string;
  interface: string;
}

// Actions as a sentence's verb.
const VERBS: Record<string, string> = {
  create: 'created',
  read: 'downloaded',
  update: 'updated',
  destroy: 'deleted',
  move: 'moved',
  copy: 'copied',
};
// Interfaces as a person names them.
const VIA: Record<string, string> = {
  web: 'the web',
  restapi: 'the API',
  ftp: 'FTP',
  sftp: 'SFTP',
  dav: 'WebDAV',
};

const HISTORY_SHOWN = 100;

const say = (err: unknown) => (err instanceof ApiError ? err.message : String(err));

/** mine finds the user's notification on `folder` among theirs (a user lists only their own). */
async function mine(folder: string, userId: number): Promise<Notification | null> {
  let cursor = '';
  for (;;) {
    const { data, headers } = await request<Notification[]>(
      'GET',
      `${API}/notifications?per_page=1000${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`,
    );
    const found = data.find((n) => n.path === folder && n.user_id === userId);
    if (found) return found;
    cursor = headers.get('X-Svc-Cursor-Next') ?? '';
    if (!cursor) return null;
  }
}

function Notify(props: { folder: string; userId: number; email: string }) {
  const [sub, setSub] = useState<Notification | null | undefined>(undefined);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState('');
  const [said, setSaid] = useState('');
  useEffect(() => {
    mine(props.folder, props.userId)
      .then(setSub)
      .catch((err: unknown) => {
        setSub(null);
        setError(say(err));
      });
  }, [props.folder]);
  const toggle = async () => {
    setBusy(true);
    setError('');
    setSaid('');
    try {
      if (sub) {
        await request('DELETE', `${API}/notifications/${sub.id}`);
        setSub(null);
        setSaid('You will no longer get e-mail about this folder.');
      } else {
        const { data } = await request<Notification>('POST', `${API}/notifications`, {
          body: { path: props.folder, user_id: props.userId },
        });
        setSub(data);
        setSaid('You will get e-mail when files in this folder are added or changed.');
      }
    } catch (err) {
      setError(say(err));
    } finally {
      setBusy(false);
    }
  };
  return (
    <section aria-labelledby="notify-heading">
      <h3 id="notify-heading">E-mail notifications</h3>
      {sub === undefined ? (
        <p>Loading…</p>
      ) : (
        <label class="check">
          {/* While the change is on its way the box shows what was asked for. */}
          <input type="checkbox" checked={busy ? !sub : !!sub} disabled={busy} onChange={toggle} />
          E-mail me when files in this folder change
        </label>
      )}
      {!props.email && (
        <p class="hint">
          Your account has no e-mail address yet, so no e-mail can reach you. Add one on the Account page.
        </p>
      )}
      <p role="status" class="hint">
        {said}
      </p>
      {error && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
    </section>
  );
}

function History(props: { folder: string }) {
  const [actions, setActions] = useState<Action[] | null>(null);
  const [error, setError] = useState('');
  useEffect(() => {
    request<Action[]>('GET', `${API}/history/folders/${encodePath(props.folder)}?per_page=${HISTORY_SHOWN}`)
      .then(({ data }) => setActions(data))
      .catch((err: unknown) => {
        setActions([]);
        setError(
          err instanceof ApiError && err.status === 403
            ? `You may not see this folder’s history. ${err.message}`
            : say(err),
        );
      });
  }, [props.folder]);
  const within = (p: string) =>
    props.folder && p.startsWith(`${props.folder}/`) ? p.slice(props.folder.length + 1) : p;
  return (
    <section aria-labelledby="history-heading">
      <h3 id="history-heading">Recent history (24 hours)</h3>
      {actions === null && <p>Loading…</p>}
      {error && (
        <p class="notice" role="alert">
          {error}
        </p>
      )}
      {actions && !error && actions.length === 0 && <p>Nothing happened here in the last 24 hours.</p>}
      {actions && actions.length > 0 && (
        <ol class="history" aria-label="Recent history">
          {actions.map((a) => (
            <li key={a.id}>
              <time dateTime={a.when}>{dateFormat.format(new Date(a.when))}</time>{' '}
              <span>
                {a.username || 'Someone'} {VERBS[a.action] ?? a.action}{' '}
                <strong>{within(a.source || a.path) || '/'}</strong>
                {a.destination && (a.action === 'move' || a.action === 'copy')
                  ? ` to ${within(a.destination)}`
                  : ''}
                {VIA[a.interface] ? ` via ${VIA[a.interface]}` : ''}
              </span>
            </li>
          ))}
        </ol>
      )}
    </section>
  );
}

/** Activity is the folder's dialog of notifications and history. */
export function Activity(props: { folder: string; userId: number; email: string; onClose: () => void }) {
  return (
    <Dialog title={`Activity in /${props.folder}`} onClose={props.onClose} wide>
      <Notify folder={props.folder} userId={props.userId} email={props.email} />
      <History folder={props.folder} />
      <div class="buttons">
        <button type="button" onClick={props.onClose} autoFocus>
          Close
        </button>
      </div>
    </Dialog>
  );
}
