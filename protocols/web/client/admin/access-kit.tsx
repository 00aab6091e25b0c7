/** What the Groups and Permissions pages share: a confirmation and a table with an actions column. */
import type { ComponentChildren } from 'preact';
import { Dialog } from '../dialogs.tsx';

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
