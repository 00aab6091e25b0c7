/**
 * The Permissions admin page (issue 15), for site admins and Folder Admins: for one folder (typed
 * or picked), the permissions that apply to it (on it and on its ancestors, GET /permissions
 * filter[applies_to]), granting to a user or a group and revoking; and what a given user may do
 * there, each capability with the grant that gives it (GET /permissions/effective). The server
 * decides what a Folder Admin sees and may change; the page only says where they administer.
 */
import { useState } from 'preact/hooks';
import { API, encodePath, request, type Entry, type Me } from '../api.ts';
import { FolderPicker } from '../dialogs.tsx';
import { Field } from '../field.tsx';
import { AccessTable, ConfirmDialog, UserField } from './access-kit.tsx';
import { failed, MessageLine, Pager, useCursorList, type Message } from './kit.tsx';

type Level = 'full' | 'readonly' | 'writeonly' | 'previewonly' | 'admin';

/** Permission is a row as GET /permissions answers it. */
interface Permission {
  id: number;
  path: string;
  permission: Level;
  user_id: number | null;
  username: string | null;
  group_id: number | null;
  group_name: string | null;
}

/** Effective is what GET /permissions/effective answers. */
interface Effective {
  username: string;
  path: string;
  site_admin: boolean;
  capabilities: {
    capability: Capability;
    allowed: boolean;
    grants: {
      via: 'user' | 'group' | 'site_admin';
      path: string | null;
      permission: Level | null;
      group_name: string | null;
    }[];
  }[];
}
type Capability = 'list' | 'read' | 'write' | 'delete' | 'admin';

const LEVELS: Record<Level, string> = {
  full: 'Full',
  readonly: 'Read only',
  writeonly: 'Write only',
  previewonly: 'Preview only',
  admin: 'Folder Admin',
};
const LEVEL_HINTS: Record<Level, string> = {
  full: 'list, download, upload, delete',
  readonly: 'list and download',
  writeonly: 'upload and create folders; no list or download',
  previewonly: 'list and preview; no download',
  admin: 'full, plus managing permissions, history and webhooks of this folder',
};
const CAPABILITIES: Record<Capability, string> = {
  list: 'List folders',
  read: 'Download',
  write: 'Upload and create folders',
  delete: 'Delete, rename and move',
  admin: 'Administer (Folder Admin)',
};

const show = (path: string) => `/${path}`;
const inside = (path: string, folder: string) =>
  folder === '' || path === folder || path.startsWith(`${folder}/`);
/** normalize turns what a person typed (`/a/b/`) into a site path (`a/b`). */
const normalize = (typed: string) =>
  typed
    .split('/')
    .filter((s) => s !== '')
    .join('/');

export function PermissionsPage(props: { me: Me }) {
  const adminFolders = props.me.user.admin_folders;
  const [folder, setFolder] = useState(adminFolders[0] ?? '');
  const [typed, setTyped] = useState(show(folder));
  const [picking, setPicking] = useState(false);
  const [message, setMessage] = useState<Message>(null);
  const [revoking, setRevoking] = useState<Permission | null>(null);
  // filter[applies_to]: the rows on this folder and its ancestors (an empty value is the root).
  const list = useCursorList<Permission>(
    `${API}/permissions?filter%5Bapplies_to%5D=${encodeURIComponent(folder)}`,
    100,
  );
  const mine = adminFolders.some((f) => inside(folder, f));

  const choose = (path: string) => {
    setFolder(path);
    setTyped(show(path));
    setMessage(null);
  };
  const subfolders = async (path: string) => {
    const { data } = await request<Entry[]>('GET', `${API}/folders/${encodePath(path)}?per_page=1000`);
    return data.filter((e) => e.type === 'directory').map((e) => e.path);
  };
  const revoke = async (row: Permission) => {
    setRevoking(null);
    try {
      await request('DELETE', `${API}/permissions/${row.id}`);
      setMessage({
        ok: true,
        text: `${LEVELS[row.permission]} of ${holder(row)} on ${show(row.path)} revoked.`,
      });
      list.reload();
    } catch (err) {
      setMessage(failed(err));
    }
  };

  return (
    <main class="admin permissions-page">
      <h1>Permissions</h1>
      {!props.me.user.site_admin && (
        <p class="hint">
          You are a Folder Admin of {adminFolders.map(show).join(', ')}. You see and change the permissions
          inside {adminFolders.length === 1 ? 'that folder' : 'those folders'} only; permissions granted above
          also apply there but are not listed: check a user below to see them.
        </p>
      )}
      {!props.me.user.site_admin && adminFolders.length > 1 && (
        <nav class="admin-folders" aria-label="Your folders">
          {adminFolders.map((f) => (
            <button
              key={f}
              type="button"
              class="link"
              aria-current={f === folder ? 'true' : undefined}
              onClick={() => choose(f)}
            >
              {show(f)}
            </button>
          ))}
        </nav>
      )}
      <form
        class="inline"
        onSubmit={(e) => {
          e.preventDefault();
          choose(normalize(typed));
        }}
      >
        <Field label="Folder" value={typed} onValue={setTyped} autocomplete="off" />
        <button type="submit">Show</button>
        <button type="button" onClick={() => setPicking(true)}>
          Choose folder…
        </button>
      </form>
      {!mine && (
        <p class="notice" role="status">
          {show(folder)} is outside the folders you administer: only your own permissions are shown, and the
          server refuses changes here.
        </p>
      )}
      <MessageLine message={message} />

      <h2>Who has access to {show(folder)}</h2>
      <MessageLine message={list.error} />
      <AccessTable
        label={`Permissions that apply to ${show(folder)}`}
        columns={['User or group', 'Level', 'Granted on']}
      >
        {list.rows.map((row) => (
          <tr key={row.id}>
            <td class="name">{holder(row)}</td>
            <td>{LEVELS[row.permission] ?? row.permission}</td>
            <td>{row.path === folder ? 'This folder' : `${show(row.path)} (inherited)`}</td>
            <td class="actions">
              <button
                type="button"
                aria-label={`Revoke ${LEVELS[row.permission]} of ${holder(row)} on ${show(row.path)}`}
                onClick={() => setRevoking(row)}
              >
                Revoke
              </button>
            </td>
          </tr>
        ))}
      </AccessTable>
      {!list.loading && !list.error && list.rows.length === 0 && (
        <p class="empty">
          {mine
            ? `No permission applies to ${show(folder)}: only site admins have access.`
            : `None of the permissions you may see applies to ${show(folder)}.`}
        </p>
      )}
      <Pager prev={list.prev} next={list.next} label="Pages of permissions" />

      <Grant
        folder={folder}
        siteAdmin={props.me.user.site_admin}
        onGranted={(text) => {
          setMessage({ ok: true, text });
          list.reload();
        }}
      />
      <EffectiveRights folder={folder} siteAdmin={props.me.user.site_admin} />

      {picking && (
        <FolderPicker
          title="Choose a folder"
          submit="Choose this folder"
          start={folder}
          list={subfolders}
          onDone={(f) => {
            setPicking(false);
            if (f !== null) choose(f);
          }}
        />
      )}
      {revoking && (
        <ConfirmDialog
          title="Revoke permission"
          action="Revoke"
          onDone={(yes) => (yes ? void revoke(revoking) : setRevoking(null))}
        >
          Revoke {LEVELS[revoking.permission]} of {holder(revoking)} on {show(revoking.path)}? It stops
          applying there and in every folder below at once.
        </ConfirmDialog>
      )}
    </main>
  );
}

/** holder names who a row is for, as a person reads it. */
function holder(row: Permission): string {
  return row.group_id !== null
    ? `group ${row.group_name ?? row.group_id}`
    : (row.username ?? `user ${row.user_id}`);
}

/** Grant adds a permission on the folder for a user (by username) or a group (by name). */
function Grant(props: { folder: string; siteAdmin: boolean; onGranted: (text: string) => void }) {
  const [kind, setKind] = useState<'user' | 'group'>('user');
  const [name, setName] = useState('');
  const [level, setLevel] = useState<Level>('readonly');
  const [error, setError] = useState<Message>(null);
  const submit = async (e: Event) => {
    e.preventDefault();
    setError(null);
    try {
      const who = name.trim();
      await request('POST', `${API}/permissions`, {
        body: {
          path: props.folder,
          permission: level,
          ...(kind === 'user' ? { username: who } : { group_name: who }),
        },
      });
      setName('');
      props.onGranted(
        `${LEVELS[level]} granted to ${kind === 'group' ? 'group ' : ''}${who} on ${show(props.folder)}.`,
      );
    } catch (err) {
      setError(failed(err));
    }
  };
  return (
    <section aria-labelledby="grant-title">
      <h2 id="grant-title">Grant access to {show(props.folder)}</h2>
      <form class="inline" onSubmit={submit}>
        <label>
          Grant to
          <select value={kind} onChange={(e) => setKind(e.currentTarget.value as 'user' | 'group')}>
            <option value="user">A user</option>
            <option value="group">A group</option>
          </select>
        </label>
        {kind === 'user' ? (
          <UserField label="Username" value={name} onValue={setName} suggest={props.siteAdmin} />
        ) : (
          <Field label="Group name" value={name} onValue={setName} autocomplete="off" required />
        )}
        <label>
          Level
          <select value={level} onChange={(e) => setLevel(e.currentTarget.value as Level)}>
            {(Object.keys(LEVELS) as Level[]).map((l) => (
              <option key={l} value={l}>
                {LEVELS[l]}: {LEVEL_HINTS[l]}
              </option>
            ))}
          </select>
        </label>
        <button type="submit">Grant</button>
      </form>
      <MessageLine message={error} />
    </section>
  );
}

/** EffectiveRights answers "what may this user do here", each capability with what gives it. */
function EffectiveRights(props: { folder: string; siteAdmin: boolean }) {
  const [username, setUsername] = useState('');
  const [result, setResult] = useState<Effective | null>(null);
  const [error, setError] = useState<Message>(null);
  const check = async (e: Event) => {
    e.preventDefault();
    setError(null);
    setResult(null);
    try {
      const q = new URLSearchParams({ username: username.trim(), path: props.folder });
      const { data } = await request<Effective>('GET', `${API}/permissions/effective?${q}`);
      setResult(data);
    } catch (err) {
      setError(failed(err));
    }
  };
  // A result for another folder is stale: it is not shown under this one.
  const shown = result && result.path === props.folder ? result : null;
  return (
    <section aria-labelledby="effective-title">
      <h2 id="effective-title">What may a user do in {show(props.folder)}?</h2>
      <form class="inline" onSubmit={check}>
        <UserField label="User to check" value={username} onValue={setUsername} suggest={props.siteAdmin} />
        <button type="submit">Check rights</button>
      </form>
      <MessageLine message={error} />
      {shown && (
        <table class="access-table" aria-label={`Rights of ${shown.username} in ${show(shown.path)}`}>
          <thead>
            <tr>
              <th scope="col">May</th>
              <th scope="col">Allowed</th>
              <th scope="col">Because of</th>
            </tr>
          </thead>
          <tbody>
            {shown.capabilities.map((c) => (
              <tr key={c.capability} class={c.allowed ? 'allowed' : 'refused'}>
                <td>{CAPABILITIES[c.capability]}</td>
                <td>{c.allowed ? 'Yes' : 'No'}</td>
                <td>
                  {c.allowed
                    ? c.grants
                        .map((g) =>
                          g.via === 'site_admin'
                            ? 'site admin'
                            : `${LEVELS[g.permission!]} on ${show(g.path!)} ${
                                g.via === 'group' ? `through group ${g.group_name}` : 'granted to the user'
                              }`,
                        )
                        .join('; ')
                    : 'no permission gives this'}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}
