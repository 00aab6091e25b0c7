/**
 * Billing (SPEC "AccountLineItem", "Billing"): invoices and payments with their nested line items,
 * loaded by the operator (`svc-gateway billing import <file>`, JSON or CSV, validated whole,
 * idempotent by id) and shown to every authenticated caller, one cursor page at a time.
 * `download_uri` is a signed URL of a printable HTML document of the line item.
 */
import { parse as parseCsv } from 'csv-parse/sync';
import { z } from 'zod';
import { AccountLineItemEntity, type AccountLineItemRow } from '../../db/entities.ts';
import type { CoreContext } from '../context.ts';
import { GatewayError } from '../errors.ts';
import { DOWNLOAD_TTL_S, Signer } from '../files/signed.ts';
import type { Page, PageRequest } from '../pagination.ts';
import type { Principal } from '../principal.ts';

/** InvoiceLineItem is one nested line of an invoice (SPEC AccountLineItem.invoice_line_items). */
export interface InvoiceLineItem {
  amount: number;
  created_at: Date | null;
  description: string;
  type: string;
  service_end_at: Date | null;
  service_start_at: Date | null;
  plan: string;
  site: string;
}

/** PaymentLineItem is one nested line of a payment (SPEC AccountLineItem.payment_line_items). */
export interface PaymentLineItem {
  amount: number;
  created_at: Date | null;
  invoice_id: number | null;
  payment_id: number | null;
}

/** AccountLineItem is SPEC's invoice or payment. */
export interface AccountLineItem {
  id: number;
  amount: number;
  balance: number;
  created_at: Date;
  currency: string;
  download_uri: string;
  invoice_line_items: InvoiceLineItem[];
  method: string;
  payment_line_items: PaymentLineItem[];
  payment_reversed_at: Date | null;
  payment_type: string;
  site_name: string;
  type: 'invoice' | 'payment';
}

/** ImportResult counts what an import did. */
export interface ImportResult {
  created: number;
  updated: number;
  unchanged: number;
}

const date = z.union([z.string(), z.date()]).transform((v, c) => {
  const d = v instanceof Date ? v : new Date(v);
  if (Number.isNaN(d.getTime())) {
    c.addIssue({ code: 'custom', message: 'must be an ISO 8601 date-time' });
    return z.NEVER;
  }
  return d;
});
const optionalDate = z
  .union([date, z.literal(''), z.null()])
  .optional()
  .transform((v) => (v instanceof Date ? v : null));
const money = z.coerce.number({ error: 'must be a number' }).refine(Number.isFinite, 'must be a number');
const optionalText = (max: number) =>
  z
    .string()
    .max(max)
    .nullish()
    .transform((v) => v ?? '');
const optionalId = z.coerce
  .number()
  .int()
  .positive()
  .nullish()
  .transform((v) => v ?? null);

const invoiceLine = z.object({
  amount: money,
  created_at: optionalDate,
  description: optionalText(2000),
  type: optionalText(50),
  service_end_at: optionalDate,
  service_start_at: optionalDate,
  plan: optionalText(250),
  site: optionalText(250),
});
const paymentLine = z.object({
  amount: money,
  created_at: optionalDate,
  invoice_id: optionalId,
  payment_id: optionalId,
});
// In CSV the nested arrays are JSON text in their cell.
const nested = <T extends z.ZodType>(item: T) =>
  z.preprocess((v) => {
    if (v === undefined || v === null || v === '') return [];
    if (typeof v === 'string') {
      try {
        return JSON.parse(v) as unknown;
      } catch {
        return v;
      }
    }
    return v;
  }, z.array(item));

const lineItemSchema = z.object({
  id: z.coerce.number({ error: 'must be a positive integer' }).int().positive().max(Number.MAX_SAFE_INTEGER),
  type: z.enum(['invoice', 'payment']),
  amount: money,
  balance: money.optional().transform((v) => v ?? 0),
  created_at: date,
  currency: z.string().min(1).max(10),
  method: optionalText(50),
  payment_reversed_at: optionalDate,
  payment_type: optionalText(50),
  site_name: optionalText(250),
  invoice_line_items: nested(invoiceLine),
  payment_line_items: nested(paymentLine),
});

type Parsed = z.infer<typeof lineItemSchema>;

/** Billing stores and serves invoices and payments. */
export class Billing {
  private readonly signer: Signer;

  constructor(private readonly ctx: CoreContext) {
    this.signer = new Signer(ctx.secret, 'billing');
  }

  /**
   * parseFile reads an import file: a JSON array of AccountLineItem objects, or CSV with a header
   * row of SPEC's field names (nested line items as JSON text in their cell).
   */
  parseFile(text: string): unknown[] {
    const trimmed = text.replace(/^\uFEFF/, '').trim();
    if (trimmed.startsWith('[')) {
      let doc: unknown;
      try {
        doc = JSON.parse(trimmed);
      } catch (err) {
        throw new GatewayError(
          'bad-request/invalid-body',
          `The file is not valid JSON: ${(err as Error).message}`,
        );
      }
      if (!Array.isArray(doc))
        throw new GatewayError('bad-request/invalid-body', 'The file must be a JSON array');
      return doc;
    }
    try {
      return parseCsv(trimmed, { columns: true, skip_empty_lines: true, trim: true }) as unknown[];
    } catch (err) {
      throw new GatewayError(
        'bad-request/invalid-body',
        `The file is neither a JSON array nor CSV: ${(err as Error).message}`,
      );
    }
  }

  /**
   * import validates every item first (a file with any invalid item is refused whole, naming the
   * item and field), then stores them in one unit of work: new ids are created, changed ones
   * updated, identical ones left alone, so importing the same file twice changes nothing.
   */
  async import(items: unknown[]): Promise<ImportResult> {
    const parsed: Parsed[] = [];
    const problems: string[] = [];
    const seen = new Set<number>();
    items.forEach((item, i) => {
      const r = lineItemSchema.safeParse(item);
      const label = `item ${i + 1}${
        item && typeof item === 'object' && 'id' in item
          ? ` (id ${String((item as { id: unknown }).id)})`
          : ''
      }`;
      if (!r.success) {
        for (const issue of r.error.issues)
          problems.push(`${label}: field ${issue.path.join('.') || '(item)'} ${issue.message}`);
        return;
      }
      if (seen.has(r.data.id)) problems.push(`${label}: field id repeats an earlier item`);
      seen.add(r.data.id);
      parsed.push(r.data);
    });
    if (problems.length)
      throw new GatewayError(
        'bad-request/invalid-body',
        `Nothing imported: ${problems.slice(0, 20).join('; ')}`,
      );
    return this.ctx.db.work(async (em) => {
      const result: ImportResult = { created: 0, updated: 0, unchanged: 0 };
      for (const item of parsed) {
        const row = toRow(item);
        const existing = await em.findOneBy(AccountLineItemEntity, { id: item.id });
        if (!existing) {
          await em.insert(AccountLineItemEntity, row);
          result.created++;
        } else if (sameRow(existing, row)) {
          result.unchanged++;
        } else {
          await em.update(AccountLineItemEntity, { id: item.id }, row);
          result.updated++;
        }
      }
      return result;
    });
  }

  /** list shows one page of invoices or payments, oldest id first (any authenticated caller). */
  async list(_p: Principal, type: 'invoice' | 'payment', req: PageRequest): Promise<Page<AccountLineItem>> {
    const w = this.ctx.paginator.window(`billing:${type}`, req);
    const rows = await this.ctx.db.read((em) =>
      em.find(AccountLineItemEntity, {
        where: { type },
        order: { id: 'ASC' },
        skip: w.offset,
        take: w.perPage + 1,
      }),
    );
    return this.ctx.paginator.page(
      w,
      rows.map((r) => this.view(r)),
    );
  }

  /** get shows one invoice or payment. */
  async get(_p: Principal, type: 'invoice' | 'payment', id: number): Promise<AccountLineItem> {
    const row = await this.ctx.db.read((em) => em.findOneBy(AccountLineItemEntity, { id, type }));
    if (!row) throw new GatewayError(`not-found/${type}-not-found`, `No ${type} ${id}`);
    return this.view(row);
  }

  /** document answers a signed download_uri: the line item as a printable HTML page. */
  async document(token: string): Promise<{ name: string; html: string }> {
    const { id } = this.signer.verify<{ id: number }>(token);
    const row = await this.ctx.db.read((em) => em.findOneBy(AccountLineItemEntity, { id }));
    if (!row) throw new GatewayError('not-found/resource-not-found', 'This line item no longer exists');
    return { name: `${row.type}-${row.id}.html`, html: renderHtml(this.view(row)) };
  }

  private view(r: AccountLineItemRow): AccountLineItem {
    const revive = <T>(text: string, dates: string[]): T[] => {
      const list = text ? (JSON.parse(text) as Record<string, unknown>[]) : [];
      return list.map((o) => {
        const out: Record<string, unknown> = { ...o };
        for (const k of dates) out[k] = typeof o[k] === 'string' ? new Date(o[k]) : null;
        return out as T;
      });
    };
    return {
      id: r.id,
      amount: r.amount,
      balance: r.balance,
      created_at: r.created_at,
      currency: r.currency,
      download_uri: `${this.ctx.config.public_url}/billing/${this.signer.sign({ id: r.id }, DOWNLOAD_TTL_S)}`,
      invoice_line_items: revive<InvoiceLineItem>(r.invoice_line_items, [
        'created_at',
        'service_end_at',
        'service_start_at',
      ]),
      method: r.method,
      payment_line_items: revive<PaymentLineItem>(r.payment_line_items, ['created_at']),
      payment_reversed_at: r.payment_reversed_at,
      payment_type: r.payment_type,
      site_name: r.site_name,
      type: r.type,
    };
  }
}

function toRow(item: Parsed): AccountLineItemRow {
  return {
    id: item.id,
    type: item.type,
    amount: item.amount,
    balance: item.balance,
    created_at: item.created_at,
    currency: item.currency,
    method: item.method,
    payment_reversed_at: item.payment_reversed_at,
    payment_type: item.payment_type,
    site_name: item.site_name,
    invoice_line_items: JSON.stringify(item.invoice_line_items),
    payment_line_items: JSON.stringify(item.payment_line_items),
  };
}

function sameRow(a: AccountLineItemRow, b: AccountLineItemRow): boolean {
  const norm = (r: AccountLineItemRow) =>
    JSON.stringify({
      ...r,
      created_at: r.created_at.getTime(),
      payment_reversed_at: r.payment_reversed_at?.getTime() ?? null,
    });
  return norm(a) === norm(b);
}

const esc = (v: unknown) => String(v ?? '').replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
const day = (d: Date | null) => (d ? d.toISOString().slice(0, 10) : '');

/** renderHtml is the printable document of a line item: plain HTML, no script, no outside assets. */
function renderHtml(item: AccountLineItem): string {
  const title = `${item.type === 'invoice' ? 'Invoice' : 'Payment'} ${item.id}`;
  const money = (n: number) => `${n.toFixed(2)} ${esc(item.currency)}`;
  const rows =
    item.type === 'invoice'
      ? item.invoice_line_items
          .map(
            (l) =>
              `<tr><td>${esc(l.description)}</td><td>${esc(l.plan)}</td><td>${day(l.service_start_at)} – ${day(l.service_end_at)}</td><td class="n">${money(l.amount)}</td></tr>`,
          )
          .join('\n')
      : item.payment_line_items
          .map(
            (l) =>
              `<tr><td>Invoice ${esc(l.invoice_id ?? '')}</td><td>${day(l.created_at)}</td><td class="n">${money(l.amount)}</td></tr>`,
          )
          .join('\n');
  const head =
    item.type === 'invoice'
      ? '<tr><th>Description</th><th>Plan</th><th>Service period</th><th>Amount</th></tr>'
      : '<tr><th>Applied to</th><th>Date</th><th>Amount</th></tr>';
  return `<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>${esc(title)}</title>
<style>body{font-family:sans-serif;max-width:48em;margin:2em auto}table{width:100%;border-collapse:collapse}th,td{border-bottom:1px solid #ccc;padding:.3em;text-align:left}.n{text-align:right}</style>
</head><body>
<h1>${esc(title)}</h1>
<p>${esc(item.site_name)}</p>
<p>Date: ${day(item.created_at)}${item.method ? `<br>Method: ${esc(item.method)}` : ''}${item.payment_reversed_at ? `<br>Reversed: ${day(item.payment_reversed_at)}` : ''}</p>
<table>${head}
${rows}
</table>
<p>Total: <strong>${money(item.amount)}</strong><br>Balance: ${money(item.balance)}</p>
</body></html>
`;
}
