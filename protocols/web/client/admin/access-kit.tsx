/** What the Groups and Permissions pages share: a confirmation and a table with an actions column. */
import type { ComponentChildren } from 'preact';
import { useEffect, useId, useState } from 'preact/hooks';
import { API, request } from '../api.ts';
import { Dialog } from '../dialogs.tsx';
import { withQuery } from './kit.tsx';

/** ConfirmDialog asks before something that cannot be undone (delete a group, revoke a permission). */
export function ConfirmDialog(props: {
  title: string;
  /** the button that does it, e.g. `Delete` */
  action: string;
  onDone: (confirmed: boolean) => void;
  children: ComponentChildren;
}) {
  return (
    <Dialog title={props.title} onClose={() => props.onDone(false)}>
      <p>{props.children}</p>
      <div class="buttons">
        <button type="button" class="danger" onClick={() => props.onDone(true)}>
          {props.action}
        </button>
        <button type="button" autoFocus onClick={() => props.onDone(false)}>
          Cancel
        </button>
      </div>
    </Dialog>
  );
}

/** AccessTable is a table named `label` with column headers and, last, an unnamed actions column. */
export function AccessTable(props: { label: string; columns: string[]; children: ComponentChildren }) {
  return (
    <table class="access-table" aria-label={props.label}>
      <thead>
        <tr>
          {props.columns.map((c) => (
            <th key={c} scope="col">
              {c}
            </th>
          ))}
          <th scope="col">
            <span class="visually-hidden">Actions</span>
          </th>
        </tr>
      </thead>
      <tbody>{props.children}</tbody>
    </table>
  );
}

/**
 * UserField is a username input that suggests up to 10 matching users from GET /users?search= as
 * the person types (never the whole list). The server resolves the username that is submitted,
 * so the field works without suggestions: for Folder Admins (`suggest` false: GET /users is for
 * site admins) and before the server understands `search`; suggestions not containing the typed text are dropped.
 */
export function UserField(props: {
  label: string;
  value: string;
  onValue: (value: string) => void;
  /** false: no suggestions (the person may not list users) */
  suggest?: boolean;
}) {
  const [suggestions, setSuggestions] = useState<string[]>([]);
  const listId = useId();
  const typed = props.value.trim();
  useEffect(() => {
    if (typed.length < 2 || props.suggest === false) return setSuggestions([]);
    let live = true;
    const timer = setTimeout(() => {
      request<{ username: string }[]>('GET', withQuery(`${API}/users`, { search: typed, per_page: 10 }))
        .then(({ data }) => {
          if (!live) return;
          const t = typed.toLowerCase();
          setSuggestions(data.map((u) => u.username).filter((u) => u.toLowerCase().includes(t)));
        })
        .catch(() => live && setSuggestions([]));
    }, 250);
    return () => {
      live = false;
      clearTimeout(timer);
    };
  }, [typed, props.suggest]);
  return (
    <label>
      {props.label}
      <input
        value={props.value}
        list={listId}
        autocomplete="off"
        required
        onInput={(e) => props.onValue(e.currentTarget.value)}
      />
      <datalist id={listId}>
        {suggestions.map((u) => (
          <option key={u} value={u} />
        ))}
      </datalist>
    </label>
  );
}
