/** The browser's modal dialogs: native <dialog> elements, so focus and Escape work as expected. */
import type { ComponentChildren } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';

/** Dialog is a modal <dialog>: focus moves into it, Escape closes it, the page behind is inert. */
export function Dialog(props: {
  title: string;
  onClose: () => void;
  children: ComponentChildren;
  /** a preview: as large as the screen allows */
  wide?: boolean;
}) {
  const ref = useRef<HTMLDialogElement>(null);
  useEffect(() => {
    const d = ref.current;
    if (d && !d.open) d.showModal();
    return () => d?.close();
  }, []);
  return (
    <dialog
      ref={ref}
      class={props.wide ? 'wide' : undefined}
      aria-label={props.title}
      onClose={props.onClose}
      onCancel={props.onClose}
    >
      <h2>{props.title}</h2>
      {props.children}
    </dialog>
  );
}

export function NameDialog(props: {
  title: string;
  label: string;
  submit: string;
  initial: string;
  onDone: (name: string | null) => void;
}) {
  const [value, setValue] = useState(props.initial);
  return (
    <Dialog title={props.title} onClose={() => props.onDone(null)}>
      <form
        method="dialog"
        onSubmit={(e) => {
          e.preventDefault();
          if (value.trim()) props.onDone(value.trim());
        }}
      >
        <label>
          {props.label}
          <input autoFocus required value={value} onInput={(e) => setValue(e.currentTarget.value)} />
        </label>
        <div class="buttons">
          <button type="submit">{props.submit}</button>
          <button type="button" onClick={() => props.onDone(null)}>
            Cancel
          </button>
        </div>
      </form>
    </Dialog>
  );
}

/**
 * FolderPicker browses folders through the API (one page of up to 1,000 entries per folder) and
 * returns the chosen one; the server still decides whether the move or copy is allowed.
 */
export function FolderPicker(props: {
  title: string;
  submit: string;
  start: string;
  list: (folder: string) => Promise<string[]>;
  onDone: (folder: string | null) => void;
  /** create makes a folder `name` inside `parent` (offered as "New folder" when given) */
  create?: (parent: string, name: string) => Promise<void>;
}) {
  const [folder, setFolder] = useState(props.start);
  const [folders, setFolders] = useState<string[]>([]);
  const [error, setError] = useState('');
  const [newName, setNewName] = useState('');
  const create = props.create;
  useEffect(() => {
    let live = true;
    setError('');
    props
      .list(folder)
      .then((f) => live && setFolders(f))
      .catch((err: unknown) => live && setError(err instanceof Error ? err.message : String(err)));
    return () => {
      live = false;
    };
  }, [folder]);
  const up = folder.includes('/') ? folder.slice(0, folder.lastIndexOf('/')) : '';
  return (
    <Dialog title={props.title} onClose={() => props.onDone(null)}>
      <p>
        Into: <strong>/{folder}</strong>
      </p>
      {error && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
      <ul class="picker" aria-label="Folders">
        {folder && (
          <li>
            <button type="button" class="link" onClick={() => setFolder(up)}>
              .. (up)
            </button>
          </li>
        )}
        {folders.map((f) => (
          <li key={f}>
            <button type="button" class="link" onClick={() => setFolder(f)}>
              {f.slice(f.lastIndexOf('/') + 1)}
            </button>
          </li>
        ))}
      </ul>
      {create && (
        <form
          class="new-folder"
          onSubmit={(e) => {
            e.preventDefault();
            const name = newName.trim();
            if (!name) return;
            setError('');
            create(folder, name)
              .then(() => {
                setNewName('');
                setFolder(folder ? `${folder}/${name}` : name);
              })
              .catch((err: unknown) => setError(err instanceof Error ? err.message : String(err)));
          }}
        >
          <label>
            New folder in /{folder}
            <input value={newName} onInput={(e) => setNewName(e.currentTarget.value)} />
          </label>
          <button type="submit">Create folder</button>
        </form>
      )}
      <div class="buttons">
        <button type="button" onClick={() => props.onDone(folder)}>
          {props.submit}
        </button>
        <button type="button" onClick={() => props.onDone(null)}>
          Cancel
        </button>
      </div>
    </Dialog>
  );
}
