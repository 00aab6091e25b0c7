/** Field is a labelled text input: the label is its accessible name. */
import type { InputHTMLAttributes } from 'preact';

type InputProps = Pick<InputHTMLAttributes<HTMLInputElement>, 'type' | 'name' | 'autocomplete' | 'required'>;

export function Field(
  props: InputProps & { label: string; value: string; onValue: (value: string) => void },
) {
  const { label, value, onValue, ...input } = props;
  // Preact 11 types each input type's props apart; these few are valid for every type used here.
  return (
    <label>
      {label}
      <input
        {...(input as InputHTMLAttributes<HTMLInputElement>)}
        value={value}
        onInput={(e) => onValue(e.currentTarget.value)}
      />
    </label>
  );
}
