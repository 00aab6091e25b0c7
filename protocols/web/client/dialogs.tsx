/** The browser's modal dialogs: native <dialog> elements, so focus and Escape work as expected. */
import type { ComponentChildren } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';

/** Dialog is a modal <dialog>: focus moves into it, Escape closes it, the page behind is inert. */
export function Dialog(props: { title: string; onClose: () => void; children: ComponentChildren }) {
  const ref = useRef<HTMLDialogElement>(null);
  useEffect(() => {
    const d = ref.current;
    if (d && !d.open) d.showModal();
    return () => d?.close();
  }, []);
  return (
    <dialog ref={ref} aria-label={props.title} onClose={props.onClose} onCancel={props.onClose}>
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
