/**
 * A user's keys on the Users page: SSH public keys (GET/POST/DELETE /public_keys with user_id) and
 * API keys (GET /api_keys?user_id=, POST /api_keys, DELETE /api_keys/:id). A new API key is shown
 * once, in the answer that made it (DESIGN.md "API keys"); the server never shows it again.
 */
import { useState } from 'preact/hooks';
import { API, request } from '../api.ts';
import { Dialog } from '../dialogs.tsx';
import { failed, MessageLine, Pager, useCursorList, type Message } from './kit.tsx';
import { notYou, OwnPassword, reauthenticate, when, type AdminUser } from './user-editor.tsx';

interface PublicKey {
  id: number;
  title: string;
  fingerprint: string;
  created_at: string;
}

interface ApiKey {
  id: number;
  name: string;
  descriptive_label: string;
  created_at: string;
  expires_at: string | null;
  last_use_at: string | null;
  key?: string;
}

/**
 * ConfirmDelete asks before a DELETE that cannot be undone, sends it, and ends with its outcome
 * in words (null when cancelled).
 */
function ConfirmDelete(props: {
  title: string;
  text: string;
  submit: string;
  url: string;
  done: string;
  onEnd: (m: Message) => void;
}) {
  return (
    <Dialog title={props.title} onClose={() => props.onEnd(null)}>
      <p>{props.text}</p>
      <div class="buttons">
        <button
          type="button"
          class="danger"
          onClick={() => {
            request('DELETE', props.url)
              .then(() => props.onEnd({ ok: true, text: props.done }))
              .catch((err: unknown) => props.onEnd(failed(err, 'That did not work.')));
          }}
        >
          {props.submit}
        </button>
        <button type="button" onClick={() => props.onEnd(null)}>
          Cancel
        </button>
      </div>
    </Dialog>
  );
}

/** KeyTable lists keys, the second column (the key's own text) in a fixed-width font. */
function KeyTable(props: {
  caption: string;
  empty: string;
  loading: boolean;
  headers: string[];
  rows: { id: number; cells: string[] }[];
  action: string;
  onAction: (id: number) => void;
}) {
  if (props.rows.length === 0) return props.loading ? null : <p class="empty">{props.empty}</p>;
  return (
    <table class="admin-table">
      <caption>{props.caption}</caption>
      <thead>
        <tr>
          {props.headers.map((h) => (
            <th scope="col" key={h}>
              {h}
            </th>
          ))}
          <th scope="col">Actions</th>
        </tr>
      </thead>
      <tbody>
        {props.rows.map((r) => (
          <tr key={r.id}>
            {r.cells.map((c, i) => (
              <td key={i} class={i === 1 ? 'mono' : undefined}>
                {c}
              </td>
            ))}
            <td>
              <button type="button" onClick={() => props.onAction(r.id)}>
                {props.action}
              </button>
            </td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

export function UserKeys(props: { user: AdminUser }) {
  return (
    <>
      <PublicKeys user={props.user} />
      <ApiKeys user={props.user} />
    </>
  );
}

function PublicKeys(props: { user: AdminUser }) {
  const { user } = props;
  const list = useCursorList<PublicKey>(`${API}/public_keys?user_id=${user.id}`, 20);
  const [title, setTitle] = useState('');
  const [key, setKey] = useState('');
  const [message, setMessage] = useState<Message>(null);
  const [removing, setRemoving] = useState<PublicKey | null>(null);
  const ended = (m: Message) => {
    if (m) setMessage(m);
    if (m?.ok) list.reload();
  };
  const add = async (e: Event) => {
    e.preventDefault();
    try {
      await request('POST', `${API}/public_keys`, { body: { user_id: user.id, title, public_key: key } });
      setTitle('');
      setKey('');
      setMessage({ ok: true, text: 'SSH key added.' });
      list.reload();
    } catch (err) {
      setMessage(failed(err, 'The key could not be added.'));
    }
  };
  return (
    <section class="keys" aria-labelledby="ssh-keys-title">
      <h2 id="ssh-keys-title">SSH public keys</h2>
      <p class="hint">{user.username} can log in to SFTP with the private half of any key listed here.</p>
      <MessageLine message={message} />
      <MessageLine message={list.error} />
      <KeyTable
        caption={`SSH public keys of ${user.username}`}
        empty="No SSH keys."
        loading={list.loading}
        headers={['Title', 'Fingerprint', 'Added']}
        rows={list.rows.map((k) => ({ id: k.id, cells: [k.title, k.fingerprint, when(k.created_at)] }))}
        action="Remove"
        onAction={(id) => setRemoving(list.rows.find((k) => k.id === id) ?? null)}
      />
      <Pager prev={list.prev} next={list.next} label="Pages of SSH keys" />
      <form class="key-form" onSubmit={add}>
        <label>
          Key title
          <input value={title} maxLength={100} onInput={(e) => setTitle(e.currentTarget.value)} />
        </label>
        <label>
          Public key
          <textarea
            required
            rows={3}
            value={key}
            placeholder="ssh-ed25519 AAAA… laptop"
            onInput={(e) => setKey(e.currentTarget.value)}
          />
        </label>
        <small class="hint">One line in OpenSSH form, as in a .pub file (ssh-ed25519, ecdsa or rsa).</small>
        <div class="buttons start">
          <button type="submit">Add SSH key</button>
        </div>
      </form>
      {removing && (
        <ConfirmDelete
          title={`Remove the SSH key ${removing.title || removing.fingerprint}?`}
          text={`${user.username} can no longer log in with it.`}
          submit="Remove key"
          url={`${API}/public_keys/${removing.id}`}
          done="SSH key removed."
          onEnd={(m) => {
            setRemoving(null);
            ended(m);
          }}
        />
      )}
    </section>
  );
}

function ApiKeys(props: { user: AdminUser }) {
  const { user } = props;
  const list = useCursorList<ApiKey>(`${API}/api_keys?user_id=${user.id}`, 20);
  const [message, setMessage] = useState<Message>(null);
  const [creating, setCreating] = useState(false);
  const [made, setMade] = useState<ApiKey | null>(null);
  const [revoking, setRevoking] = useState<ApiKey | null>(null);
  const ended = (m: Message) => {
    if (m) setMessage(m);
    if (m?.ok) list.reload();
  };
  return (
    <section class="keys" aria-labelledby="api-keys-title">
      <h2 id="api-keys-title">API keys</h2>
      <p class="hint">A key acts as {user.username} on the REST API, with their rights.</p>
      <div class="toolbar">
        <button type="button" onClick={() => setCreating(true)}>
          New API key
        </button>
      </div>
      <MessageLine message={message} />
      <MessageLine message={list.error} />
      <KeyTable
        caption={`API keys of ${user.username}`}
        empty="No API keys."
        loading={list.loading}
        headers={['Name', 'Key', 'Created', 'Expires', 'Last used']}
        rows={list.rows.map((k) => ({
          id: k.id,
          cells: [k.name, k.descriptive_label, when(k.created_at), when(k.expires_at), when(k.last_use_at)],
        }))}
        action="Revoke"
        onAction={(id) => setRevoking(list.rows.find((k) => k.id === id) ?? null)}
      />
      <Pager prev={list.prev} next={list.next} label="Pages of API keys" />
      {creating && (
        <NewApiKeyDialog
          user={user}
          onDone={(key) => {
            setCreating(false);
            if (key) {
              setMade(key);
              list.reload();
            }
          }}
        />
      )}
      {made && (
        <Dialog title="New API key" onClose={() => setMade(null)}>
          <p>
            <strong>Copy this key now: it is not shown again.</strong> Send it in the X-SvcAPI-Key header.
          </p>
          <label>
            API key
            <input class="mono" readOnly value={made.key ?? ''} onFocus={(e) => e.currentTarget.select()} />
          </label>
          <div class="buttons">
            <button type="button" onClick={() => setMade(null)}>
              Done
            </button>
          </div>
        </Dialog>
      )}
      {revoking && (
        <ConfirmDelete
          title={`Revoke the API key ${revoking.name || revoking.descriptive_label}?`}
          text="Programs using it are refused from now on. This cannot be undone."
          submit="Revoke key"
          url={`${API}/api_keys/${revoking.id}`}
          done="API key revoked."
          onEnd={(m) => {
            setRevoking(null);
            ended(m);
          }}
        />
      )}
    </section>
  );
}

/** NewApiKeyDialog makes a key for the user; a session must confirm with the admin's password. */
function NewApiKeyDialog(props: { user: AdminUser; onDone: (key: ApiKey | null) => void }) {
  const [name, setName] = useState('');
  const [expires, setExpires] = useState('');
  const [mine, setMine] = useState('');
  const [error, setError] = useState<Message>(null);
  return (
    <Dialog title={`New API key for ${props.user.username}`} onClose={() => props.onDone(null)}>
      <form
        onSubmit={(e) => {
          e.preventDefault();
          const body: Record<string, unknown> = { user_id: props.user.id, name };
          // A date input gives a day; the key works until that day ends, in the admin's time zone.
          if (expires) body.expires_at = new Date(`${expires}T23:59:59`).toISOString();
          request<ApiKey>('POST', `${API}/api_keys`, { body, headers: reauthenticate(mine) })
            .then(({ data }) => props.onDone(data))
            .catch((err: unknown) => setError(notYou(err, 'The key could not be made.')));
        }}
      >
        <label>
          Key name
          <input required maxLength={100} value={name} onInput={(e) => setName(e.currentTarget.value)} />
        </label>
        <label>
          Expires on (optional)
          <input type="date" value={expires} onInput={(e) => setExpires(e.currentTarget.value)} />
        </label>
        <small class="hint">Blank: the key never expires.</small>
        <OwnPassword
          value={mine}
          onValue={setMine}
          why="Making a key asks who you are again."
          error={error}
          submit="Create key"
          onCancel={() => props.onDone(null)}
        />
      </form>
    </Dialog>
  );
}
