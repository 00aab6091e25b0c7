/**
 * The Groups admin page (issue 15), for site admins: groups one page at a time, create, edit
 * (name, notes) and delete; a group's members one page at a time (GET /groups/:id/members), added
 * by username (the server resolves it, so no list of every user is loaded) and removed one by one.
 */
import { useState } from 'preact/hooks';
import { API, request, type Me } from '../api.ts';
import { Dialog } from '../dialogs.tsx';
import { Field } from '../field.tsx';
import { AccessTable, ConfirmDialog, UserField } from './access-kit.tsx';
import { failed, MessageLine, Pager, useCursorList, type Message } from './kit.tsx';

/** Group is a group as GET /groups answers it (user_ids: comma-separated ids). */
interface Group {
  id: number;
  name: string;
  notes: string;
  user_ids: string;
}

/** Member is one member as GET /groups/:id/members answers it. */
interface Member {
  user_id: number;
  username: string;
  name: string;
}

const memberCount = (g: Group) => (g.user_ids ? g.user_ids.split(',').length : 0);

export function GroupsPage(_props: { me: Me }) {
  const list = useCursorList<Group>(`${API}/groups`, 50);
  const [message, setMessage] = useState<Message>(null);
  const [editing, setEditing] = useState<Group | 'new' | null>(null);
  const [deleting, setDeleting] = useState<Group | null>(null);
  const [open, setOpen] = useState<Group | null>(null);

  const save = async (fields: { name: string; notes: string }) => {
    const isNew = editing === 'new';
    const { data } = isNew
      ? await request<Group>('POST', `${API}/groups`, { body: fields })
      : await request<Group>('PUT', `${API}/groups/${(editing as Group).id}`, { body: fields });
    setEditing(null);
    setMessage({ ok: true, text: isNew ? `Group ${data.name} created.` : `Group ${data.name} saved.` });
    if (open?.id === data.id) setOpen(data);
    list.reload();
  };

  const remove = async (g: Group) => {
    setDeleting(null);
    try {
      await request('DELETE', `${API}/groups/${g.id}`);
      setMessage({ ok: true, text: `Group ${g.name} deleted.` });
      if (open?.id === g.id) setOpen(null);
      list.reload();
    } catch (err) {
      setMessage(failed(err));
    }
  };

  return (
    <main class="admin groups-page">
      <h1>Groups</h1>
      <p class="hint">
        A group's permissions apply to every member. Permissions are granted on the Permissions page.
      </p>
      <div class="toolbar">
        <button type="button" onClick={() => setEditing('new')}>
          New group
        </button>
      </div>
      <MessageLine message={message} />
      <MessageLine message={list.error} />
      <AccessTable label="Groups" columns={['Name', 'Notes', 'Members']}>
        {list.rows.map((g) => (
          <tr key={g.id} aria-current={open?.id === g.id ? 'true' : undefined}>
            <td class="name">{g.name}</td>
            <td class="notes">{g.notes}</td>
            <td>{memberCount(g)}</td>
            <td class="actions">
              <button type="button" aria-label={`Members of ${g.name}`} onClick={() => setOpen(g)}>
                Members
              </button>
              <button type="button" aria-label={`Edit ${g.name}`} onClick={() => setEditing(g)}>
                Edit
              </button>
              <button type="button" aria-label={`Delete ${g.name}`} onClick={() => setDeleting(g)}>
                Delete
              </button>
            </td>
          </tr>
        ))}
      </AccessTable>
      {!list.loading && !list.error && list.rows.length === 0 && <p class="empty">No groups yet.</p>}
      <Pager prev={list.prev} next={list.next} label="Pages of groups" />
      {open && <Members key={open.id} group={open} onChange={list.reload} />}
      {editing && (
        <GroupDialog
          group={editing === 'new' ? null : editing}
          onSave={save}
          onClose={() => setEditing(null)}
        />
      )}
      {deleting && (
        <ConfirmDialog
          title={`Delete group ${deleting.name}`}
          action="Delete"
          onDone={(yes) => (yes ? void remove(deleting) : setDeleting(null))}
        >
          Delete the group {deleting.name}? Its {memberCount(deleting)} members stay, but lose the permissions
          granted to the group, and those permissions are deleted too.
        </ConfirmDialog>
      )}
    </main>
  );
}

/** GroupDialog creates or edits a group's name and notes; a refusal stays in the dialog. */
function GroupDialog(props: {
  group: Group | null;
  onSave: (fields: { name: string; notes: string }) => Promise<void>;
  onClose: () => void;
}) {
  const [name, setName] = useState(props.group?.name ?? '');
  const [notes, setNotes] = useState(props.group?.notes ?? '');
  const [error, setError] = useState<Message>(null);
  const [busy, setBusy] = useState(false);
  return (
    <Dialog title={props.group ? `Edit group ${props.group.name}` : 'New group'} onClose={props.onClose}>
      <form
        onSubmit={(e) => {
          e.preventDefault();
          setBusy(true);
          props
            .onSave({ name: name.trim(), notes })
            .catch((err: unknown) => setError(failed(err)))
            .finally(() => setBusy(false));
        }}
      >
        <Field label="Name" value={name} onValue={setName} required />
        <label>
          Notes
          <textarea rows={3} value={notes} onInput={(e) => setNotes(e.currentTarget.value)} />
        </label>
        <MessageLine message={error} />
        <div class="buttons">
          <button type="submit" disabled={busy}>
            Save
          </button>
          <button type="button" onClick={props.onClose}>
            Cancel
          </button>
        </div>
      </form>
    </Dialog>
  );
}

/** Members lists one group's members a page at a time, adds one by username and removes one. */
function Members(props: { group: Group; onChange: () => void }) {
  const g = props.group;
  const list = useCursorList<Member>(`${API}/groups/${g.id}/members`, 25);
  const [username, setUsername] = useState('');
  const [message, setMessage] = useState<Message>(null);

  const add = async (e: Event) => {
    e.preventDefault();
    try {
      const { data } = await request<Member>('POST', `${API}/groups/${g.id}/members`, {
        body: { username: username.trim() },
      });
      setUsername('');
      setMessage({ ok: true, text: `${data.username} added to ${g.name}.` });
      list.reload();
      props.onChange();
    } catch (err) {
      setMessage(failed(err));
    }
  };
  const remove = async (m: Member) => {
    try {
      await request('DELETE', `${API}/groups/${g.id}/members/${m.user_id}`);
      setMessage({ ok: true, text: `${m.username} removed from ${g.name}.` });
      list.reload();
      props.onChange();
    } catch (err) {
      setMessage(failed(err));
    }
  };

  return (
    <section class="members" aria-labelledby="members-title">
      <h2 id="members-title">Members of {g.name}</h2>
      <form class="inline" onSubmit={add}>
        <UserField label="Username" value={username} onValue={setUsername} />
        <button type="submit">Add member</button>
      </form>
      <MessageLine message={message} />
      <MessageLine message={list.error} />
      <AccessTable label={`Members of ${g.name}`} columns={['Username', 'Name']}>
        {list.rows.map((m) => (
          <tr key={m.user_id}>
            <td class="name">{m.username}</td>
            <td>{m.name}</td>
            <td class="actions">
              <button
                type="button"
                aria-label={`Remove ${m.username} from ${g.name}`}
                onClick={() => void remove(m)}
              >
                Remove
              </button>
            </td>
          </tr>
        ))}
      </AccessTable>
      {!list.loading && !list.error && list.rows.length === 0 && <p class="empty">No members yet.</p>}
      <Pager prev={list.prev} next={list.next} label={`Pages of members of ${g.name}`} />
    </section>
  );
}
