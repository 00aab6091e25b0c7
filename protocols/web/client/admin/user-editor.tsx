/**
 * One user's editor on the Users page: every SPEC field of a User (and the extension flags) with
 * its rule beside it, SPEC's 422 model_errors shown beside the field they name; a folder picker
 * for user_root that can create the folder; reset password, unlock and delete. The server decides
 * every rule again; the rules here only tell the admin what it will say.
 */
import type { ComponentChildren, InputHTMLAttributes } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { API, ApiError, encodePath, request, type Entry, type Me } from '../api.ts';
import { Dialog, FolderPicker } from '../dialogs.tsx';
import { failed, MessageLine, type Message } from './kit.tsx';
import { UserKeys } from './user-keys.tsx';

/** when shows a date-time in the reader's locale, or a word when there is none. */
export function when(iso: string | null, none = 'Never'): string {
  return iso ? new Date(iso).toLocaleString() : none;
}

/** AdminUser is a User as GET /users shows it. */
export interface AdminUser {
  id: number;
  username: string;
  name: string;
  email: string;
  notes: string;
  group_ids: string;
  ftp_permission: boolean;
  web_permission: boolean;
  sftp_permission: boolean;
  dav_permission: boolean;
  restapi_permission: boolean;
  attachments_permission: boolean;
  self_managed: boolean;
  require_password_change: boolean;
  site_admin: boolean;
  allowed_ips: string;
  user_root: string;
  created_at: string;
  last_login_at: string | null;
  locked_until: string | null;
}

type Flag =
  | 'ftp_permission'
  | 'web_permission'
  | 'sftp_permission'
  | 'dav_permission'
  | 'restapi_permission'
  | 'attachments_permission'
  | 'self_managed'
  | 'require_password_change'
  | 'site_admin';
type Text = 'username' | 'name' | 'email' | 'notes' | 'allowed_ips' | 'user_root';

/** Draft is the form: the editable fields, the new user's password and grant_permission. */
type Draft = Pick<AdminUser, Flag | Text> & { password: string; grant_permission: string; groups: number[] };

/** Errors are SPEC's model_errors: field name → messages. */
type Errors = Record<string, string[]>;

const BLANK: Draft = {
  username: '',
  name: '',
  email: '',
  notes: '',
  allowed_ips: '',
  user_root: '',
  ftp_permission: true,
  web_permission: true,
  sftp_permission: true,
  dav_permission: true,
  restapi_permission: true,
  attachments_permission: false,
  self_managed: true,
  require_password_change: false,
  site_admin: false,
  password: '',
  grant_permission: '',
  groups: [],
};

// SPEC "User" (and DESIGN.md for the extension flags): what each flag allows.
const ACCESS: { field: Flag; label: string; rule: string }[] = [
  { field: 'ftp_permission', label: 'FTP and FTPS', rule: 'Logins over FTP and FTPS. On by default.' },
  { field: 'sftp_permission', label: 'SFTP', rule: 'Logins over SFTP. On by default.' },
  { field: 'dav_permission', label: 'WebDAV', rule: 'Logins over WebDAV. On by default.' },
  {
    field: 'web_permission',
    label: 'Web interface',
    rule: 'Signing in to this web interface. On by default.',
  },
  {
    field: 'restapi_permission',
    label: 'REST API',
    rule: 'Sessions and API keys on the REST API. On by default.',
  },
];

const RIGHTS: { field: Flag; label: string; rule: string }[] = [
  {
    field: 'site_admin',
    label: 'Site admin',
    rule: 'Passes every permission check and manages users, groups and the site. Off by default.',
  },
  {
    field: 'self_managed',
    label: 'Manages own account',
    rule: 'May change their own name, e-mail and password. On by default.',
  },
  {
    field: 'attachments_permission',
    label: 'May share files by link',
    rule: 'Share links for people without an account. Off by default.',
  },
  {
    field: 'require_password_change',
    label: 'Must change password at next sign-in',
    rule: 'Needs web interface access on. Off by default.',
  },
];

const GRANTS: [string, string][] = [
  ['', 'Nothing'],
  ['full', 'Full'],
  ['read', 'Read'],
  ['write', 'Write'],
  ['preview', 'Preview'],
  ['read+write', 'Read and write'],
  ['preview+write', 'Preview and write'],
];

const ids = (s: string) => (s ? s.split(',').map(Number) : []);

function draftOf(u: AdminUser | null): Draft {
  if (!u) return { ...BLANK };
  const { id: _id, group_ids, created_at: _c, last_login_at: _l, locked_until: _u, ...fields } = u;
  return { ...fields, password: '', grant_permission: '', groups: ids(group_ids) };
}

/** TEXTS are the text fields: label and SPEC's rule (with our limits) shown beside each. */
const TEXTS: Record<
  Text | 'password',
  {
    label: string;
    rule: string;
    type?: 'email' | 'password';
    multiline?: boolean;
    required?: boolean;
    autocomplete?: string;
  }
> = {
  username: {
    label: 'Username',
    rule: 'At most 50 characters, unique in any case; no : / \\ or control characters, no space at either end.',
    required: true,
    autocomplete: 'off',
  },
  password: {
    label: 'Password',
    rule: 'At least 8 characters (at most 72 bytes). Change it later with Reset password.',
    type: 'password',
    required: true,
    autocomplete: 'new-password',
  },
  name: { label: 'Name', rule: 'Real name, for people to read. At most 50 characters.' },
  email: { label: 'E-mail', rule: 'Where notifications go. At most 50 characters.', type: 'email' },
  notes: { label: 'Notes', rule: 'Free text for admins.', multiline: true },
  user_root: {
    label: 'Root folder (user_root)',
    rule: 'What FTP, SFTP and WebDAV show as /; not the web interface. No slash at the start, a slash at the end (docs/), at most 250 characters; the folder must exist. Blank: the whole site.',
  },
  allowed_ips: {
    label: 'Allowed IP addresses',
    rule: "One address or CIDR range per line (192.0.2.7, 10.0.0.0/8). Blank allows all. A match here or in the site's list allows a login.",
    multiline: true,
  },
};

/** FieldRule is a field's rule and its refusals, under the input they describe. */
function FieldRule(props: { id: string; rule: string; errors?: string[] | undefined }) {
  return (
    <>
      <small class="hint" id={`${props.id}-rule`}>
        {props.rule}
      </small>
      {props.errors?.map((e) => (
        <small class="field-error" key={e}>
          {e}
        </small>
      ))}
    </>
  );
}

function TextField(props: {
  field: Text | 'password';
  label: string;
  rule: string;
  value: string;
  errors: Errors;
  onValue: (v: string) => void;
  type?: 'email' | 'password';
  multiline?: boolean;
  required?: boolean;
  autocomplete?: string;
  children?: ComponentChildren;
}) {
  const id = `user-${props.field}`;
  const errors = props.errors[props.field];
  const common = {
    id,
    name: props.field,
    value: props.value,
    required: props.required,
    'aria-describedby': `${id}-rule`,
    'aria-invalid': errors ? ('true' as const) : undefined,
  };
  return (
    <div class={errors ? 'rule-field invalid' : 'rule-field'}>
      <label for={id}>{props.label}</label>
      <div class="with-button">
        {props.multiline ? (
          <textarea {...common} rows={3} onInput={(e) => props.onValue(e.currentTarget.value)} />
        ) : (
          // Preact 11 types each input type's props apart; these are valid for text, email and password.
          <input
            {...({
              ...common,
              type: props.type ?? 'text',
              autocomplete: props.autocomplete,
            } as InputHTMLAttributes<HTMLInputElement>)}
            onInput={(e) => props.onValue(e.currentTarget.value)}
          />
        )}
        {props.children}
      </div>
      <FieldRule id={id} rule={props.rule} errors={errors} />
    </div>
  );
}

function FlagField(props: {
  field: Flag;
  label: string;
  rule: string;
  value: boolean;
  errors: Errors;
  onValue: (v: boolean) => void;
}) {
  const id = `user-${props.field}`;
  return (
    <div class="rule-field flag">
      <label class="check" for={id}>
        <input
          id={id}
          type="checkbox"
          checked={props.value}
          aria-describedby={`${id}-rule`}
          onChange={(e) => props.onValue(e.currentTarget.checked)}
        />
        {props.label}
      </label>
      <FieldRule id={id} rule={props.rule} errors={props.errors[props.field]} />
    </div>
  );
}

interface Group {
  id: number;
  name: string;
}

/** subfolders lists a folder's folders for the picker (its first 1,000 entries). */
async function subfolders(path: string): Promise<string[]> {
  const { data } = await request<Entry[]>('GET', `${API}/folders/${encodePath(path)}?per_page=1000`);
  return data.filter((e) => e.type === 'directory').map((e) => e.path);
}

/** reauthenticate is the header SPEC asks of a session changing a password or making a key. */
export const reauthenticate = (password: string) => ({ 'X-Svc-Reauthentication': `password:${password}` });

/** notYou words the refusal of a wrong reauthentication password. */
export function notYou(err: unknown, fallback: string): Message {
  if (err instanceof ApiError && err.type.startsWith('not-authorized/reauthentication-failed'))
    return { ok: false, text: 'Your own password is not right.' };
  return failed(err, fallback);
}

export function UserEditor(props: {
  me: Me;
  user: AdminUser | null;
  onClose: (message: Message) => void;
  onSaved: (user: AdminUser) => void;
}) {
  const { user } = props;
  const [draft, setDraft] = useState<Draft>(() => draftOf(user));
  const [errors, setErrors] = useState<Errors>({});
  const [message, setMessage] = useState<Message>(null);
  const [groups, setGroups] = useState<Group[] | null>(null);
  const [dialog, setDialog] = useState<'folder' | 'delete' | 'password' | null>(null);
  const set = <K extends keyof Draft>(k: K, v: Draft[K]) => setDraft((d) => ({ ...d, [k]: v }));
  const flags = (list: typeof ACCESS) =>
    list.map((f) => (
      <FlagField
        key={f.field}
        {...f}
        value={draft[f.field]}
        errors={errors}
        onValue={(v) => set(f.field, v)}
      />
    ));
  const text = (field: Text | 'password', children?: ComponentChildren) => (
    <TextField
      {...TEXTS[field]}
      field={field}
      value={draft[field]}
      errors={errors}
      onValue={(v) => set(field, v)}
    >
      {children}
    </TextField>
  );

  useEffect(() => setDraft(draftOf(user)), [user]);
  useEffect(() => {
    request<Group[]>('GET', `${API}/groups?per_page=1000`)
      .then(({ data }) => setGroups(data))
      .catch(() => setGroups([]));
  }, []);

  /** changed is what the form differs in from the saved user (everything for a new one). */
  const changed = (): Record<string, unknown> => {
    const before = draftOf(user);
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(draft)) {
      if (k === 'groups' || k === 'grant_permission' || k === 'password') continue;
      if (!user || before[k as keyof Draft] !== v) out[k] = v;
    }
    const groupIds = [...draft.groups].sort((a, b) => a - b).join(',');
    if (!user || groupIds !== [...before.groups].sort((a, b) => a - b).join(',')) out.group_ids = groupIds;
    if (draft.grant_permission) out.grant_permission = draft.grant_permission;
    if (!user) out.password = draft.password;
    return out;
  };

  const save = async (e: Event) => {
    e.preventDefault();
    setMessage(null);
    setErrors({});
    try {
      const { data } = user
        ? await request<AdminUser>('PATCH', `${API}/users/${user.id}`, { body: changed() })
        : await request<AdminUser>('POST', `${API}/users`, { body: changed() });
      setMessage({ ok: true, text: user ? 'Saved.' : `User ${data.username} created.` });
      props.onSaved(data);
    } catch (err) {
      if (err instanceof ApiError && err.modelErrors) setErrors(err.modelErrors);
      setMessage(failed(err, 'Saving failed.'));
    }
  };

  const unlock = async () => {
    if (!user) return;
    try {
      const { data } = await request<AdminUser>('POST', `${API}/users/${user.id}/unlock`);
      props.onSaved(data);
      setMessage({ ok: true, text: `${data.username} is unlocked and may sign in again.` });
    } catch (err) {
      setMessage(failed(err, 'Unlocking failed.'));
    }
  };

  return (
    <section class="user-editor" aria-labelledby="user-editor-title">
      <p>
        <button type="button" class="link" onClick={() => props.onClose(null)}>
          ← All users
        </button>
      </p>
      <h1 id="user-editor-title">{user ? `User ${user.username}` : 'New user'}</h1>
      {user && (
        <p class="user-facts">
          Created {when(user.created_at)}. Last login: {when(user.last_login_at)}.{' '}
          {user.locked_until ? (
            <strong class="locked">Locked out until {when(user.locked_until)} after failed logins.</strong>
          ) : (
            'Not locked out.'
          )}
        </p>
      )}
      {user && (
        <div class="toolbar">
          <button type="button" onClick={() => setDialog('password')}>
            Reset password
          </button>
          {user.locked_until && (
            <button type="button" onClick={() => void unlock()}>
              Unlock
            </button>
          )}
          <button type="button" class="danger" onClick={() => setDialog('delete')}>
            Delete
          </button>
        </div>
      )}
      <MessageLine message={message} />
      <form class="user-form" onSubmit={save} noValidate>
        <fieldset>
          <legend>Account</legend>
          {text('username')}
          {!user && text('password')}
          {text('name')}
          {text('email')}
          {text('notes')}
        </fieldset>
        <fieldset>
          <legend>Files</legend>
          {text(
            'user_root',
            <button type="button" onClick={() => setDialog('folder')}>
              Choose folder
            </button>,
          )}
          <div class="rule-field">
            <label for="user-grant_permission">Grant on the root folder</label>
            <select
              id="user-grant_permission"
              value={draft.grant_permission}
              aria-describedby="user-grant_permission-rule"
              onChange={(e) => set('grant_permission', e.currentTarget.value)}
            >
              {GRANTS.map(([v, label]) => (
                <option key={v} value={v}>
                  {label}
                </option>
              ))}
            </select>
            <FieldRule
              id="user-grant_permission"
              rule="Adds this permission on the root folder when you save (read and write: two permissions). It is not shown here afterwards: see Permissions."
              errors={errors.grant_permission}
            />
          </div>
        </fieldset>
        <fieldset>
          <legend>Access</legend>
          {flags(ACCESS)}
          {text('allowed_ips')}
        </fieldset>
        <fieldset>
          <legend>Rights</legend>
          {flags(RIGHTS)}
        </fieldset>
        <fieldset aria-describedby="user-group_ids-rule">
          <legend>Groups</legend>
          {groups === null && <p class="hint">Loading groups…</p>}
          {groups?.length === 0 && <p class="hint">There are no groups yet.</p>}
          <div class="group-list">
            {groups?.map((g) => (
              <label class="check" key={g.id}>
                <input
                  type="checkbox"
                  checked={draft.groups.includes(g.id)}
                  onChange={(e) =>
                    set(
                      'groups',
                      e.currentTarget.checked
                        ? [...draft.groups, g.id]
                        : draft.groups.filter((x) => x !== g.id),
                    )
                  }
                />
                {g.name}
              </label>
            ))}
          </div>
          <FieldRule
            id="user-group_ids"
            rule="A member has the permissions of each of their groups as well as their own."
            errors={errors.group_ids}
          />
        </fieldset>
        <div class="buttons start">
          <button type="submit">Save</button>
        </div>
      </form>
      {user && <UserKeys user={user} />}
      {dialog === 'folder' && (
        <FolderPicker
          title="Root folder"
          submit="Use this folder"
          start={draft.user_root.replace(/^\/+|\/+$/g, '')}
          list={subfolders}
          create={async (parent, name) => {
            await request('POST', `${API}/folders/${encodePath(parent ? `${parent}/${name}` : name)}`);
          }}
          onDone={(folder) => {
            setDialog(null);
            if (folder !== null) set('user_root', folder ? `${folder}/` : '');
          }}
        />
      )}
      {dialog === 'delete' && user && (
        <Dialog title={`Delete ${user.username}?`} onClose={() => setDialog(null)}>
          <p>
            Their permissions, keys, sessions and group memberships go too; their files and history stay. This
            cannot be undone.
          </p>
          <div class="buttons">
            <button
              type="button"
              class="danger"
              onClick={() => {
                request('DELETE', `${API}/users/${user.id}`)
                  .then(() => props.onClose({ ok: true, text: `User ${user.username} deleted.` }))
                  .catch((err: unknown) => {
                    setDialog(null);
                    setMessage(failed(err, 'Deleting failed.'));
                  });
              }}
            >
              Delete user
            </button>
            <button type="button" onClick={() => setDialog(null)}>
              Cancel
            </button>
          </div>
        </Dialog>
      )}
      {dialog === 'password' && user && (
        <PasswordDialog
          user={user}
          onDone={(m) => {
            setDialog(null);
            if (m) setMessage(m);
          }}
        />
      )}
    </section>
  );
}

/**
 * OwnPassword is the admin's own password a dialog sends as X-Svc-Reauthentication, with the
 * dialog's outcome and buttons under it.
 */
export function OwnPassword(props: {
  value: string;
  onValue: (v: string) => void;
  why: string;
  error: Message;
  submit: string;
  onCancel: () => void;
}) {
  return (
    <>
      <label>
        Your own password
        <input
          type="password"
          required
          autocomplete="current-password"
          value={props.value}
          onInput={(e) => props.onValue(e.currentTarget.value)}
        />
      </label>
      <small class="hint">{props.why}</small>
      <MessageLine message={props.error} />
      <div class="buttons">
        <button type="submit">{props.submit}</button>
        <button type="button" onClick={props.onCancel}>
          Cancel
        </button>
      </div>
    </>
  );
}

/** PasswordDialog sets a new password (PATCH password), confirmed with the admin's own password. */
function PasswordDialog(props: { user: AdminUser; onDone: (m: Message) => void }) {
  const [password, setPassword] = useState('');
  const [mine, setMine] = useState('');
  const [error, setError] = useState<Message>(null);
  return (
    <Dialog title={`Reset password of ${props.user.username}`} onClose={() => props.onDone(null)}>
      <form
        onSubmit={(e) => {
          e.preventDefault();
          request('PATCH', `${API}/users/${props.user.id}`, {
            body: { password },
            headers: reauthenticate(mine),
          })
            .then(() =>
              props.onDone({ ok: true, text: `The password of ${props.user.username} is changed.` }),
            )
            .catch((err: unknown) => {
              const modelErrors = err instanceof ApiError ? err.modelErrors?.password : undefined;
              setError(
                modelErrors
                  ? { ok: false, text: `Password ${modelErrors.join(', ')}.` }
                  : notYou(err, 'Failed.'),
              );
            });
        }}
      >
        <label>
          New password
          <input
            type="password"
            required
            autocomplete="new-password"
            value={password}
            onInput={(e) => setPassword(e.currentTarget.value)}
          />
        </label>
        <small class="hint">At least 8 characters.</small>
        <OwnPassword
          value={mine}
          onValue={setMine}
          why="Changing a password asks who you are again."
          error={error}
          submit="Set password"
          onCancel={() => props.onDone(null)}
        />
      </form>
    </Dialog>
  );
}
