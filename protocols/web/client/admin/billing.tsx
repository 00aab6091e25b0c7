/**
 * The Billing admin page (issue 15, site admins): invoices and payments (SPEC AccountLineItem),
 * each list paged on the server, a line item's nested lines in a dialog, and its printable document
 * (the signed `download_uri`) in a new tab. Amounts carry their currency code; dates are days.
 */
import { useEffect, useState } from 'preact/hooks';
import { API, request, type Me } from '../api.ts';
import { Dialog } from '../dialogs.tsx';
import { failed, MessageLine, Pager, useCursorList, type Message } from './kit.tsx';
import { HeadRow } from './table.tsx';

type Kind = 'invoice' | 'payment';

/** LineItem is SPEC's AccountLineItem as the API answers it (dates as ISO text). */
interface LineItem {
  id: number;
  amount: number;
  balance: number;
  created_at: string;
  currency: string;
  download_uri: string;
  invoice_line_items: {
    amount: number;
    created_at: string | null;
    description: string;
    type: string;
    service_end_at: string | null;
    service_start_at: string | null;
    plan: string;
    site: string;
  }[];
  method: string;
  payment_line_items: {
    amount: number;
    created_at: string | null;
    invoice_id: number | null;
    payment_id: number | null;
  }[];
  payment_reversed_at: string | null;
  payment_type: string;
  site_name: string;
  type: Kind;
}

const plural: Record<Kind, string> = { invoice: 'invoices', payment: 'payments' };
const title = (kind: Kind, id: number) => `${kind === 'invoice' ? 'Invoice' : 'Payment'} ${id}`;

/** money shows an amount with its currency code (USD 12.50); a code Intl does not know stays as text. */
function money(amount: number, currency: string): string {
  try {
    return new Intl.NumberFormat(undefined, { style: 'currency', currency, currencyDisplay: 'code' }).format(
      amount,
    );
  } catch {
    return `${amount.toFixed(2)} ${currency}`;
  }
}

/** day shows a date as the day it names in UTC (the printable document's day), e.g. Jan 31, 2026. */
function day(iso: string | null): string {
  if (!iso) return '';
  const d = new Date(iso);
  return Number.isNaN(d.getTime())
    ? iso
    : new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeZone: 'UTC' }).format(d);
}

// A signed document URL lives 180 s (DOWNLOAD_TTL_S); a list older than this asks for a fresh one.
const FRESH_MS = 150_000;

/**
 * openDocument opens a line item's printable document in a new tab: the list's signed URL while it
 * is fresh, else one asked for now (the tab is opened at once, so no pop-up blocker stops it).
 */
function openDocument(e: MouseEvent, item: LineItem, loadedAt: number, onError: (m: Message) => void) {
  if (Date.now() - loadedAt < FRESH_MS) return;
  e.preventDefault();
  const tab = window.open('about:blank', '_blank');
  if (tab) tab.opener = null;
  request<LineItem>('GET', `${API}/${plural[item.type]}/${item.id}`)
    .then(({ data }) => {
      if (tab) tab.location.href = data.download_uri;
    })
    .catch((err: unknown) => {
      tab?.close();
      onError(failed(err, 'The document could not be opened.'));
    });
}

/** DocumentLink is the link to a line item's printable document, named for a person. */
function DocumentLink(props: { item: LineItem; loadedAt: number; onError: (m: Message) => void }) {
  const { item } = props;
  return (
    <a
      href={item.download_uri}
      target="_blank"
      rel="noopener noreferrer"
      aria-label={`Printable ${title(item.type, item.id).toLowerCase()}`}
      onClick={(e) => openDocument(e, item, props.loadedAt, props.onError)}
    >
      Printable
    </a>
  );
}

/** LineItemList is one cursor-paged table: invoices or payments. */
function LineItemList(props: { kind: Kind; heading: string; onOpen: (item: LineItem) => void }) {
  const list = useCursorList<LineItem>(`${API}/${plural[props.kind]}`, 25);
  const [loadedAt, setLoadedAt] = useState(Date.now());
  const [message, setMessage] = useState<Message>(null);
  useEffect(() => setLoadedAt(Date.now()), [list.rows]);
  const invoice = props.kind === 'invoice';
  return (
    <section aria-labelledby={`billing-${props.kind}`}>
      <h2 id={`billing-${props.kind}`}>{props.heading}</h2>
      <MessageLine message={list.error ?? message} />
      {list.loading && !list.rows.length ? <p class="loading">Loading…</p> : null}
      {!list.loading && !list.error && !list.rows.length ? (
        <p class="empty">No {plural[props.kind]} yet.</p>
      ) : null}
      {list.rows.length ? (
        <table class="billing-list" aria-labelledby={`billing-${props.kind}`}>
          <HeadRow
            columns={[
              'Number',
              'Date',
              { label: 'Amount', amount: true },
              invoice ? { label: 'Balance', amount: true } : 'Method',
              'Site',
              'Details',
            ]}
          />
          <tbody>
            {list.rows.map((item) => (
              <tr key={item.id}>
                <th scope="row">{item.id}</th>
                <td>
                  <time dateTime={item.created_at}>{day(item.created_at)}</time>
                </td>
                <td class="amount">{money(item.amount, item.currency)}</td>
                {invoice ? (
                  <td class="amount">{money(item.balance, item.currency)}</td>
                ) : (
                  <td>
                    {[item.method, item.payment_type].filter(Boolean).join(', ')}
                    {item.payment_reversed_at ? ` (reversed ${day(item.payment_reversed_at)})` : ''}
                  </td>
                )}
                <td>{item.site_name}</td>
                <td class="billing-actions">
                  <button
                    type="button"
                    class="link"
                    aria-label={`${title(item.type, item.id)}: line items`}
                    onClick={() => props.onOpen(item)}
                  >
                    Line items
                  </button>
                  <DocumentLink item={item} loadedAt={loadedAt} onError={setMessage} />
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : null}
      <Pager prev={list.prev} next={list.next} label={`${props.heading} pages`} />
    </section>
  );
}

/** LineItemDialog shows one invoice or payment, asked for afresh, with its nested lines. */
function LineItemDialog(props: { item: LineItem; onClose: () => void }) {
  const [item, setItem] = useState<LineItem | null>(null);
  const [message, setMessage] = useState<Message>(null);
  const [loadedAt, setLoadedAt] = useState(Date.now());
  useEffect(() => {
    let live = true;
    request<LineItem>('GET', `${API}/${plural[props.item.type]}/${props.item.id}`)
      .then(({ data }) => {
        if (!live) return;
        setItem(data);
        setLoadedAt(Date.now());
      })
      .catch((err: unknown) => live && setMessage(failed(err, 'This line item could not be loaded.')));
    return () => {
      live = false;
    };
  }, [props.item]);
  const shown = item ?? props.item;
  const invoice = shown.type === 'invoice';
  return (
    <Dialog title={title(shown.type, shown.id)} onClose={props.onClose} wide>
      <MessageLine message={message} />
      <dl class="billing-facts">
        <dt>Date</dt>
        <dd>{day(shown.created_at)}</dd>
        <dt>Amount</dt>
        <dd>{money(shown.amount, shown.currency)}</dd>
        <dt>Balance</dt>
        <dd>{money(shown.balance, shown.currency)}</dd>
        {shown.method ? (
          <>
            <dt>Method</dt>
            <dd>{shown.method}</dd>
          </>
        ) : null}
        {shown.payment_type ? (
          <>
            <dt>Payment type</dt>
            <dd>{shown.payment_type}</dd>
          </>
        ) : null}
        {shown.payment_reversed_at ? (
          <>
            <dt>Reversed</dt>
            <dd>{day(shown.payment_reversed_at)}</dd>
          </>
        ) : null}
        {shown.site_name ? (
          <>
            <dt>Site</dt>
            <dd>{shown.site_name}</dd>
          </>
        ) : null}
      </dl>
      {invoice ? (
        <table class="billing-lines">
          <caption>Line items</caption>
          <HeadRow columns={['Description', 'Plan', 'Service period', { label: 'Amount', amount: true }]} />
          <tbody>
            {shown.invoice_line_items.map((l, i) => (
              <tr key={i}>
                <td>{l.description || l.type}</td>
                <td>{l.plan}</td>
                <td>
                  {l.service_start_at || l.service_end_at
                    ? `${day(l.service_start_at)} – ${day(l.service_end_at)}`
                    : ''}
                </td>
                <td class="amount">{money(l.amount, shown.currency)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : (
        <table class="billing-lines">
          <caption>Applied to</caption>
          <HeadRow columns={['Invoice', 'Date', { label: 'Amount', amount: true }]} />
          <tbody>
            {shown.payment_line_items.map((l, i) => (
              <tr key={i}>
                <td>{l.invoice_id === null ? '' : `Invoice ${l.invoice_id}`}</td>
                <td>{day(l.created_at)}</td>
                <td class="amount">{money(l.amount, shown.currency)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {(invoice ? shown.invoice_line_items : shown.payment_line_items).length ? null : (
        <p class="empty">No line items.</p>
      )}
      <div class="buttons">
        {item ? <DocumentLink item={item} loadedAt={loadedAt} onError={setMessage} /> : null}
        <button type="button" onClick={props.onClose}>
          Close
        </button>
      </div>
    </Dialog>
  );
}

export function BillingPage(_props: { me: Me }) {
  const [open, setOpen] = useState<LineItem | null>(null);
  return (
    <main class="admin billing">
      <h1>Billing</h1>
      <LineItemList kind="invoice" heading="Invoices" onOpen={setOpen} />
      <LineItemList kind="payment" heading="Payments" onOpen={setOpen} />
      {open ? <LineItemDialog item={open} onClose={() => setOpen(null)} /> : null}
    </main>
  );
}
