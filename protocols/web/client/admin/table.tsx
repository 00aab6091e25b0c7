/** A table's column headers, for the read-only admin tables (Billing, Site). */

/** Column is a header's text; `amount` right-aligns it over figures. */
export type Column = string | { label: string; amount: true };

/** HeadRow is a <thead> with one column header per column. */
export function HeadRow(props: { columns: Column[] }) {
  return (
    <thead>
      <tr>
        {props.columns.map((c) =>
          typeof c === 'string' ? (
            <th key={c} scope="col">
              {c}
            </th>
          ) : (
            <th key={c.label} scope="col" class="amount">
              {c.label}
            </th>
          ),
        )}
      </tr>
    </thead>
  );
}
